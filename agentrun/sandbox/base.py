"""The sandbox seam: run one command in a directory, and stop everything that was started.

Every command a worker runs (the model's `run_command`, the validation command) goes through
the worker's one `Sandbox`, so that the worker can stop all of them when it is told to stop,
and so that a stricter sandbox (bubblewrap) can replace the local one without the callers
knowing.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

# told ("spawn" | "spawn_end", process group id) when a command starts and when it is gone, so
# that whoever supervises the worker can kill a group the worker could not (after a SIGKILL)
SpawnListener = Callable[[str, int], None]


def unchanged(text: str) -> str:
    return text


class OutputFollower:
    """An `on_output` that can also catch up: `catch_up()` shows it, at once, whatever the
    command has written that the sandbox's reader has not read yet. For a caller that acts on
    what the command sends elsewhere (a coding-agent CLI's model call, through the key proxy)
    and must first see all the command wrote before sending it."""

    def __init__(self, feed: Callable[[bytes], None]) -> None:
        self.feed = feed
        self._catch_up: Callable[[], object] | None = None

    def __call__(self, chunk: bytes) -> None:
        self.feed(chunk)

    def attach(self, catch_up: Callable[[], object] | None) -> None:
        """The sandbox's reader of the running command (None once it has ended)."""
        self._catch_up = catch_up

    def catch_up(self) -> None:
        reader = self._catch_up
        if reader is not None:
            reader()


@dataclass(frozen=True)
class CommandResult:
    exit_code: int | None  # None when the command timed out
    output: str  # stdout and stderr together: redacted, long output cut in the middle
    timed_out: bool
    duration_s: float


class Sandbox(Protocol):
    def run(self, command: str | Sequence[str], *, cwd: Path, timeout_s: float,
            env: Mapping[str, str], max_output_chars: int = 20_000,
            redact: Callable[[str], str] = unchanged,
            on_output: Callable[[bytes], None] | None = None) -> CommandResult:
        """Run `command` (argv, or a shell command line for `/bin/bash -c`) in `cwd` with
        exactly `env`; after `timeout_s` it is killed with everything it started. `redact`
        masks secrets in the output before it is cut to `max_output_chars`; `on_output` sees
        the raw output as it arrives (for a caller that follows a stream of events; an
        `OutputFollower` may also catch up with it while the command runs)."""
        ...

    def kill_all(self, sig: int = signal.SIGKILL) -> None:
        """Signal every command of this sandbox that is still running (from any thread, or a
        signal handler)."""
        ...
