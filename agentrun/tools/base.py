"""The tool seam: what a tool returns, and the hooks the agent loop provides (a tool itself is
`tooldef.ArgsTool`).

A tool never raises into the loop: every failure comes back as a `ToolResult` with
`is_error=True` and an `error_kind` the loop's error classifier can act on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agentrun.core.limits import DEFAULT_MAX_WRITE_BYTES
from agentrun.core.secrets import SECRET_SUFFIXES
from agentrun.sandbox.base import Sandbox
from agentrun.sandbox.local import LocalSandbox

if TYPE_CHECKING:
    from pydantic import BaseModel

# error_kind values a tool may report
INVALID_ARGUMENTS = "invalid_arguments"  # bad/missing arguments: the model can correct itself
NOT_FOUND = "not_found"  # a path or match does not exist
PATH_DENIED = "path_denied"  # confinement: outside the worktree, symlink escape
COMMAND_DENIED = "command_denied"  # deny list hit (git push, sudo, ...)
TIMEOUT = "timeout"  # run_command exceeded its timeout
COMMAND_FAILED = "command_failed"  # non-zero exit status
UNKNOWN_TOOL = "unknown_tool"
TOOL_ERROR = "tool_error"  # anything else


@dataclass
class ToolResult:
    content: str
    is_error: bool = False
    error_kind: str | None = None
    data: dict[str, Any] | None = None  # structured payload (exit code, submitted result, ...)

    @classmethod
    def error(cls, kind: str, message: str, **data: Any) -> ToolResult:
        return cls(content=message, is_error=True, error_kind=kind, data=data or None)


class AgentHooks(Protocol):
    """Behaviour of the agent tools, supplied by the agent loop."""

    def token_budget(self) -> dict[str, Any]: ...

    def spawn_subagent(self, agent: str, task: str, context: str | None,
                       tools: list[str] | None, max_steps: int | None) -> dict[str, Any]: ...

    def submit_result(self, status: str, summary: str, criteria_met: list[str],
                      deviations: list[str], error: str | None,
                      output: BaseModel | None,
                      no_change_needed: str | None = None) -> dict[str, Any]: ...


@dataclass
class CommandPolicy:
    """How `run_command` may run (time limit, output cap, deny list, environment scrubbing) and
    how large one `write_file` may be."""

    default_timeout_s: float = 120.0
    max_timeout_s: float = 900.0
    max_output_chars: int = 20_000
    deny: list[str] = field(default_factory=list)  # extra regexes on top of the built-in list
    secret_suffixes: tuple[str, ...] = SECRET_SUFFIXES
    env_allow: tuple[str, ...] = ()  # more variables commands see (config `command_env`)
    max_write_bytes: int = DEFAULT_MAX_WRITE_BYTES  # config `max_write_bytes`


@dataclass
class ToolContext:
    """What every tool call may use: the worktree root it is confined to, the loop's hooks, and
    the sandbox commands run in (the worker's, so that it can stop them)."""

    root: Path
    policy: CommandPolicy = field(default_factory=CommandPolicy)
    hooks: AgentHooks | None = None
    sandbox: Sandbox = field(default_factory=LocalSandbox)

