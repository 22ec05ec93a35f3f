"""Workers as processes of their own, from the worker pool (`pool`): started, watched, stopped.

While the pool's server is still importing the worker code and the SDK, a batch's worktree and
assignment are made at once and its process is started as soon as the server is ready
(`QueuedHandle`): the run prepares the rest of the wave during the wait instead of after it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path

from agentrun.core.events import (
    FallbackSequentialEvent,
    SpawnEndEvent,
    SpawnEvent,
    WarningEvent,
    WorkerTimeoutEvent,
    parse_progress,
    relayed,
)
from agentrun.core.results import WorkerResult
from agentrun.core.status import StopReason
from agentrun.plan import Batch
from agentrun.protocol import Assignment
from agentrun.run import pool
from agentrun.run.backends import (
    InProcessBackend,
    Prepare,
    Relay,
    WorkerHandle,
    assignment_file,
    delivery,
    failed_result,
    note_worker,
)
from agentrun.run.verify import Delivery

TERM_GRACE_S = 5.0  # after SIGTERM, how long a worker may take to save its result
PROGRESS_CHUNK = 1024 * 1024  # of a worker's progress file read at once
_MAX_ANCESTRY = 64  # how far up the parent chain a command's process may be from its worker


class ProcessHandle:
    """A worker process: its progress relayed as events, its time limit enforced, and on
    cancel a graceful stop that becomes a kill after `TERM_GRACE_S`."""

    def __init__(self, proc: pool.WorkerProcess, assignment: Assignment,
                 cancel: threading.Event, emit: Relay) -> None:
        self.batch = assignment.batch
        self.proc = proc
        self.assignment = assignment
        self.cancel = cancel
        self.emit = emit
        self.offset = 0
        self.skipping = False  # in the middle of a progress line too long to relay
        self.commands: set[int] = set()  # process groups of the commands it runs (checked)
        self.dropped = 0  # progress lines that were not a progress event

    @property
    def sentinel(self) -> int | None:
        return self.proc.process.sentinel  # readable once the process has ended

    def poll(self) -> bool:
        proc = self.proc
        self.relay_progress()
        if self.cancel.is_set() and proc.alive():
            self.stop()
        if proc.alive() and proc.overdue(TERM_GRACE_S):
            self.kill(StopReason.INTERRUPTED)
        if proc.alive() and proc.elapsed > proc.timeout_s:
            self.kill(StopReason.TIMEOUT)
            self.emit(WorkerTimeoutEvent(batch=self.batch, timeout_s=proc.timeout_s))
        if proc.alive():
            return False
        proc.process.join(timeout=1)
        self.relay_progress()
        return True

    def stop(self) -> None:
        self.proc.request_stop(StopReason.INTERRUPTED)

    def kill(self, reason: StopReason) -> None:
        """Kill the worker, then the commands it left running (they have sessions of their
        own, so killing the worker's group does not reach them). Each group is checked again
        while the worker still lives: once it is dead, its commands belong to init."""
        self.relay_progress()  # a command started since the last poll is killed too
        worker = self.proc.process.pid
        ours = {g for g in self.commands if worker is not None and started_by(g, worker)}
        self.proc.kill(reason)
        for pgid in ours:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        self.commands = set()

    def relay_progress(self) -> None:
        """Pass on the complete lines the worker added to its progress file, each as the run's
        event of this worker, at most `PROGRESS_CHUNK` bytes of them a poll (a line longer than
        that is skipped). The file is the worker's (anything it runs can write there): a line
        that is not exactly one of a worker's progress events is dropped, and the first one
        said as a warning; no line can speak for the run or for another worker."""
        path = Path(self.assignment.progress_path or "")
        if not self.assignment.progress_path or not path.exists():
            return
        with open(path, "rb") as fh:
            fh.seek(self.offset)
            chunk = fh.read(PROGRESS_CHUNK)
        end = chunk.rfind(b"\n")
        if end < 0:
            if len(chunk) == PROGRESS_CHUNK:  # a line longer than a chunk: skipped
                self.offset += len(chunk)
                self.skipping = True
            return
        lines = chunk[:end].split(b"\n")
        if self.skipping:  # the end of the overlong line
            lines, self.skipping = lines[1:], False
        for raw in lines:
            if not raw.strip():
                continue
            try:
                event = parse_progress(raw)
            except ValueError as exc:
                self._dropped(exc)
                continue
            if isinstance(event, SpawnEvent | SpawnEndEvent):
                self._track(event)
            self.emit(relayed(event, self.batch), record=False)
        self.offset += end + 1

    def _dropped(self, error: ValueError) -> None:
        self.dropped += 1
        if self.dropped == 1:
            why = str(error).splitlines()[0][:200]
            self.emit(WarningEvent(batch=self.batch, message=(
                f"dropped a line of worker {self.batch}'s progress that is not a progress "
                f"event ({why}); any further such line is dropped silently")))

    def _track(self, event: SpawnEvent | SpawnEndEvent) -> None:
        """Note a command's process group from the progress file, which the worker (and so
        anything it ran) can write: only a group whose leader descends from the live worker
        is ever signalled."""
        pgid, worker = event.pgid, self.proc.process.pid
        if pgid <= 1:
            return
        if isinstance(event, SpawnEndEvent):
            self.commands.discard(pgid)
        elif worker is not None and self.proc.alive() and started_by(pgid, worker):
            self.commands.add(pgid)
        elif os.path.exists(f"/proc/{pgid}"):  # a live process that is not ours; a command
            # that already ended (read after the fact) needs no kill and no warning
            self.emit(WarningEvent(batch=self.batch,
                                   message=f"ignored process group {pgid} named in the "
                                           "progress file: not a command of this worker"))

    def result(self) -> Delivery:
        return delivery(self.assignment, self._read())

    def _read(self) -> WorkerResult:
        """The worker's result file, or a failed result saying why there is none."""
        proc, assignment = self.proc, self.assignment
        if proc.stop_reason == StopReason.TIMEOUT:
            return failed_result(assignment, StopReason.TIMEOUT,
                                 f"worker exceeded its timeout of {proc.timeout_s:g}s and was "
                                 "killed", round(proc.elapsed, 3))
        try:
            return WorkerResult.read(proc.result_path)
        except ValueError as exc:
            if proc.stop_reason == StopReason.INTERRUPTED:
                return failed_result(assignment, StopReason.INTERRUPTED, "interrupted")
            code = proc.exit_code
            how = (f"was killed by signal {-code}" if code is not None and code < 0
                   else f"exited with code {code}")
            return failed_result(assignment, StopReason.ERROR,
                                 f"worker {how} and wrote no valid result: {exc}",
                                 round(proc.elapsed, 3))


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, process group) of `pid` from /proc, or None when it cannot be read."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()  # the name in parentheses may hold spaces
    try:
        return int(fields[1]), int(fields[2])
    except (IndexError, ValueError):
        return None


