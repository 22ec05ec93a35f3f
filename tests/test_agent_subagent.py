"""Sub-agents: a fresh conversation in the same worktree, depth 1, tokens rolled up."""

from __future__ import annotations

import json

from agent_fixtures import RecordingProvider, call, events, make_repo, make_task, submit, turn

from agentrun.agent.transcript import Transcript
from agentrun.attempts import run_agent


def run(tmp_path, parent_script, child_script, child="code-reviewer", **kwargs):
    repo = make_repo(tmp_path)
    provider = RecordingProvider({"default": parent_script, "agents": {child: child_script}})
    transcript = Transcript(None)
    outcome = run_agent(make_task(repo, **kwargs), provider, transcript=transcript)
    return outcome, provider, transcript, repo


def spawn(**arguments):
    arguments.setdefault("agent", "code-reviewer")
    arguments.setdefault("task", "Review README.md")
    return call("spawn_subagent", **arguments)


def tool_result(provider, name, index=0):
    results = [m for m in provider.requests[-1].messages if m.role == "tool" and m.name == name]
    return json.loads(results[index].content)


def child_requests(provider, agent="code-reviewer"):
    return [r for r in provider.requests if r.agent == agent]


def test_subagent_success_and_token_rollup(tmp_path):
    parent = [turn(spawn(context="Focus on typos."), tokens=10),
              turn(call("check_token_budget"), tokens=10),
              turn(submit(), tokens=10)]
    child = [turn(call("read_file", path="README.md"), tokens=100),
             turn(submit("complete", "No issues found"), tokens=50)]
    outcome, provider, transcript, _ = run(tmp_path, parent, child, token_budget=10_000)
    assert tool_result(provider, "spawn_subagent") == {
        "success": True, "summary": "No issues found", "steps_used": 2, "tokens_used": 150,
        "error": None}
    # the child's tokens count against the parent's budget and usage
    assert tool_result(provider, "check_token_budget")["used"] == 10 + 150 + 10
    assert outcome.usage.total == 180
    assert outcome.status == "complete" and outcome.steps == 3
    # a fresh conversation: the child's system prompt, task and context, its own tools
    first = child_requests(provider)[0]
    assert len(first.messages) == 1
    assert "Review README.md" in first.messages[0].content
    assert "Focus on typos." in first.messages[0].content
    assert "code reviewer" in first.system
    assert {t.name for t in first.tools} == {"read_file", "list_files", "search_files",
                                             "run_command", "submit_result",
                                             "check_token_budget"}
    starts = events(transcript, "subagent_start")
    assert starts[0]["max_steps"] == 10  # limits.subagent_max_steps by default
    assert [e["depth"] for e in events(transcript, "model_turn")] == [0, 1, 1, 0, 0]


def test_subagent_works_in_the_same_worktree(tmp_path):
    parent = [turn(spawn(agent="spec-executor-worker", task="Write notes.txt")),
              turn(submit())]
    child = [turn(call("write_file", path="notes.txt", content="from the child\n")),
             turn(submit("complete", "wrote notes"))]
    outcome, _, _, repo = run(tmp_path, parent, child, child="spec-executor-worker")
    assert (repo / "notes.txt").read_text() == "from the child\n"
    assert outcome.status == "complete"


def test_subagent_failure_is_reported_to_the_parent(tmp_path):
    parent = [turn(spawn(max_steps=2)), turn(submit())]
    child = [turn(call("list_files", pattern="*a")), turn(call("list_files", pattern="*b")),
             turn(submit("complete", "never reached"))]
    _, provider, _, _ = run(tmp_path, parent, child)
    result = tool_result(provider, "spawn_subagent")
    assert result["success"] is False
    assert result["steps_used"] == 2
    assert "step limit (2)" in result["error"]
    assert result["summary"].startswith("Stopped (max_steps) after 2 steps.")
    # and a child that reports failure itself
    parent2 = [turn(spawn()), turn(submit())]
    child2 = [turn(submit("failed", "could not review", error="README is binary"))]
    _, provider2, _, _ = run(tmp_path / "b", parent2, child2)
    result2 = tool_result(provider2, "spawn_subagent")
    assert (result2["success"], result2["error"]) == (False, "README is binary")


