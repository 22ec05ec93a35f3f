"""`run_command`: a shell command in the worktree, with a timeout, an output cap and no secrets.

The command runs in its own session (process group). When it times out the whole group is
killed, so grandchildren die too; when it finishes, anything it left running in the background
is killed as well, so no stray process outlives the call or holds the worktree.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from typing import IO

from pydantic import Field

from agentrun.tools import policy
from agentrun.tools.base import (
    COMMAND_DENIED,
    COMMAND_FAILED,
    TIMEOUT,
    ToolContext,
    ToolResult,
)
from agentrun.tools.tooldef import ArgsTool, ToolArgs

KILL_GRACE_S = 2.0  # between SIGTERM and SIGKILL on timeout
READER_JOIN_S = 2.0  # how long to wait for the output pipe to close after the group is killed


class _Capture:
    """Keeps the first and the last `keep` bytes of a stream, and counts the rest."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.lock = threading.Lock()

    def feed(self, chunk: bytes) -> None:
        with self.lock:
            self.total += len(chunk)
            room = self.keep - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self.tail += chunk
                if len(self.tail) > 2 * self.keep:
                    del self.tail[:-self.keep]

    def text(self, cap: int, secrets: list[str]) -> str:
        """The output as text: secrets redacted, at most `cap` chars, the middle elided."""
        with self.lock:
            tail = bytes(self.tail[-self.keep:])
            head = bytes(self.head)
            dropped = self.total - len(head) - len(tail)
        if dropped == 0:
            return _elide(policy.redact((head + tail).decode("utf-8", "replace"), secrets), cap)
        head_text = policy.redact(head.decode("utf-8", "replace"), secrets)
        tail_text = policy.redact(tail.decode("utf-8", "replace"), secrets)
        keep_head = cap // 2
        keep_tail = cap - keep_head
        cut = max(0, len(head_text) - keep_head) + max(0, len(tail_text) - keep_tail) + dropped
        return (head_text[:keep_head] + _marker(cut)
                + (tail_text[-keep_tail:] if keep_tail else ""))


def _marker(count: int) -> str:
    return f"\n... [{count} chars truncated] ...\n"


def _elide(text: str, cap: int) -> str:
    """`text` if it fits in `cap` chars, else its head and tail around a truncation marker."""
    if len(text) <= cap:
        return text
    keep_head = cap // 2
    keep_tail = cap - keep_head
    return (text[:keep_head] + _marker(len(text) - cap)
            + (text[-keep_tail:] if keep_tail else ""))


def _pump(stream: IO[bytes], capture: _Capture) -> None:
    try:
        while chunk := stream.read1(65536):
            capture.feed(chunk)
    except (OSError, ValueError):
        pass  # the pipe was closed under us


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


# Commands run in sessions of their own, so killing a worker's process group does not reach
# them: the worker stops them itself (SIGTERM) and tells its orchestrator their group ids
# through these hooks (for a SIGKILL it cannot handle).
_RUNNING: set[int] = set()
SPAWN_HOOKS: list[Callable[[str, int], None]] = []


def kill_running_commands(sig: int = signal.SIGKILL) -> None:
    """Signal the process group of every command still running in this process."""
    for pgid in list(_RUNNING):
        _kill_group(pgid, sig)


def _notify(event: str, pgid: int) -> None:
    for hook in list(SPAWN_HOOKS):
        with contextlib.suppress(Exception):
            hook(event, pgid)


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def execute_command(command: str, ctx: ToolContext, timeout_s: float) -> ToolResult:
    """Run `command` under `ctx.policy` (the deny list is checked by the caller)."""
    env, secrets = policy.scrubbed_env(ctx.policy)
    cap = max(1, ctx.policy.max_output_chars)
    capture = _Capture(keep=cap * 4)
    started = time.monotonic()
    proc = subprocess.Popen(["/bin/bash", "-c", command], cwd=ctx.root, env=env,
                            start_new_session=True, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    _RUNNING.add(proc.pid)
    _notify("spawn", proc.pid)
    reader = threading.Thread(target=_pump, args=(proc.stdout, capture), daemon=True)
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
        proc.wait()
        _RUNNING.discard(proc.pid)
        _notify("spawn_end", proc.pid)
        reader.join(READER_JOIN_S)
        if not reader.is_alive() and proc.stdout:
            proc.stdout.close()
    duration = time.monotonic() - started
    output = capture.text(cap, secrets)
    shown = output if output else "(no output)"
    data = {"exit_code": None if timed_out else proc.returncode, "output": output,
            "duration_s": round(duration, 3)}
    if timed_out:
        return ToolResult(
            f"command timed out after {timeout_s:g}s; its process group was killed\n"
            f"output so far:\n{shown}",
            is_error=True, error_kind=TIMEOUT, data={**data, "timed_out": True})
    code = proc.returncode
    content = f"exit code: {code} ({duration:.2f}s)\n{shown}"
    if code != 0:
        return ToolResult(content, is_error=True, error_kind=COMMAND_FAILED, data=data)
    return ToolResult(content, data=data)


class RunCommand(ArgsTool):
    name = "run_command"
    description = (
        "Run a bash command in the worktree root and return its exit code and combined "
        "stdout/stderr (long output keeps its head and tail). Runs non-interactively with a "
        "timeout; background processes are killed when it ends. Some commands are refused: "
        "git push, git reset --hard, sudo, writing outside the worktree.")

    class Args(ToolArgs):
        command: str = Field(min_length=1, description="The bash command line to run.")
        timeout_s: float | None = Field(None, gt=0, description=(
            "Timeout in seconds (default and maximum are set by the run's command policy)."))

    def execute(self, ctx: ToolContext, args: RunCommand.Args) -> ToolResult:
        refusal = policy.check_command(args.command, ctx.root, ctx.policy.deny)
        if refusal is not None:
            return ToolResult.error(COMMAND_DENIED, refusal.message(), rule=refusal.rule)
        limit = ctx.policy.max_timeout_s
        timeout = min(args.timeout_s or ctx.policy.default_timeout_s, limit)
        result = execute_command(args.command, ctx, timeout)
        if args.timeout_s and args.timeout_s > limit:
            result.content = f"(timeout capped at {limit:g}s by policy)\n{result.content}"
        return result

