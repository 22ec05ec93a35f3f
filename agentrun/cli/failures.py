"""What a user is told when a command stops with an error: the CLI's error boundary
(`cli/app.py`) and the event stream's last line (`cli/ci_report.py`) say the same."""

from __future__ import annotations

from agentrun.core.errors import AgentrunError, no_space, not_writable, path_error


class InternalError(AgentrunError):
    """An error agentrun did not expect: a bug (exit 1)."""


def user_error(exc: Exception) -> AgentrunError:
    """The error a user is told about for `exc`: a git command that met a full disk or a
    checkout it cannot write, an OSError that names a path in the way, else `exc` itself, or
    an internal error."""
    if isinstance(exc, AgentrunError):
        from agentrun.gitcli import GitError

        return no_space(exc) or (not_writable(exc) if isinstance(exc, GitError) else None) \
            or exc
    known = no_space(exc) or path_error(exc)
    if known is not None:
        return known
    return InternalError(f"internal error: {type(exc).__name__}: {exc}",
                         "this is a bug in agentrun; rerun with AGENTRUN_DEBUG=1 for the "
                         "traceback")