def test_subagent_depth_is_capped_at_one(tmp_path):
    parent = [turn(spawn(agent="spec-executor-worker", task="Do a part")), turn(submit())]
    child = [turn(call("spawn_subagent", agent="code-reviewer", task="nested")),
             turn(submit("complete", "did it alone"))]
    _, provider, transcript, _ = run(tmp_path, parent, child, child="spec-executor-worker")
    child_first = child_requests(provider, "spec-executor-worker")[0]
    assert "spawn_subagent" not in {t.name for t in child_first.tools}
    nested = [e for e in events(transcript, "tool_result") if e["depth"] == 1][0]
    assert nested["is_error"] and nested["error_kind"] == "unknown_tool"
    assert child_requests(provider, "code-reviewer") == []
    assert tool_result(provider, "spawn_subagent")["success"] is True


def test_hooks_refuse_nesting_even_if_called_directly(tmp_path):
    from agentrun.agent.subagent import LoopHooks

    hooks = LoopHooks(rt=None, agent=None, tool_names=[], depth=1,  # type: ignore[arg-type]
                      run_conversation=lambda *a: None)  # type: ignore[arg-type,return-value]
    result = hooks.spawn_subagent("code-reviewer", "x", None, None, None)
    assert result["success"] is False and "depth is capped at 1" in result["error"]


def test_subagent_tools_are_a_subset_of_the_parents(tmp_path):
    parent = [turn(spawn(tools=["read_file"])), turn(submit())]
    child = [turn(submit("complete", "ok"))]
    _, provider, _, _ = run(tmp_path, parent, child)
    assert {t.name for t in child_requests(provider)[0].tools} == {
        "read_file", "submit_result", "check_token_budget"}

    project = tmp_path / "proj"
    (project / ".specflow" / "agents").mkdir(parents=True)
    (project / ".specflow" / "agents" / "reader.md").write_text(
        "---\nname: reader\ndescription: reads\ntools: [read_file, spawn_subagent]\n---\n"
        "You read files.\n")
    parent2 = [turn(spawn(tools=["write_file"])), turn(submit())]
    _, provider2, _, _ = run(tmp_path / "b", parent2, child, agent="reader",
                             project_root=project)
    result = tool_result(provider2, "spawn_subagent")
    assert result["success"] is False
    assert "not available to the sub-agent: write_file" in result["error"]
    assert child_requests(provider2) == []


def test_unknown_subagent_lists_the_available_agents(tmp_path):
    parent = [turn(spawn(agent="no-such-agent")), turn(submit())]
    _, provider, _, _ = run(tmp_path, parent, [])
    result = tool_result(provider, "spawn_subagent")
    assert result["success"] is False
    assert "unknown agent 'no-such-agent'" in result["error"]
    assert "code-reviewer" in result["error"]


def test_project_agents_override_packaged_ones(tmp_path):
    project = tmp_path / "proj"
    (project / ".specflow" / "agents").mkdir(parents=True)
    (project / ".specflow" / "agents" / "code-reviewer.md").write_text(
        "---\nname: code-reviewer\ndescription: strict\ntools: [read_file]\nmax_steps: 3\n---\n"
        "You are the project's own strict reviewer.\n")
    parent = [turn(spawn()), turn(submit())]
    child = [turn(submit("complete", "strict review done"))]
    _, provider, _, _ = run(tmp_path, parent, child, project_root=project)
    first = child_requests(provider)[0]
    assert "project's own strict reviewer" in first.system
    assert {t.name for t in first.tools} == {"read_file", "submit_result", "check_token_budget"}
