"""Where workers run: the seam between running a wave and the workers that do its batches.

A backend starts a batch and hands back a `WorkerHandle`; the run polls handles until they
end and verifies what each delivered. `process_backend.ProcessBackend` runs every worker in a
process of its own (falling back to in-process when processes cannot start),
`InProcessBackend` runs them in this process one at a time; `ci_backend.CIResultsBackend`
reads what CI jobs already did.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from agentrun.core.events import (
    BaseEvent,
)
from agentrun.core.fsutil import atomic_write_json
from agentrun.core.results import WorkerResult
from agentrun.core.status import Status, StopReason
from agentrun.plan import Batch
from agentrun.processes import start_time
from agentrun.protocol import Assignment
from agentrun.run.verify import Delivery
from agentrun.worker import run_assignment

# makes a batch's worktree and assignment (and marks its groups running) from a base commit
Prepare = Callable[[Batch, str], Assignment]


class WorkerHandle(Protocol):
    batch: str

    @property
    def sentinel(self) -> int | None:
        """A file descriptor that becomes readable when `poll` has news (the worker ended, or
        its process can start now), for the run to wait on; None: poll it every so often."""

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

    sentinel = None  # nothing to wait for

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
