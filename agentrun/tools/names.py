"""Tool names: the public ones, and how an agent definition's `tools:` maps onto them.

The names are public (agent definitions list them), so they are fixed here rather than derived
from the tool classes; the registry binds each name to its tool. Knowing the names needs no
tool, which lets `spawn_subagent` check the tools it hands on without importing the registry.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from agentrun.core.errors import BadInput

ALL_TOOLS: tuple[str, ...] = (
    "read_file", "write_file", "edit_file", "list_files", "search_files", "run_command",
    "spawn_subagent", "check_token_budget", "submit_result",
)

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


def unknown_tool(name: str) -> BadInput:
    return BadInput(f"unknown tool {name!r}",
                    f"valid tools: {', '.join(ALL_TOOLS)} (or Claude Code names: "
                    f"{', '.join(sorted({k.title() for k in CLAUDE_CODE_NAMES}))})")


def known_names(names: Iterable[str]) -> list[str]:
    """`names` in order without duplicates; `BadInput` for one that is not ours."""
    out: list[str] = []
    for name in names:
        if name not in ALL_TOOLS:
            raise unknown_tool(name)
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
        if bare in ALL_TOOLS:
            name = bare
        elif bare.lower() in CLAUDE_CODE_NAMES:
            name = CLAUDE_CODE_NAMES[bare.lower()]
        elif bare.lower() in IGNORED_NAMES or bare.startswith("mcp__"):
            continue
        else:
            raise unknown_tool(item)
        if name not in out:
            out.append(name)
    return out
