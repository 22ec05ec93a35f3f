"""A task's result model as `submit_result`'s `output`: its schema, and refusals by field."""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

from agentrun.audit.verdict import AuditVerdict
from agentrun.tools.agent_tools import SubmitResult
from agentrun.tools.base import INVALID_ARGUMENTS, ToolContext
from agentrun.tools.names import ALL_TOOLS
from agentrun.tools.registry import Toolset, tool_specs
from agentrun.tools.tooldef import clean_schema


class Item(BaseModel):
    name: str = Field(description="What it is called.")
    size: int = Field(ge=1)


class Report(BaseModel):
    """A small report."""

    grade: Literal["good", "bad"]
    items: list[Item] = Field(default_factory=list)
    note: str | None = None


class Hooks:
    """The AgentHooks seam, recording what reaches it."""

    def __init__(self) -> None:
        self.submitted: list[tuple[Any, ...]] = []

    def token_budget(self) -> dict[str, Any]:
        return {}

    def spawn_subagent(self, agent, task, context, tools, max_steps) -> dict[str, Any]:
        return {}

    def submit_result(self, status, summary, criteria_met, deviations, error,
                      output, no_change_needed=None) -> dict[str, Any]:
        self.submitted.append((status, summary, output))
        return {"accepted": True}


def submit(**extra: Any) -> dict[str, Any]:
    return {"status": "complete", "summary": "done", "criteria_met": [], "deviations": [],
            **extra}


def _keys_anywhere(node: Any) -> set[str]:
    if isinstance(node, dict):
        return set(node).union(*(_keys_anywhere(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_keys_anywhere(v) for v in node))
    return set()


def test_every_public_name_is_bound_to_a_tool_of_that_name():
    assert [spec.name for spec in tool_specs()] == list(ALL_TOOLS)


def test_the_output_schema_is_the_models_and_required():
    params = Toolset(ToolContext(root="."), ["submit_result"], output=Report).specs()[0] \
        .parameters
    assert params["required"] == ["status", "summary", "criteria_met", "deviations", "output"]
    output = params["properties"]["output"]
    assert output["type"] == "object" and output["required"] == ["grade"]
    assert output["properties"]["grade"]["enum"] == ["good", "bad"]
    item = output["properties"]["items"]["items"]  # the nested model, inlined
    assert item["properties"]["name"]["description"] == "What it is called."
    assert item["properties"]["size"] == {"minimum": 1, "type": "integer"}
    assert not _keys_anywhere(params) & {"title", "$ref", "$defs"}
    json.dumps(params)


def test_the_auditor_verdict_schema_is_offered_whole():
    output = SubmitResult(AuditVerdict).spec().parameters["properties"]["output"]
    assert output["properties"]["status"]["enum"] == [
        "APPROVED", "NEEDS_REVISION", "NEEDS_DECOMPOSITION"]
    group = output["properties"]["task_groups"]["items"]
    assert group["required"] == ["id", "tasks"] and "files" in group["properties"]
    assert not _keys_anywhere(output) & {"$ref", "$defs"}


def test_without_a_result_model_nothing_changes():
    assert SubmitResult().spec() == tool_specs(["submit_result"])[0]
    assert "output" not in SubmitResult().spec().parameters["properties"]


def test_a_valid_output_reaches_the_hooks_validated(tmp_path):
    hooks = Hooks()
    tools = Toolset(ToolContext(root=tmp_path, hooks=hooks), output=Report)
    result = tools.call("submit_result", submit(output={
        "grade": "good", "items": [{"name": "a", "size": 2}]}))
    assert not result.is_error, result.content
    [(_, _, output)] = hooks.submitted
    assert output == Report(grade="good", items=[Item(name="a", size=2)])


@pytest.mark.parametrize(("output", "says"), [
    (None, "- output: missing (required)"),
    ({"grade": "fine"}, "- output.grade: Input should be 'good' or 'bad'"),
    ({"grade": "good", "items": [{"name": "a", "size": 0}]},
     "- output.items.0.size: Input should be greater than or equal to 1"),
    ("not an object", "- output: Input should be a valid dictionary or instance of Report"),
])
def test_an_invalid_output_is_refused_naming_the_field(tmp_path, output, says):
    hooks = Hooks()
    tools = Toolset(ToolContext(root=tmp_path, hooks=hooks), output=Report)
    args = submit() if output is None else submit(output=output)
    result = tools.call("submit_result", args)
    assert result.is_error and result.error_kind == INVALID_ARGUMENTS
    assert says in result.content, result.content
    assert "expected: submit_result(status, summary, criteria_met, deviations, error?, " \
           "no_change_needed?, output)" in result.content
    assert hooks.submitted == []


def test_a_model_level_check_is_named_without_pydantics_prefix(tmp_path):
    tools = Toolset(ToolContext(root=tmp_path, hooks=Hooks()), output=AuditVerdict)
    result = tools.call("submit_result", submit(output={
        "status": "APPROVED", "critical_issues": ["x"]}))
    assert "- output: status is APPROVED but 1 critical issue(s)" in result.content


def test_output_is_refused_when_the_task_declares_none(tmp_path):
    hooks = Hooks()
    result = Toolset(ToolContext(root=tmp_path, hooks=hooks)).call(
        "submit_result", submit(output={"grade": "good"}))
    assert result.error_kind == INVALID_ARGUMENTS and "- output: unexpected argument" in \
        result.content
    assert hooks.submitted == []


class Node(BaseModel):
    value: int
    children: list[Node] = Field(default_factory=list)


class Tree(BaseModel):
    tree: Node


def test_a_recursive_model_keeps_its_references():
    schema = clean_schema(Tree.model_json_schema())
    node = schema["properties"]["tree"]
    assert node["properties"]["value"] == {"type": "integer"}
    assert node["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert "Node" in schema["$defs"]  # the inner reference stays, and so does its target
