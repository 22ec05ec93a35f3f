"""What the worker pool's server does once, so that no worker does it again.

`agentrun.run.pool` starts workers from a forkserver; this module is imported there before the
first worker is forked. Importing the worker code, generating the tools' argument schemas and
compiling the packaged prompt templates would otherwise cost every worker process tens of
milliseconds of CPU, and on a small machine the workers of a wave compete for it. So would
building the validators of the progress events every worker emits (they are built on first use,
to keep the command line's start quick), and so would a git process per worker reading the
user's git settings.
"""

from __future__ import annotations

import contextlib
import errno
import socket
from multiprocessing import reduction

import agentrun.attempts
import agentrun.providers.scripted
import agentrun.worker  # noqa: F401 - imported to be inherited by every worker
from agentrun import gitconfig
from agentrun.agent.prompts import compile_template
from agentrun.core.events import progress
from agentrun.core.events.base import BaseEvent
from agentrun.resources import list_resources
from agentrun.tools.registry import tool_specs


def _survive_stray_connections() -> None:
    """The server's loop (the standard library's) ends on a connection that sends no request:
    recvfds raises EOFError, which it does not catch, and every later worker start of the run
    fails with it. Any local process can connect to the socket; such a connection is an aborted
    one, which the loop already steps past."""
    receive = reduction.recvfds

    def recvfds(sock: socket.socket, size: int) -> list[int]:
        try:
            return receive(sock, size)
        except (EOFError, RuntimeError, OSError) as exc:
            raise ConnectionAbortedError(errno.ECONNABORTED, f"no request: {exc!r}") from None

    reduction.recvfds = recvfds


_survive_stray_connections()
tool_specs()
for _event in vars(progress).values():  # a worker's events: each builds its schema on first use
    if isinstance(_event, type) and issubclass(_event, BaseEvent) and "type" in _event.model_fields:
        with contextlib.suppress(Exception):  # then built on first use, as without the preload
            _event.model_rebuild(force=True)
with contextlib.suppress(Exception):  # no git here: each worker will say so
    gitconfig.read_user_settings()
for _path in list_resources("prompts").values():
    with contextlib.suppress(OSError):  # unreadable: the worker that needs it will say so
        compile_template(_path.read_text(encoding="utf-8"))