def started_by(pgid: int, worker_pid: int) -> bool:
    """Whether process group `pgid` is led by a process that descends from `worker_pid`
    (a command the worker started in a session of its own). False where /proc is missing:
    a group that cannot be checked is never signalled."""
    leader = _stat(pgid)
    if leader is None or leader[1] != pgid:
        return False
    parent = leader[0]
    for _ in range(_MAX_ANCESTRY):
        if parent == worker_pid:
            return True
        if parent <= 1:
            return False
        up = _stat(parent)
        if up is None:
            return False
        parent = up[0]
    return False


class ProcessBackend:
    """A process per worker, from the preloaded forkserver (`pool`). When processes cannot
    be started at all, it says so once and runs the rest in-process, one at a time."""

    def __init__(self, prepare: Prepare, cancel: threading.Event, emit: Relay, *,
                 timeout_s: float, provider: str, warn: Callable[[str], None],
                 in_process: Callable[[Assignment], None] = lambda _: None) -> None:
        self.prepare = prepare
        self.cancel = cancel
        self.emit = emit
        self.timeout_s = timeout_s
        self.provider = provider
        self.warn = warn  # records a warning of the run (the fallback is one)
        self.in_process = in_process  # a prepared worker is to run in this process after all
        self.fallback: InProcessBackend | None = None

    @property
    def sequential(self) -> bool:
        return self.fallback is not None

    def warm_up(self) -> None:
        """Start the process server in the background, so the first worker does not wait."""
        pool.warm_up(self.provider)

    def start(self, batch: Batch, base: str) -> WorkerHandle:
        assignment = self.prepare(batch, base)
        if self.fallback is None and not pool.ready():
            return QueuedHandle(assignment, self._launch, self.cancel)
        return self._launch(assignment)

    def _launch(self, assignment: Assignment) -> WorkerHandle:
        if self.fallback is None:
            try:
                proc = pool.start_worker(assignment.batch, assignment_file(assignment),
                                         Path(assignment.result_path), self.timeout_s,
                                         self.provider)
                note_worker(Path(assignment.result_path).parent, proc.process.pid)
                return ProcessHandle(proc, assignment, self.cancel, self.emit)
            except pool.CannotSpawn as exc:
                self.fallback = InProcessBackend(self.prepare, self.cancel)
                self.warn(f"worker processes could not be started ({exc}); "
                          "running sequentially in-process")
                self.emit(FallbackSequentialEvent(reason=str(exc)))
        self.in_process(assignment)
        return self.fallback.run(assignment)


class QueuedHandle:
    """A prepared worker (worktree, branch, assignment) whose process starts at the first poll
    after the pool's server is ready. Stopped before then, it ends without starting, its
    groups failed with the reason."""

    def __init__(self, assignment: Assignment, launch: Callable[[Assignment], WorkerHandle],
                 cancel: threading.Event) -> None:
        self.batch = assignment.batch
        self.assignment = assignment
        self.launch = launch
        self.cancel = cancel
        self.started: WorkerHandle | None = None
        self.ended: WorkerResult | None = None  # stopped before it started

    @property
    def sentinel(self) -> int | None:
        if self.started is not None:
            return self.started.sentinel
        return pool.ready_fd() if self.ended is None else None

    def poll(self) -> bool:
        if self.started is None and self.ended is None:
            if self.cancel.is_set():
                self._end(StopReason.INTERRUPTED)
            elif pool.ready():
                self.started = self.launch(self.assignment)
        return self.started.poll() if self.started is not None else self.ended is not None

    def stop(self) -> None:
        if self.started is not None:
            self.started.stop()
        else:
            self._end(StopReason.INTERRUPTED)

    def kill(self, reason: StopReason) -> None:
        if self.started is not None:
            self.started.kill(reason)
        else:
            self._end(reason)

    def _end(self, reason: StopReason) -> None:
        if self.ended is None:
            self.ended = failed_result(self.assignment, reason,
                                       "stopped before its worker process started")

    def result(self) -> Delivery:
        if self.started is not None:
            return self.started.result()
        assert self.ended is not None, "a worker that ended (poll returned True)"
        return delivery(self.assignment, self.ended)
