"""Agent tools: sub-agents, the token budget and the final result.

They are thin on purpose: validate the arguments, call the agent loop's hooks
(`ctx.hooks`), and return the hook's dict as JSON. The behaviour lives in the loop.

A task may declare the structured result it needs (a pydantic model): its `submit_result`
then takes a required `output` argument whose schema is that model's, so an invalid result is
refused like any invalid argument, field by field, and the model can correct it.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from agentrun.core.errors import BadInput
from agentrun.tools.base import INVALID_ARGUMENTS, TOOL_ERROR, ToolContext, ToolResult
from agentrun.tools.names import resolve_tool_names
from agentrun.tools.tooldef import ArgsTool, ToolArgs

OUTPUT_HELP = ("The result your task asks for, as one JSON object matching this schema. An "
               "invalid one is refused with the fields to fix.")


def _hook_result(tool: str, value: Any) -> ToolResult:
    if not isinstance(value, dict):
        return ToolResult.error(TOOL_ERROR, f"{tool} failed: the agent loop returned "
                                f"{type(value).__name__}, not a JSON object")
    return ToolResult(json.dumps(value, ensure_ascii=False, default=str), data=value)


def _no_hooks(tool: str) -> ToolResult:
    return ToolResult.error(TOOL_ERROR, f"{tool} is not available in this context")


class SpawnSubagent(ArgsTool):
    name = "spawn_subagent"
    description = (
        "Delegate a focused sub-task to a fresh sub-agent (its own context, the same worktree). "
        "Returns its result. Sub-agents cannot spawn further sub-agents; their token use counts "
        "against your budget.")

    class Args(ToolArgs):
        agent: str = Field(min_length=1, description="Name of the agent definition to run.")
        task: str = Field(min_length=1, description="What the sub-agent must do, self-contained.")
        context: str | None = Field(None, description="Extra context the sub-agent needs "
                                    "(files, decisions, constraints).")
        tools: list[str] | None = Field(None, min_length=1, description=(
            "Tool names the sub-agent may use. Default: those of its agent definition."))
        max_steps: int | None = Field(None, ge=1, description="Step limit for the sub-agent.")

    def execute(self, ctx: ToolContext, args: SpawnSubagent.Args) -> ToolResult:
        if ctx.hooks is None:
            return _no_hooks(self.name)
        tools = args.tools
        if tools is not None:
            try:
                tools = resolve_tool_names(tools)
            except BadInput as exc:
                return ToolResult.error(INVALID_ARGUMENTS, f"{self.name}: {exc}")
        value = ctx.hooks.spawn_subagent(args.agent, args.task, args.context, tools,
                                         args.max_steps)
        return _hook_result(self.name, value)


class CheckTokenBudget(ArgsTool):
    name = "check_token_budget"
    description = ("Report how many tokens you have used and how many remain in your budget. "
                   "Use it before large reads or long work to decide whether to wrap up.")

    class Args(ToolArgs):
        pass

    def execute(self, ctx: ToolContext, args: CheckTokenBudget.Args) -> ToolResult:
        if ctx.hooks is None:
            return _no_hooks(self.name)
        return _hook_result(self.name, ctx.hooks.token_budget())


class SubmitResult(ArgsTool):
    name = "submit_result"
    description = (
        "Finish your work and report the outcome. Call it exactly once, last. Files and commits "
        "are taken from git, so report only status, summary, the acceptance criteria met, and "
        "any deviations from the spec.")

    class ResultArgs(ToolArgs):
        status: Literal["complete", "partial", "failed", "blocked"] = Field(description=(
            "complete: everything done; partial: some tasks done; failed: could not do it; "
            "blocked: cannot proceed without outside help."))
        summary: str = Field(min_length=1, description="What was done, in a few sentences.")
        criteria_met: list[str] = Field(description="Acceptance criteria that are now met.")
        deviations: list[str] = Field(description="Deviations from the spec, with reasons.")
        error: str | None = Field(None, description="What went wrong (failed/blocked only).")
        no_change_needed: str | None = Field(None, min_length=1, description=(
            "Only with status complete when you committed no change: why the spec needs "
            "none (e.g. what already implements it). Without it, complete with no change "
            "counts as partial."))

    Args: type[ToolArgs] = ResultArgs  # with a result model, an instance's adds `output`

    def __init__(self, output: type[BaseModel] | None = None) -> None:
        if output is not None:
            self.Args = _args_with_output(output)

    def execute(self, ctx: ToolContext, args: SubmitResult.ResultArgs) -> ToolResult:
        if ctx.hooks is None:
            return _no_hooks(self.name)
        output = getattr(args, "output", None)  # only when the task declares a result model
        value = ctx.hooks.submit_result(args.status, args.summary, list(args.criteria_met),
                                        list(args.deviations), args.error, output,
                                        no_change_needed=args.no_change_needed)
        return _hook_result(self.name, value)


@functools.cache
def _args_with_output(output: type[BaseModel]) -> type[SubmitResult.ResultArgs]:
    """`submit_result`'s arguments plus a required `output` of the task's model (one class per
    model, so its schema is generated once)."""
    return create_model(f"SubmitResultArgs{output.__name__}", __base__=SubmitResult.ResultArgs,
                        output=(output, Field(description=OUTPUT_HELP)))
