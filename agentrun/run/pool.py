"""Worker processes: start, watch, time out and stop them.

Workers are separate OS processes started from a multiprocessing forkserver whose server has
already imported the worker code and the provider's SDK, so each worker after the first starts
in milliseconds instead of paying the SDK import again. Each worker makes itself a process-group
leader, so stopping it also stops every command it started. If processes cannot be started at
all, the pool says so and `backends.ProcessBackend` runs the batches in-process, one after
another.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from agentrun import telemetry
from agentrun.providers.catalog import preload_modules
from agentrun.worker import process_main

_CONTEXT = None
_CONTEXT_LOCK = threading.Lock()


def _context(provider: str):
    """The forkserver context, with the worker code and this provider's SDK preloaded."""
    with _CONTEXT_LOCK:
        return _CONTEXT or _make_context(provider)


def _make_context(provider: str):
    global _CONTEXT
    if _CONTEXT is None:
        method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() \
            else "spawn"
        ctx = multiprocessing.get_context(method)
        if method == "forkserver":
            preload = ["agentrun.preload", *preload_modules(provider),
                       *telemetry.preload_modules()]  # tracing on: its SDK too
            ctx.set_forkserver_preload(preload)
        _CONTEXT = ctx
    return _CONTEXT


@dataclass
class WorkerProcess:
    batch: str
    assignment_path: Path
    result_path: Path
    timeout_s: float
    process: multiprocessing.process.BaseProcess
    started: float = field(default_factory=time.monotonic)
    stop_reason: str | None = None  # set when the pool stopped it: timeout | interrupted
    term_at: float | None = None  # when a graceful stop was requested

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def alive(self) -> bool:
        return self.process.is_alive()

    def signal_group(self, sig: int) -> None:
        pid = self.process.pid
        if pid is None:
            return
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def request_stop(self, reason: str) -> None:
        """Ask the worker to stop (SIGTERM to its group): it saves a result and exits."""
        if self.term_at is None:
            self.stop_reason = self.stop_reason or reason
            self.term_at = time.monotonic()
            self.signal_group(signal.SIGTERM)

    def overdue(self, grace_s: float) -> bool:
        return self.term_at is not None and time.monotonic() - self.term_at > grace_s

    def kill(self, reason: str) -> None:
        """Kill the whole process tree at once (timeouts: the worker had its chance)."""
        self.stop_reason = self.stop_reason or reason
        self.signal_group(signal.SIGKILL)
        self.process.join(timeout=2)

    @property
    def exit_code(self) -> int | None:
        return self.process.exitcode


def warm_up(provider: str) -> None:
    """Start the forkserver and its imports in the background, once the run has passed its
    checks. The first worker otherwise waits for the server to import the worker code and the
    SDK (0.5–2 s); started early, that overlaps with the base check and the first worktrees.
    """
    def start() -> None:
        ctx = _context(provider)
        if ctx.get_start_method() == "forkserver":
            from multiprocessing import forkserver

            with contextlib.suppress(Exception):
                forkserver.ensure_running()

    threading.Thread(target=start, name="agentrun-forkserver-warm-up", daemon=True).start()


def shut_down() -> None:
    """Stop the forkserver now, so it does not hold the CLI's output pipes after exit."""
    with contextlib.suppress(Exception):
        from multiprocessing import forkserver

        forkserver._forkserver._stop()  # noqa: SLF001 - the only way to stop it early


class CannotSpawn(RuntimeError):
    """Processes cannot be started here; run batches in-process instead."""


def start_worker(batch: str, assignment_path: Path, result_path: Path, timeout_s: float,
                 provider: str) -> WorkerProcess:
    try:
        ctx = _context(provider)
        proc = ctx.Process(target=process_main, args=(str(assignment_path),),
                           name=f"agentrun-worker-{batch}")
        proc.start()
    except (OSError, ValueError, RuntimeError) as exc:
        raise CannotSpawn(str(exc)) from exc
    return WorkerProcess(batch, assignment_path, result_path, timeout_s, proc)
