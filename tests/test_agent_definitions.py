"""Agent definitions, limits scaled by complexity, and prompt templates."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrun.agent.definitions import available_agents, load_agent
from agentrun.agent.prompts import render, render_worker_assignment
from agentrun.agent.terminator import RETRY_CONDITIONS, limits_for
from agentrun.core.errors import BadInput
from agentrun.resources import packaged_dir

PACKAGED = ["code-reviewer", "spec-auditor", "spec-executor", "spec-executor-orchestrator",
            "spec-executor-worker"]


def write_agent(root: Path, name: str, text: str) -> Path:
    path = root / ".specflow" / "agents" / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", PACKAGED)
def test_packaged_agents_follow_the_structure(name):
    agent = load_agent(name)
    assert agent.name == name and agent.description
    for tag in ("<role>", "<philosophy>", "<process>", "<output>", "<success_criteria>"):
        assert tag in agent.system_prompt
    assert "submit_result" in agent.tools


def test_code_reviewer_is_read_only():
    tools = load_agent("code-reviewer").tools
    assert not {"write_file", "edit_file", "spawn_subagent"} & set(tools)


def test_unknown_agent_lists_available_ones(tmp_path):
    write_agent(tmp_path, "mine", "---\nname: mine\ndescription: d\n---\nBody\n")
    assert set(PACKAGED) | {"mine"} == set(available_agents(tmp_path))
    with pytest.raises(BadInput) as err:
        load_agent("nope", tmp_path)
    assert "unknown agent 'nope'" in err.value.message
    assert "mine" in err.value.hint and "spec-executor" in err.value.hint
    with pytest.raises(BadInput):
        load_agent("../agents/spec-executor")


def test_project_definition_overrides_and_claude_code_tool_names(tmp_path):
    write_agent(tmp_path, "spec-executor", (
        "---\nname: spec-executor\ndescription: ours\ntools: Read, Write, Bash, WebFetch\n"
        "model: some-model\nmax_steps: 12\n---\nProject executor.\n"))
    agent = load_agent("spec-executor", tmp_path)
    assert agent.description == "ours"
    assert agent.tools == ["read_file", "write_file", "run_command"]
    assert (agent.model, agent.max_steps) == ("some-model", 12)
    assert agent.system_prompt == "Project executor.\n"
    assert agent.path == tmp_path / ".specflow" / "agents" / "spec-executor.md"
    assert load_agent("spec-executor").path.parent == packaged_dir("agents")


def test_missing_tools_key_means_every_tool(tmp_path):
    write_agent(tmp_path, "all", "---\nname: all\ndescription: d\n---\nBody\n")
    assert "spawn_subagent" in load_agent("all", tmp_path).tools


@pytest.mark.parametrize(("text", "problem"), [
    ("no frontmatter\n", "has no frontmatter"),
    ("---\nname: bad\n", "frontmatter is not closed"),
    ("---\nname: [unclosed\n---\nBody\n", "invalid YAML"),
    ("---\n- a list\n---\nBody\n", "must be a mapping"),
    ("---\nname: bad\ncolour: red\n---\nBody\n", "unknown frontmatter key(s) colour"),
    ("---\nname: other\n---\nBody\n", "declares name 'other'"),
    ("---\nname: bad\n---\n\n", "has no system prompt"),
    ("---\nname: bad\ntools: [read_file, teleport]\n---\nBody\n", "unknown tool 'teleport'"),
    ("---\nname: bad\ntools: 3\n---\nBody\n", "must be a list of tool names"),
    ("---\nname: bad\nmax_steps: lots\n---\nBody\n", "positive integer"),
])
def test_broken_definitions_name_the_problem(tmp_path, text, problem):
    path = write_agent(tmp_path, "bad", text)
    with pytest.raises(BadInput) as err:
        load_agent("bad", tmp_path)
    assert problem in err.value.message
    assert str(path) in err.value.message
    assert err.value.hint


# -- limits -------------------------------------------------------------------------------------


def test_limits_scale_with_complexity():
    small, medium, large = (limits_for(c) for c in ("small", "medium", "large"))
    assert small.max_steps < medium.max_steps < large.max_steps
    assert small.max_duration_s < medium.max_duration_s < large.max_duration_s
    assert small.max_consecutive_failures < large.max_consecutive_failures
    assert limits_for(None) == medium == limits_for("unheard-of")
    assert limits_for("simple") == small and limits_for("Complex") == large
    assert medium.token_budget == 100_000 and medium.retries == 3
    assert medium.retry_conditions == RETRY_CONDITIONS
    assert (medium.reflection_after_errors, medium.max_backtracks) == (3, 5)


def test_agent_max_steps_then_overrides_win(tmp_path):
    agent = load_agent("code-reviewer")  # max_steps: 10
    assert limits_for("large", agent).max_steps == 10
    limits = limits_for("large", agent, {"max_steps": "25", "token_budget": 5000,
                                         "retry_on_failure": "false", "max_duration_s": None,
                                         "retry_conditions": "build_errors, max_steps"})
    assert limits.max_steps == 25 and limits.token_budget == 5000
    assert limits.retry_on_failure is False
    assert limits.max_duration_s == limits_for("large").max_duration_s  # None: flag not set
    assert limits.retry_conditions == {"build_errors", "max_steps"}
    assert limits_for(None, None, {"retry_conditions": "none"}).retry_conditions == frozenset()


@pytest.mark.parametrize(("overrides", "problem"), [
    ({"max_stepz": 3}, "unknown limit 'max_stepz'"),
    ({"max_steps": "many"}, "must be a int"),
    ({"max_steps": 0}, "out of range"),
    ({"retry_conditions": ["flaky"]}, "unknown retry condition(s): flaky"),
])
def test_bad_overrides_are_bad_input(overrides, problem):
    with pytest.raises(BadInput) as err:
        limits_for("small", None, overrides)
    assert problem in err.value.message and err.value.hint


# -- prompts ------------------------------------------------------------------------------------


def test_worker_assignment_renders_every_part():
    text = render_worker_assignment({
        "spec": {"id": "SPEC-7", "title": "Login"},
        "groups": [{"id": "G2", "title": "API", "tasks": ["Add `api/login.py`"],
                    "dependencies": ["G1"], "files": ["api/login.py"]}],
        "sections": {"context": "Users need login.", "requirements": "POST /login",
                     "constraints": "No new deps"},
        "acceptance_criteria": "- [ ] Login works\n- [ ] Errors are 401",
        "project_md": "Use pytest.",
        "validation_command": "pytest -q",
    })
    for part in ("# Assignment: SPEC-7 — Login", "### G2: API", "Depends on: G1",
                 "- Add `api/login.py`", "Files: `api/login.py`", "Users need login.",
                 "POST /login", "- [ ] Login works", "- [ ] Errors are 401", "No new deps",
                 "Use pytest.", "Run `pytest -q`", "submit_result"):
        assert part in text, part


def test_worker_assignment_without_optional_parts():
    text = render_worker_assignment({"spec_id": "SPEC-1", "groups": [{"id": "G1"}]})
    assert "## Context" not in text and "## Constraints" not in text
    assert "Run `" not in text and "**G1**" in text


def test_project_prompt_override_and_strict_undefined(tmp_path):
    path = tmp_path / ".specflow" / "prompts" / "retry.md"
    path.parent.mkdir(parents=True)
    path.write_text("Again: {{ error }}")
    assert render("retry", {"error": "boom"}, tmp_path) == "Again: boom\n"
    path.write_text("Again: {{ no_such_value }}")
    with pytest.raises(BadInput) as err:
        render("retry", {"error": "boom"}, tmp_path)
    assert "no_such_value" in err.value.message and str(path) in err.value.message
    path.write_text("Again: {% if %}")
    with pytest.raises(BadInput):
        render("retry", {}, tmp_path)
    with pytest.raises(BadInput) as missing:
        render("nonexistent", {})
    assert "retry" in missing.value.hint


def test_worker_assignment_renders_the_protocol_assignment():
    from agentrun.protocol import Assignment

    assignment = Assignment.model_validate({
        "run_id": "r1", "spec_id": "SPEC-9", "spec_path": "s.md", "spec_title": "Cache",
        "batch": "b1", "worktree": "/w", "branch": "agentrun/r1/b1", "base_commit": "abc",
        "groups": [{"id": "G3", "title": "Store", "tasks": ["Write `cache.py`"],
                    "dependencies": ["G1"], "files": ["cache.py"]}],
        "sections": {"context": "Slow reads.", "requirements": "An LRU cache.",
                     "constraints": "stdlib only"},
        "acceptance_criteria": ["Hits are fast"], "project_md": "Python 3.11",
        "provider": {"provider": "scripted", "model": "scripted"}, "result_path": "r.json",
        "validation_command": "pytest -q"})
    text = render_worker_assignment(assignment.model_dump())
    for part in ("SPEC-9 — Cache", "### G3: Store", "Slow reads.", "An LRU cache.",
                 "stdlib only", "- [ ] Hits are fast", "Python 3.11", "`pytest -q`",
                 "agentrun/r1/b1"):
        assert part in text, part
