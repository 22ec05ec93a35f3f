"""Worker processes: start, watch, time out and stop them.

Workers are separate OS processes started from a multiprocessing forkserver whose server has
already imported the worker code and the provider's SDK, so each worker after the first starts
in milliseconds instead of paying the SDK import again. Each worker makes itself a process-group
leader, so stopping it also stops every command it started. If processes cannot be started at
all, the pool says so and `process_backend.ProcessBackend` runs the batches in-process, one after
another.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.context import ForkServerContext, SpawnContext
from pathlib import Path
from typing import Any

from agentrun import telemetry
from agentrun.pool_handoff import Handoff
from agentrun.providers.catalog import preload_modules

Context = ForkServerContext | SpawnContext  # the start methods a worker process may use
_CONTEXT: Context | None = None
_CONTEXT_LOCK = threading.Lock()
_AT_EXIT = False  # shut_down is registered to run at exit
_STOPPED = threading.Event()  # shut_down was called since the last warm-up
_STARTING = threading.Lock()  # held while a warm-up starts the server
_WARMING = False  # a warm-up was started: a worker start may wait for the server's imports
_READY = threading.Event()  # the warm-up is over: the server has preloaded (or failed to)
_READY_PIPE: tuple[int, int] | None = None  # its read end turns readable then (`ready_fd`)
_HANDOFF: Handoff | None = None  # `start` started the server: the provider goes through this


def _context(provider: str | None) -> Context:
    """The forkserver context, with the worker code and this provider's SDK preloaded (None:
    the SDK the run names later, `start`)."""
    with _CONTEXT_LOCK:
        return _CONTEXT or _make_context(provider)


def _make_context(provider: str | None) -> Context:
    global _CONTEXT
    if _CONTEXT is None:
        ctx: Context
        if "forkserver" in multiprocessing.get_all_start_methods():
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(_preload_list(provider))
        else:
            ctx = multiprocessing.get_context("spawn")
        _CONTEXT = ctx
    return _CONTEXT


def _preload_list(provider: str | None) -> list[str]:
    """What the server imports, in order: first and last the set-up around the imports; the
    provider's SDK after the worker code, or, not known yet, once the run names it."""
    sdk = preload_modules(provider) if provider else ["agentrun.preload_provider"]
    return ["agentrun.preload_sandbox", "agentrun.preload", __name__,
            *telemetry.preload_modules(),  # tracing on: its SDK too
            *sdk,
            "agentrun.preload_clients"]  # one call through the SDK, answered in memory


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


def start() -> None:
    """Start the server at once, before the run knows its provider: it imports the worker code
    while the run loads its project, spec and plan, and the provider's SDK once `warm_up`
    names it (agentrun/pool_handoff.py). The SDK's import, the longest part (`import anthropic`
    is half a second), then begins the moment the run knows its provider, about 0.2 s earlier
    than a server started then could begin it.
    Called from the main thread, as the run's first step: the server's environment is set
    around its start, with no other thread to read it meanwhile."""
    global _HANDOFF
    if _CONTEXT is not None or _HANDOFF is not None:  # a server is there, or being started
        return
    with _signals_held():
        ctx = _context(None)
        if ctx.get_start_method() != "forkserver":
            return
        _register_shut_down()
        _import_for_threads()
        from multiprocessing import forkserver

        try:
            _HANDOFF = Handoff()
        except OSError:  # no private folder to be had: the server starts when the provider is
            return  # known
        with _STARTING, _HANDOFF.announced(), contextlib.suppress(Exception):
            forkserver.ensure_running()


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait while the main thread imports and starts the pool's processes,
    and come on the way out, where they end the command as usual. An interrupt raised inside
    Python's import machinery can leave its import lock held (where the exception is ignored:
    a weakref callback of it), and every later import on another thread would wait forever."""
    if threading.current_thread() is not threading.main_thread() \
            or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _import_for_threads() -> None:
    """What the warm-up's thread would import to start processes, imported here, in the main
    thread (`_signals_held`): that thread then imports nothing."""
    import subprocess  # noqa: F401

    with contextlib.suppress(ImportError):  # not on every system: no forkserver there
        import _posixsubprocess  # noqa: F401
        import multiprocessing.forkserver
        import multiprocessing.popen_forkserver  # noqa: F401


def warm_up(provider: str) -> None:
    """Start the forkserver and its imports in the background, as soon as a run knows its
    provider, or name the provider to the server `start` started. The first worker otherwise
    waits for the server to import the worker code and the SDK (0.5–2 s, more on a busy
    machine); started early, that overlaps with planning, the run's checks and commit, the base
    check and the first worktrees. `ready()` says when the server has finished, and `ready_fd()`
    wakes whoever waits for that. A command that stops before any worker starts stops the
    server on its way out (`shut_down`).
    """
    global _WARMING
    _register_shut_down()
    _STOPPED.clear()
    if not _READY.is_set():
        _WARMING = True
    with _signals_held():
        _import_for_threads()
        if _HANDOFF is not None and not _HANDOFF.give(provider):
            with _STARTING:  # the server that waits for the name goes; the next lists the SDK
                _drop_handoff()

    def start() -> None:
        try:
            ctx = _context(provider)
            if ctx.get_start_method() == "forkserver":
                from multiprocessing import forkserver

                with _STARTING:  # shut_down waits for a start under way, then kills it
                    if _STOPPED.is_set():
                        return
                    if _HANDOFF is None:  # no server waits for the name: the next one starts
                        ctx.set_forkserver_preload(_preload_list(provider))  # with the SDK
                    with contextlib.suppress(Exception):
                        forkserver.ensure_running()
                    if _STOPPED.is_set():  # and killed what ensure_running started
                        return
                    with contextlib.suppress(Exception):
                        # the server answers only once its preloads are done: a process that
                        # does nothing says when that is. Under the lock, as starting it would
                        # start a server again after shut_down's kill; the kill ends it at once
                        probe = ctx.Process(target=_ready_probe, name="agentrun-pool-ready")
                        probe.start()
                        probe.join()
        finally:
            _READY.set()
            if _READY_PIPE is not None:
                with contextlib.suppress(OSError):
                    os.write(_READY_PIPE[1], b"r")  # never read: it stays readable

    threading.Thread(target=start, name="agentrun-forkserver-warm-up", daemon=True).start()


def _register_shut_down() -> None:
    global _AT_EXIT
    if not _AT_EXIT:
        _AT_EXIT = True
        atexit.register(shut_down)


def ready() -> bool:
    """Whether a worker would start now, rather than wait for the server's imports."""
    return not _WARMING or _READY.is_set()


