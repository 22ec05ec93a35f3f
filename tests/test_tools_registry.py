"""Tool names and schemas, the toolset, agent-definition tool names, and the agent tools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentrun.core.errors import BadInput, Interrupted
from agentrun.tools import ALL_TOOLS, Toolset, resolve_tool_names, tool_specs
from agentrun.tools.base import INVALID_ARGUMENTS, TOOL_ERROR, UNKNOWN_TOOL, ToolContext

# each tool's arguments: name -> (required, optional)
SIGNATURES = {
    "read_file": (["path"], ["offset", "limit"]),
    "write_file": (["path", "content"], []),
    "edit_file": (["path", "old", "new"], []),
    "list_files": ([], ["path", "pattern"]),
    "search_files": (["pattern"], ["path", "glob"]),
    "run_command": (["command"], ["timeout_s"]),
    "spawn_subagent": (["agent", "task"], ["context", "tools", "max_steps"]),
    "check_token_budget": ([], []),
    "submit_result": (["status", "summary", "criteria_met", "deviations"],
                      ["error", "no_change_needed"]),
}


def _keys_anywhere(node: Any) -> set[str]:
    if isinstance(node, dict):
        keys = set(node)
        for value in node.values():
            keys |= _keys_anywhere(value)
        return keys
    if isinstance(node, list):
        return set().union(*(_keys_anywhere(v) for v in node)) if node else set()
    return set()


def test_all_tools_in_design_order():
    assert tuple(SIGNATURES) == ALL_TOOLS


@pytest.mark.parametrize("spec", tool_specs(), ids=lambda s: s.name)
def test_specs_match_design_signatures(spec):
    required, optional = SIGNATURES[spec.name]
    params = spec.parameters
    assert spec.description.strip()
    assert params["type"] == "object"
    assert params["additionalProperties"] is False
    assert params["required"] == required
    assert list(params["properties"]) == required + optional
    for prop in params["properties"].values():
        assert prop.get("description") and "type" in prop
    assert not _keys_anywhere(params) & {"title", "anyOf", "$ref", "$defs"}
    json.dumps(params)  # serialisable as is


def test_submit_result_status_is_an_enum():
    spec = tool_specs(["submit_result"])[0]
    assert spec.parameters["properties"]["status"]["enum"] == \
        ["complete", "partial", "failed", "blocked"]


def test_tool_specs_selection_and_unknown():
    assert [s.name for s in tool_specs(["run_command", "read_file", "run_command"])] == \
        ["run_command", "read_file"]
    with pytest.raises(BadInput, match="unknown tool 'browse'") as err:
        tool_specs(["browse"])
    assert "read_file" in err.value.hint


def test_toolset_names_and_unknown_tool(tmp_path):
    tools = Toolset(ToolContext(root=tmp_path), ["read_file", "write_file"])
    assert tools.names == ["read_file", "write_file"]
    assert [s.name for s in tools.specs()] == ["read_file", "write_file"]
    result = tools.call("run_command", {"command": "touch x"})
    assert result.error_kind == UNKNOWN_TOOL and "read_file, write_file" in result.content
    assert not (tmp_path / "x").exists()
    assert Toolset(ToolContext(root=tmp_path)).names == list(ALL_TOOLS)
    with pytest.raises(BadInput, match="nope"):
        Toolset(ToolContext(root=tmp_path), ["read_file", "nope"])


@pytest.mark.parametrize(("name", "arguments"), [
    ("read_file", {"path": 3}),
    ("read_file", {"path": "a", "limit": "many"}),
    ("write_file", {"path": "a"}),
    ("edit_file", {"path": "a", "old": "x"}),
    ("list_files", {"recursive": True}),
    ("search_files", {}),
    ("run_command", {"command": ["ls"]}),
    ("spawn_subagent", {"task": "x"}),
    ("spawn_subagent", {"agent": "a", "task": "t", "max_steps": 0}),
    ("check_token_budget", {"verbose": True}),
    ("submit_result", {"status": "done", "summary": "s", "criteria_met": [],
                       "deviations": []}),
    ("submit_result", {"status": "complete", "summary": "s"}),
])
def test_invalid_arguments_are_reported_not_raised(tmp_path, name, arguments):
    hooks = FakeHooks()
    tools = Toolset(ToolContext(root=tmp_path, hooks=hooks))
    result = tools.call(name, arguments)
    assert result.is_error and result.error_kind == INVALID_ARGUMENTS
    assert result.content.startswith(f"invalid arguments for {name}:")
    assert f"expected: {name}(" in result.content
    assert hooks.calls == []


def test_non_object_arguments(tmp_path):
    tools = Toolset(ToolContext(root=tmp_path))
    assert tools.call("read_file", ["a"]).error_kind == INVALID_ARGUMENTS  # type: ignore[arg-type]


def test_tool_never_raises_on_broken_context(tmp_path):
    tools = Toolset(ToolContext(root=tmp_path / "missing-root"))
    for name, args in [("read_file", {"path": "a"}), ("list_files", {}),
                       ("write_file", {"path": "a", "content": "x"}),
                       ("run_command", {"command": "true"})]:
        result = tools.call(name, args)
        assert result.is_error and result.error_kind in (TOOL_ERROR, "not_found"), name


# --------------------------------------------------------------------- resolve_tool_names

def test_resolve_claude_code_names():
    assert resolve_tool_names("Read, Write, Edit, Bash, Glob, Grep, Task") == [
        "read_file", "write_file", "edit_file", "run_command", "list_files", "search_files",
        "spawn_subagent"]


def test_resolve_our_names_list_and_dedup():
    assert resolve_tool_names(["read_file", "Read", "run_command", "Bash(git:*)"]) == \
        ["read_file", "run_command"]


def test_resolve_all_when_unset():
    for value in (None, "", [], "*", " , "):
        assert resolve_tool_names(value) == list(ALL_TOOLS)


def test_resolve_skips_claude_tools_without_counterpart():
    assert resolve_tool_names("Read, Write, Edit, Bash, Glob, Grep, AskUserQuestion, WebFetch,"
                              " mcp__github__create_issue") == [
        "read_file", "write_file", "edit_file", "run_command", "list_files", "search_files"]


def test_resolve_is_pure():
    assert resolve_tool_names("read_file") == ["read_file"]  # submit_result is not added


def test_resolve_unknown_name():
    with pytest.raises(BadInput, match="unknown tool 'Teleport'") as err:
        resolve_tool_names("Read, Teleport")
    assert "read_file" in err.value.hint and "Bash" in err.value.hint


# ----------------------------------------------------------------------------- agent tools

class FakeHooks:
    """A real implementation of the AgentHooks seam that records its calls."""

    def __init__(self, fail: BaseException | None = None, reply: Any = None) -> None:
        self.calls: list[tuple[str, tuple]] = []
        self.fail = fail
        self.reply = reply

    def _answer(self, name: str, *args: Any) -> Any:
        self.calls.append((name, args))
        if self.fail is not None:
            raise self.fail
        return self.reply if self.reply is not None else {"hook": name}

    def token_budget(self) -> dict[str, Any]:
        if self.reply is None and self.fail is None:
            self.calls.append(("token_budget", ()))
            return {"used": 1200, "limit": 10000, "remaining": 8800}
        return self._answer("token_budget")

    def spawn_subagent(self, agent, task, context, tools, max_steps) -> dict[str, Any]:
        return self._answer("spawn_subagent", agent, task, context, tools, max_steps)

    def submit_result(self, status, summary, criteria_met, deviations, error,
                      output, no_change_needed=None) -> dict[str, Any]:
        return self._answer("submit_result", status, summary, criteria_met, deviations, error,
                            output)


def toolset(tmp_path: Path, hooks: FakeHooks | None) -> Toolset:
    return Toolset(ToolContext(root=tmp_path, hooks=hooks))


def test_check_token_budget_returns_hook_dict(tmp_path):
    result = toolset(tmp_path, FakeHooks()).call("check_token_budget", {})
    assert not result.is_error
    assert json.loads(result.content) == {"used": 1200, "limit": 10000, "remaining": 8800}
    assert result.data == {"used": 1200, "limit": 10000, "remaining": 8800}


def test_spawn_subagent_passes_arguments_and_resolves_tools(tmp_path):
    hooks = FakeHooks()
    result = toolset(tmp_path, hooks).call("spawn_subagent", {
        "agent": "tester", "task": "write tests", "context": "see src/",
        "tools": ["Read", "Grep", "run_command"], "max_steps": 5})
    assert not result.is_error and result.data == {"hook": "spawn_subagent"}
    assert hooks.calls == [("spawn_subagent", ("tester", "write tests", "see src/",
                                               ["read_file", "search_files", "run_command"], 5))]


def test_spawn_subagent_defaults_and_unknown_tool(tmp_path):
    hooks = FakeHooks()
    tools = toolset(tmp_path, hooks)
    tools.call("spawn_subagent", {"agent": "a", "task": "t"})
    assert hooks.calls[-1] == ("spawn_subagent", ("a", "t", None, None, None))
    bad = tools.call("spawn_subagent", {"agent": "a", "task": "t", "tools": ["Fly"]})
    assert bad.error_kind == INVALID_ARGUMENTS and "Fly" in bad.content
    assert len(hooks.calls) == 1


def test_submit_result_passes_fields(tmp_path):
    hooks = FakeHooks(reply={"accepted": True})
    result = toolset(tmp_path, hooks).call("submit_result", {
        "status": "partial", "summary": "did half", "criteria_met": ["AC1"],
        "deviations": ["skipped G3"], "error": "ran out of time"})
    assert result.data == {"accepted": True} and json.loads(result.content) == {"accepted": True}
    assert hooks.calls == [("submit_result", ("partial", "did half", ["AC1"], ["skipped G3"],
                                              "ran out of time", None))]


@pytest.mark.parametrize("name,args", [
    ("check_token_budget", {}),
    ("spawn_subagent", {"agent": "a", "task": "t"}),
    ("submit_result", {"status": "complete", "summary": "s", "criteria_met": [],
                       "deviations": []}),
])
def test_agent_tools_without_hooks(tmp_path, name, args):
    result = toolset(tmp_path, None).call(name, args)
    assert result.error_kind == TOOL_ERROR and "not available in this context" in result.content


def test_hook_failure_becomes_tool_error(tmp_path):
    result = toolset(tmp_path, FakeHooks(fail=RuntimeError("loop exploded"))).call(
        "spawn_subagent", {"agent": "a", "task": "t"})
    assert result.error_kind == TOOL_ERROR and "loop exploded" in result.content


def test_hook_returning_non_dict_is_tool_error(tmp_path):
    result = toolset(tmp_path, FakeHooks(reply=["not", "a", "dict"])).call(
        "check_token_budget", {})
    assert result.error_kind == TOOL_ERROR and "list" in result.content


def test_interruption_propagates(tmp_path):
    tools = toolset(tmp_path, FakeHooks(fail=Interrupted("stopped")))
    with pytest.raises(Interrupted):
        tools.call("spawn_subagent", {"agent": "a", "task": "t"})
