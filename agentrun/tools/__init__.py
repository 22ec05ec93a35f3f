"""Worker tools: file tools, the command runner, agent tools, and the policy that confines them.

Exports resolve lazily so that importing `agentrun.tools.base` (the seam) stays cheap.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "ALL_TOOLS": "agentrun.tools.names",
    "Toolset": "agentrun.tools.registry",
    "tool_specs": "agentrun.tools.registry",
    "resolve_tool_names": "agentrun.tools.names",
    "PathDenied": "agentrun.tools.paths",
    "resolve_path": "agentrun.tools.paths",
    "check_command": "agentrun.tools.policy",
    "ToolResult": "agentrun.tools.base",
    "ToolContext": "agentrun.tools.base",
    "CommandPolicy": "agentrun.tools.base",
    "AgentHooks": "agentrun.tools.base",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