def ready_fd() -> int | None:
    """A file descriptor that turns readable once `ready()` is true, for waiting on it beside
    workers' process sentinels; None when it is already."""
    global _READY_PIPE
    with _CONTEXT_LOCK:
        if ready():
            return None
        if _READY_PIPE is None:
            _READY_PIPE = os.pipe()
            if _READY.is_set():  # turned ready meanwhile: the warm-up will not write again
                os.write(_READY_PIPE[1], b"r")
        return _READY_PIPE[0]


def _ready_probe() -> None:
    """The warm-up's process: it only shows that the server has started one."""


def shut_down() -> None:
    """Stop the forkserver now, so it does not hold the CLI's output pipes after exit. Its
    workers are over; it is killed rather than asked, since a server still importing (a run
    that stopped early) or tearing down a loaded SDK would hold the exit for seconds."""
    _STOPPED.set()  # a warm-up still on its way starts nothing now
    _kill_server()  # a warm-up waiting for its preloads is answered: no server
    with _STARTING:  # a warm-up starting the server has started it: killed below
        _drop_handoff()


def _drop_handoff() -> None:
    """Kill the server and forget its handoff; the caller holds `_STARTING`."""
    global _HANDOFF
    if _HANDOFF is not None:
        _HANDOFF.close()
        _HANDOFF = None
    _kill_server()


def _kill_server() -> None:
    with contextlib.suppress(Exception):
        from multiprocessing import forkserver

        server: Any = forkserver._forkserver  # noqa: SLF001 - the only way to stop it early
        with server._lock:  # noqa: SLF001 - not while it is being started
            if server._forkserver_pid is not None:  # noqa: SLF001
                with contextlib.suppress(ProcessLookupError):
                    os.kill(server._forkserver_pid, signal.SIGKILL)  # noqa: SLF001
                server._stop_unlocked()  # noqa: SLF001


def _worker_main(assignment_path: str) -> None:
    """A worker process's entry point. The worker code is imported here, not by this module:
    the server has it preloaded, and the orchestrator, which only starts workers, then
    starts the server without importing it first."""
    import gc

    gc.enable()  # the server preloads with it off, and froze what it holds (preload_sandbox.py)
    from agentrun.worker import process_main

    process_main(assignment_path)


class CannotSpawn(RuntimeError):
    """Processes cannot be started here; run batches in-process instead."""


def start_worker(batch: str, assignment_path: Path, result_path: Path, timeout_s: float,
                 provider: str) -> WorkerProcess:
    try:
        ctx = _context(provider)
        proc = ctx.Process(target=_worker_main, args=(str(assignment_path),),
                           name=f"agentrun-worker-{batch}")
        proc.start()
    except (OSError, ValueError, RuntimeError) as exc:
        raise CannotSpawn(str(exc)) from exc
    return WorkerProcess(batch, assignment_path, result_path, timeout_s, proc)
