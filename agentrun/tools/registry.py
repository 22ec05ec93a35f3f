"""The tool registry: public tool names, their specs, and the toolset an agent runs with."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from agentrun.errors import BadInput, Interrupted
from agentrun.providers.base import ToolSpec
from agentrun.tools.agent_tools import CheckTokenBudget, SpawnSubagent, SubmitResult
from agentrun.tools.base import TOOL_ERROR, UNKNOWN_TOOL, ToolContext, ToolResult
from agentrun.tools.command import RunCommand
from agentrun.tools.files import EditFile, ListFiles, ReadFile, SearchFiles, WriteFile
from agentrun.tools.tooldef import ArgsTool

_TOOLS: dict[str, ArgsTool] = {tool.name: tool for tool in (
    ReadFile(), WriteFile(), EditFile(), ListFiles(), SearchFiles(), RunCommand(),
    SpawnSubagent(), CheckTokenBudget(), SubmitResult(),
)}

ALL_TOOLS: tuple[str, ...] = tuple(_TOOLS)

# Claude Code tool names, as they appear in agent definitions written for it.
CLAUDE_CODE_NAMES = {
    "read": "read_file", "write": "write_file", "edit": "edit_file", "multiedit": "edit_file",
    "bash": "run_command", "glob": "list_files", "ls": "list_files", "grep": "search_files",
    "task": "spawn_subagent",
}
# Claude Code tools with no counterpart here; an agent definition that lists them still works.
IGNORED_NAMES = {
    "webfetch", "websearch", "todowrite", "todoread", "notebookedit", "notebookread",
    "askuserquestion", "exitplanmode", "bashoutput", "killshell", "killbash", "slashcommand",
    "skill",
}


def _unknown(name: str) -> BadInput:
    return BadInput(f"unknown tool {name!r}",
                    f"valid tools: {', '.join(ALL_TOOLS)} (or Claude Code names: "
                    f"{', '.join(sorted({k.title() for k in CLAUDE_CODE_NAMES}))})")


def _check_known(names: Iterable[str]) -> list[str]:
    out: list[str] = []
    for name in names:
        if name not in _TOOLS:
            raise _unknown(name)
        if name not in out:
            out.append(name)
    return out


def resolve_tool_names(agent_tools: list[str] | str | None) -> list[str]:
    """Map an agent definition's `tools:` to our tool names, in order, without duplicates.

    Accepts our names or Claude Code's (`Read, Write, Edit, Bash, Glob, Grep, Task`), as a
    comma-separated string or a list; `Bash(git:*)`-style permissions count as the bare tool,
    Claude Code tools we do not have and `mcp__*` tools are skipped. None, empty or `*` means
    every tool. Raises `BadInput` for a name nobody knows.
    """
    if agent_tools is None:
        return list(ALL_TOOLS)
    items = agent_tools.split(",") if isinstance(agent_tools, str) else list(agent_tools)
    raw = [str(item).strip() for item in items if str(item).strip()]
    if not raw or raw == ["*"]:
        return list(ALL_TOOLS)
    out: list[str] = []
    for item in raw:
        bare = re.sub(r"\(.*\)$", "", item).strip()
        if bare in _TOOLS:
            name = bare
        elif bare.lower() in CLAUDE_CODE_NAMES:
            name = CLAUDE_CODE_NAMES[bare.lower()]
        elif bare.lower() in IGNORED_NAMES or bare.startswith("mcp__"):
            continue
        else:
            raise _unknown(item)
        if name not in out:
            out.append(name)
    return out


def tool_specs(names: Iterable[str] | None = None) -> list[ToolSpec]:
    """Specs of the named tools (all when None), in the given order."""
    chosen = list(ALL_TOOLS) if names is None else _check_known(names)
    return [_TOOLS[name].spec() for name in chosen]


class Toolset:
    """The tools one agent may call, bound to its worktree and hooks."""

    def __init__(self, ctx: ToolContext, names: Iterable[str] | None = None) -> None:
        self.ctx = ctx
        self.names: list[str] = list(ALL_TOOLS) if names is None else _check_known(names)

    def specs(self) -> list[ToolSpec]:
        return tool_specs(self.names)

    def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Run one tool call; every failure comes back as an error result, never an exception."""
        if name not in self.names:
            return ToolResult.error(UNKNOWN_TOOL, f"unknown tool {name!r}; available tools: "
                                    f"{', '.join(self.names)}")
        try:
            return _TOOLS[name].run(self.ctx, arguments)
        except Interrupted:
            raise
        except Exception as exc:  # noqa: BLE001 - a tool reports, never raises
            return ToolResult.error(TOOL_ERROR, f"{name} failed: {type(exc).__name__}: {exc}")
