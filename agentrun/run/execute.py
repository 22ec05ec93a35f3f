"""Running a wave's batches on a backend: at most `max_parallel` at once, each result verified
as soon as its worker ends."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from multiprocessing.connection import wait
from typing import Protocol

from agentrun.core.results import WorkerResult
from agentrun.core.status import StopReason
from agentrun.plan import Batch
from agentrun.run.backends import WorkerBackend, WorkerHandle
from agentrun.run.verify import Delivery

POLL_S = 0.05

Results = dict[str, WorkerResult]


class Gate(Protocol):
    """What may stop a wave besides an interrupt (the spending cap: `spending.Spending`; a
    rate limit: `ratelimit.RateLimitStop`)."""

    def closed(self) -> bool:
        """True once no further worker may start."""

    def tend(self, running: Mapping[str, WorkerHandle]) -> None:
        """Wind down the running workers once closed."""


class AnyGate:
    """Closed when any of its gates is; each tends its own."""

    def __init__(self, *gates: Gate) -> None:
        self.gates = gates

    def closed(self) -> bool:
        return any(g.closed() for g in self.gates)

    def tend(self, running: Mapping[str, WorkerHandle]) -> None:
        for gate in self.gates:
            gate.tend(running)


def nap(handles: Iterable[WorkerHandle]) -> None:
    """Until a handle has news (a worker process ended, a queued one can start) or `POLL_S`
    passed, whichever comes first: a result is collected the moment its worker ends."""
    # a set: the workers queued for the pool's server all wait on its one descriptor
    fds = list({fd for handle in handles if (fd := handle.sentinel) is not None})
    if fds:
        wait(fds, timeout=POLL_S)
    else:
        time.sleep(POLL_S)


def execute(batches: list[Batch], base: str, backend: WorkerBackend, *,
            max_parallel: int | None, cancel: threading.Event,
            verify: Callable[[Delivery], WorkerResult],
            on_result: Callable[[Results], None],
            not_started: Callable[[Batch], None], gate: Gate | None = None,
            read_ahead: Callable[[Delivery], None] | None = None) -> Results:
    """Run `batches` from commit `base`; returns the verified results by batch id, calling
    `on_result` each time results arrive. On cancel (or once `gate` closes) no further batch
    starts: each is passed to `not_started` once the running ones have ended. Of results
    that arrive together, all but the first are given to `read_ahead` before the first is
    verified, so that their checks can start while it is verified and landed."""
    pending = list(batches)
    running: dict[str, WorkerHandle] = {}
    results: Results = {}
    wanted = max_parallel or len(pending) or 1
    try:
        while pending or running:
            limit = 1 if backend.sequential else wanted
            stopping = cancel.is_set() or (gate is not None and gate.closed())
            if pending and len(running) < limit and not stopping:
                batch = pending.pop(0)  # one at a time: poll the running ones before the next
                running[batch.id] = backend.start(batch, base)
            if gate is not None:
                gate.tend(running)
            if stopping and not running:
                for batch in pending:
                    not_started(batch)
                break
            arrived = [(batch_id, handle.result()) for batch_id, handle
                       in list(running.items()) if handle.poll()]
            for _, delivery in arrived[1:]:
                if read_ahead is not None:
                    read_ahead(delivery)
            for batch_id, delivery in arrived:
                results[batch_id] = verify(delivery)
                del running[batch_id]
            if arrived:  # together: their work may land together
                on_result(results)
            limit = 1 if backend.sequential else wanted
            if running and (stopping or not (pending and len(running) < limit)):
                nap(running.values())
    except Exception:  # e.g. a full disk while recording: no worker runs on unwatched
        for handle in running.values():
            handle.kill(StopReason.INTERRUPTED)
        raise
    return results
