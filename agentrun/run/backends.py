"""Where workers run: the seam between running a wave and the workers that do its batches.

A backend starts a batch and hands back a `WorkerHandle`; the run polls handles until they
end and verifies what each delivered. `ProcessBackend` runs every worker in a process of its
own (falling back to in-process when processes cannot start), `InProcessBackend` runs them in
this process one at a time; `ci_backend.CIResultsBackend` reads what CI jobs already did.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from agentrun.core.events import (
    BaseEvent,
    FallbackSequentialEvent,
    SpawnEndEvent,
    SpawnEvent,
    WarningEvent,
    WorkerTimeoutEvent,
    parse_progress,
    relayed,
)
from agentrun.core.fsutil import atomic_write_json
from agentrun.core.results import WorkerResult
from agentrun.core.status import Status, StopReason
from agentrun.plan import Batch
from agentrun.processes import start_time
from agentrun.protocol import Assignment
from agentrun.run import pool
from agentrun.run.verify import Delivery
from agentrun.worker import run_assignment

TERM_GRACE_S = 5.0  # after SIGTERM, how long a worker may take to save its result
PROGRESS_CHUNK = 1024 * 1024  # of a worker's progress file read at once
_MAX_ANCESTRY = 64  # how far up the parent chain a command's process may be from its worker

# makes a batch's worktree and assignment (and marks its groups running) from a base commit
Prepare = Callable[[Batch, str], Assignment]


class WorkerHandle(Protocol):
    batch: str

    def poll(self) -> bool:
        """Relay progress and enforce limits; True once the worker has ended."""

    def stop(self) -> None:
        """Ask the worker to stop and save what it has."""

    def kill(self, reason: StopReason) -> None:
        """End the worker now, with everything it started."""

    def result(self) -> Delivery:
        """What the worker delivered (after `poll` returned True)."""


class Relay(Protocol):
    """Where a worker process's events go: the run's sink, told not to record what the
    worker's own record holds already."""

    def __call__(self, event: BaseEvent, record: bool = True) -> None: ...


class WorkerBackend(Protocol):
    @property
    def sequential(self) -> bool:
        """True when one worker at a time is all this backend can run."""

    def start(self, batch: Batch, base: str) -> WorkerHandle: ...

    def warm_up(self) -> None:
        """Get ready to start workers, in the background: called once the run is sure to
        start some, so that a run refused before then pays nothing for it."""


def assignment_file(assignment: Assignment) -> Path:
    """Where a local worker's assignment is written: next to its result."""
    return Path(assignment.result_path).parent / "assignment.json"


PID_FILE = "worker.pid"


def note_worker(record_dir: Path, pid: int | None) -> None:
    """Remember a worker process (pid and start time) in its orchestrator-owned directory, so
    a resume after this run was killed can find it — and only it."""
    started = start_time(pid) if pid else None
    if pid and started:
        atomic_write_json(record_dir / PID_FILE, {"pid": pid, "start": started})


def worker_pid(record_dir: Path) -> int | None:
    """The pid of the worker noted in `record_dir` while that very process still lives."""
    try:
        data = json.loads((record_dir / PID_FILE).read_text(encoding="utf-8"))
        pid, started = int(data["pid"]), str(data["start"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return pid if pid > 1 and start_time(pid) == started else None


def delivery(assignment: Assignment, result: WorkerResult) -> Delivery:
    """A local worker's result, to be checked against its branch since its base."""
    return Delivery(result=result, ids=assignment.group_ids, batch=assignment.batch,
                    ref=assignment.branch, base=assignment.base_commit,
                    record_dir=Path(assignment.result_path).parent)


def failed_result(assignment: Assignment, stop: StopReason, error: str,
                  duration_s: float = 0.0) -> WorkerResult:
    return WorkerResult.for_batch(assignment.group_ids, assignment.batch, assignment.branch,
                                  assignment.worktree, status=Status.FAILED, stop_reason=stop,
                                  error=error, duration_s=duration_s)


# --- in this process -------------------------------------------------------------------------

class FinishedHandle:
    """A worker that has already ended (in-process workers run to completion on start)."""

    def __init__(self, batch: str, delivered: Delivery) -> None:
        self.batch = batch
        self._delivered = delivered

    def poll(self) -> bool:
        return True

    def stop(self) -> None:
        pass

    def kill(self, reason: StopReason) -> None:
        pass

    def result(self) -> Delivery:
        return self._delivered


class InProcessBackend:
    """Workers run in this process, one after another (`--in-process`, or no processes)."""

    sequential = True

    def __init__(self, prepare: Prepare, cancel: threading.Event) -> None:
        self.prepare = prepare
        self.cancel = cancel

    def start(self, batch: Batch, base: str) -> WorkerHandle:
        return self.run(self.prepare(batch, base))

    def warm_up(self) -> None:
        """Nothing to get ready: the worker code is imported when the first one runs."""

    def run(self, assignment: Assignment) -> WorkerHandle:
        result = run_assignment(assignment, self.cancel)
        return FinishedHandle(assignment.batch, delivery(assignment, result))


# --- worker processes ------------------------------------------------------------------------

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
        if self.fallback is None:
            try:
                proc = pool.start_worker(batch.id, assignment_file(assignment),
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
