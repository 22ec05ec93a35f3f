"""`LocalSandbox`: commands as plain child processes, each in a session of its own.

A command runs in its own session (process group). When it times out the whole group is
killed, so grandchildren die too; when it finishes, anything it left running in the background
is killed as well, so no stray process outlives the call or holds the worktree.

Because the sessions are not the worker's own, killing the worker's process group does not
reach them: the worker stops them through `kill_all`, and reports their group ids through the
spawn listener for the SIGKILL it cannot handle.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from agentrun.sandbox.base import CommandResult, OutputFollower, SpawnListener, unchanged
from agentrun.sandbox.capture import Capture

KILL_GRACE_S = 2.0  # between SIGTERM and SIGKILL on timeout
READER_JOIN_S = 2.0  # how long to wait for the output pipe to close after the group is killed


class LocalSandbox:
    """One per worker: runs its commands and knows which of them are still running."""

    def __init__(self, on_spawn: SpawnListener | None = None) -> None:
        self._on_spawn = on_spawn
        self._running: set[int] = set()
        self._kills = 0  # how many times kill_all ran, to catch one that raced a start
        self._kill_signal: int = signal.SIGKILL

    def run(self, command: str | Sequence[str], *, cwd: Path, timeout_s: float,
            env: Mapping[str, str], max_output_chars: int = 20_000,
            redact: Callable[[str], str] = unchanged,
            on_output: Callable[[bytes], None] | None = None) -> CommandResult:
        argv = ["/bin/bash", "-c", command] if isinstance(command, str) else list(command)
        cap = max(1, max_output_chars)
        capture = Capture(keep=cap * 4)
        started = time.monotonic()
        kills = self._kills
        # the output pipe is made first, so that a follower can catch up from the command's
        # first byte on
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        follower = on_output if isinstance(on_output, OutputFollower) else None
        if follower is not None:
            follower.attach(lambda: capture.catch_up(read_fd, follower))
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=dict(env), start_new_session=True,
                                    stdin=subprocess.DEVNULL, stdout=write_fd,
                                    stderr=subprocess.STDOUT)
        except BaseException:
            if follower is not None:
                follower.attach(None)
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)  # the command holds its own copy: its end ends the output
        self._running.add(proc.pid)
        if self._kills != kills:  # kill_all ran while this command was starting
            _kill_group(proc.pid, self._kill_signal)
        self._notify("spawn", proc.pid)
        reader = threading.Thread(target=capture.pump, args=(read_fd, on_output), daemon=True)
        reader.start()
        timed_out = False
        try:
            if not _wait_exit(proc, timeout_s):
                timed_out = True
                _kill_group(proc.pid, signal.SIGTERM)
                _wait_exit(proc, KILL_GRACE_S)
            _kill_group(proc.pid, signal.SIGKILL)  # stragglers and background jobs
        except BaseException:
            _kill_group(proc.pid, signal.SIGKILL)
            raise
        finally:
            if follower is not None:
                follower.attach(None)
            proc.wait()
            self._running.discard(proc.pid)
            self._notify("spawn_end", proc.pid)
            reader.join(READER_JOIN_S)
            if not reader.is_alive():
                os.close(read_fd)
        return CommandResult(exit_code=None if timed_out else proc.returncode,
                             output=capture.text(cap, redact), timed_out=timed_out,
                             duration_s=time.monotonic() - started)

    def kill_all(self, sig: int = signal.SIGKILL) -> None:
        # no lock: this runs in signal handlers, which may interrupt the thread holding one;
        # a command starting meanwhile sees the count change and kills itself (see `run`)
        self._kill_signal = sig
        self._kills += 1
        for pgid in list(self._running):
            _kill_group(pgid, sig)

    def _notify(self, event: str, pgid: int) -> None:
        if self._on_spawn is not None:
            with contextlib.suppress(Exception):  # a broken listener must not break the command
                self._on_spawn(event, pgid)


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _wait_exit(proc: subprocess.Popen[bytes], timeout: float | None) -> bool:
    """Wait until the process has exited WITHOUT reaping it, so its pid (and thus its process
    group id) cannot be reused before we signal the group. Returns False on timeout."""
    deadline = None if timeout is None else time.monotonic() + timeout
    if hasattr(os, "pidfd_open"):
        try:
            pidfd = os.pidfd_open(proc.pid)
        except OSError:
            pidfd = None
        if pidfd is not None:
            try:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                ready, _, _ = select.select([pidfd], [], [], remaining)
                return bool(ready)
            finally:
                os.close(pidfd)
    delay = 0.001
    while True:
        if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is not None:
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(delay if deadline is None else min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, 0.05)
