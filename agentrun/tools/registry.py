"""The tool registry: each public tool name bound to its tool, and the toolset an agent runs
with."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from agentrun.core.errors import Interrupted
from agentrun.providers.base import ToolSpec
from agentrun.tools.agent_tools import CheckTokenBudget, SpawnSubagent, SubmitResult
from agentrun.tools.base import TOOL_ERROR, UNKNOWN_TOOL, ToolContext, ToolResult
from agentrun.tools.command import RunCommand
from agentrun.tools.files import EditFile, ListFiles, ReadFile, SearchFiles, WriteFile
from agentrun.tools.names import ALL_TOOLS, known_names
from agentrun.tools.tooldef import ArgsTool

_TOOLS: dict[str, ArgsTool] = {tool.name: tool for tool in (
    ReadFile(), WriteFile(), EditFile(), ListFiles(), SearchFiles(), RunCommand(),
    SpawnSubagent(), CheckTokenBudget(), SubmitResult(),
)}


def tool_specs(names: Iterable[str] | None = None) -> list[ToolSpec]:
    """Specs of the named tools (all when None), in the given order."""
    chosen = list(ALL_TOOLS) if names is None else known_names(names)
    return [_TOOLS[name].spec() for name in chosen]


class Toolset:
    """The tools one agent may call, bound to its worktree and hooks, and to the result model
    its task declares (`output`), if any: then `submit_result` requires it."""

    def __init__(self, ctx: ToolContext, names: Iterable[str] | None = None, *,
                 output: type[BaseModel] | None = None) -> None:
        self.ctx = ctx
        self.names: list[str] = list(ALL_TOOLS) if names is None else known_names(names)
        self._tools = _TOOLS if output is None else {**_TOOLS,
                                                     SubmitResult.name: SubmitResult(output)}

    def specs(self) -> list[ToolSpec]:
        return [self._tools[name].spec() for name in self.names]

    def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Run one tool call; every failure comes back as an error result, never an exception."""
        if name not in self.names:
            return ToolResult.error(UNKNOWN_TOOL, f"unknown tool {name!r}; available tools: "
                                    f"{', '.join(self.names)}")
        try:
            return self._tools[name].run(self.ctx, arguments)
        except Interrupted:
            raise
        except Exception as exc:  # noqa: BLE001 - a tool reports, never raises
            return ToolResult.error(TOOL_ERROR, f"{name} failed: {type(exc).__name__}: {exc}")
