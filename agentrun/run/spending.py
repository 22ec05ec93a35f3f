"""The run's spending cap (`--max-cost`): what the run has spent, summed live, and how the cap
is held.

Every model turn of a worker (its retries and sub-agents included) reports its usage in the
worker's progress stream; the orchestrator prices it as it arrives, so the sum moves while the
workers run, not only when they end. A finished worker's own cost replaces its live sum. At
80% of the cap the run says so once.
The cap is hard: each running worker has an allowance, a share of what is left of the cap
(agent/allowance.py), and makes a model call only below it. The run raises the allowances as
it sees the workers spend, never past the cap all together. Once the spend reaches the cap, no
new worker starts and every running one is told to stop: it stops at its next model call, and
its committed work is kept as `partial`. A worker inside a long command by then is stopped
after `CAP_STOP_GRACE_S`. So a run spends at most its cap plus the call each running worker had in
flight, and ends with `stop_reason: cost_cap`.
The reviewer runs in-process and cannot be stopped mid-way: it is charged when it ends, and
the run checks the cap before starting it (or a fix cycle), which bounds its overshoot to one
review.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agentrun.agent.allowance import Grant
from agentrun.core.events import (
    AgentStepEvent,
    BaseEvent,
    CostCapEvent,
    CostStopEvent,
    CostWarningEvent,
    EventSink,
)
from agentrun.core.results import WorkerResult
from agentrun.core.status import Status, StopReason
from agentrun.core.usage import Usage
from agentrun.providers.pricing import cost_usd
from agentrun.report.execution_state import RunState
from agentrun.run.backends import WorkerHandle

SPEND_WARN_AT = 0.8
CAP_STOP_GRACE_S = 30.0  # after the stop, how long a worker inside a command has to reach a call


class Spending:
    """The run's spend against `cap` (USD; None: no cap), with what the runs it resumes
    spent (`carry`). It is the execute loop's gate: `closed` once the cap is reached; `allow`
    gives a worker its first allowance before it starts, and `tend` raises the allowances of
    the running workers, or stops them once the cap is reached."""

    def __init__(self, cap: float | None, model: str, pricing: Mapping[str, Any],
                 emit: EventSink, *, grace_s: float = CAP_STOP_GRACE_S) -> None:
        self.cap = cap
        self.model = model
        self.pricing = dict(pricing)
        self.emit = emit
        self.settled = 0.0
        self.grace_s = grace_s
        self.live: dict[str, Usage] = {}  # batch -> usage reported so far by its running worker
        self.grants: dict[str, Grant] = {}  # batch -> its running worker's allowance
        self.files: dict[str, Path] = {}  # batch -> where its allowance is written
        self.stopped: dict[str, float] = {}  # batch -> when it was told to stop
        self.terminated: set[str] = set()  # batches stopped by a signal after the grace
        self.warned = False
        self.reached = False
        self.on_total: Callable[[float], None] = lambda _: None  # the settled sum moved

    @property
    def spent(self) -> float:
        return self.settled + sum(self._price(u) for u in self.live.values())

    def _price(self, usage: Usage) -> float:
        return cost_usd(self.model, usage, self.pricing) or 0.0

    def observe(self, event: BaseEvent) -> None:
        """A relayed progress event: a model turn's usage adds to its worker's live sum (the
        worker's word, validated as whole non-negative numbers where the line was read)."""
        if isinstance(event, AgentStepEvent) and event.usage is not None:
            batch = event.batch
            self.live[batch] = self.live.get(batch, Usage()) + Usage(**dict(event.usage))
            self._check()

    def settle(self, batch: str, result: WorkerResult) -> None:
        """A worker ended: its own cost replaces what its progress added up to."""
        live = self.live.pop(batch, Usage())
        self.grants.pop(batch, None)
        self.files.pop(batch, None)
        reported = result.cost_usd
        if reported is None:
            reported = self._price(result.usage)
        self.settled += max(reported, self._price(live))
        self.on_total(self.spent)
        self._check()

    def carry(self, spent_before: float) -> None:
        """A resume: what the runs before it spent counts from the start (a cap already
        reached lets no worker start)."""
        self.settled = spent_before
        self.on_total(self.spent)
        self._check()

    def charge(self, cost: float | None) -> None:
        """Spend reported whole, once it is over (the reviewer's run)."""
        self.settled += cost or 0.0
        self.on_total(self.spent)
        self._check()

    def _check(self) -> None:
        if self.cap is None or self.reached:
            return
        spent = self.spent
        if not self.warned and spent >= SPEND_WARN_AT * self.cap:
            self.warned = True
            self.emit(CostWarningEvent(spent_usd=round(spent, 6), cap_usd=self.cap))
        if spent >= self.cap:
            self.reached = True
            self.emit(CostCapEvent(spent_usd=round(spent, 6), cap_usd=self.cap,
                                   running=tuple(sorted(self.files))))
            now = time.monotonic()
            for batch in sorted(self.files):  # at once: a worker may be about to call
                self._stop(batch, now)

    # -- allowances --------------------------------------------------------------------------
    def allow(self, batch: str, path: Path, *, alone: bool) -> None:
        """A worker is about to start: its first allowance, written before it runs. A worker
        that runs `alone` (in this process: nothing raises its allowance meanwhile) gets all
        that is left of the cap, as its last."""
        if self.cap is None:
            return
        self.files[batch] = path
        self.live.setdefault(batch, Usage())
        if self.reached:
            self._stop(batch, time.monotonic())
        elif alone:
            others = sum(g.usd for b, g in self.grants.items() if b != batch)
            self._grant(batch, Grant(max(0.0, self.cap - self.settled - others), final=True))
        else:
            self._raise([*self.files])

    def _raise(self, running: list[str]) -> None:
        """Raise each running worker's allowance to what it has spent plus a lease, a share
        of what is left; never past the cap all together (what the running workers are
        allowed and what the finished ones spent)."""
        assert self.cap is not None
        free = self.cap - self.settled - sum(g.usd for b, g in self.grants.items()
                                              if b in running)
        lease = max(0.0, self.cap - self.spent) / (2 * (len(running) + 1))
        for batch in running:
            grant = self.grants.get(batch, Grant(0.0))
            want = self._price(self.live.get(batch, Usage())) + lease
            more = min(want - grant.usd, free)
            if more > 1e-9:
                free -= more
                self._grant(batch, Grant(grant.usd + more))

    def _grant(self, batch: str, grant: Grant) -> None:
        self.grants[batch] = grant
        grant.write(self.files[batch])

    def _stop(self, batch: str, now: float) -> None:
        if batch in self.stopped or batch not in self.files:
            return
        self.stopped[batch] = now
        self._grant(batch, Grant(self.grants.get(batch, Grant(0.0)).usd, final=True,
                                 stop=True))
        self.emit(CostStopEvent(batch=batch))

    # -- the gate of the execute loop -------------------------------------------------------
    def closed(self) -> bool:
        return self.reached

    def tend(self, running: Mapping[str, WorkerHandle]) -> None:
        """Below the cap: raise the running workers' allowances. Once it is reached: stop
        them at their next model call, and by a signal a worker still running `grace_s`
        later (inside a long command)."""
        if self.cap is None:
            return
        if not self.reached:
            self._raise([b for b in running if b in self.files])
            return
        now = time.monotonic()
        for batch, handle in running.items():
            self._stop(batch, now)
            if batch in self.stopped and batch not in self.terminated \
                    and now - self.stopped[batch] > self.grace_s:
                self.terminated.add(batch)
                handle.stop()

    def capped(self, result: WorkerResult, committed: bool) -> WorkerResult:
        """A worker the cap stopped: unless it completed, its committed work is kept as
        `partial` (nothing committed: `failed`), stopped by the cost cap."""
        if result.status == Status.COMPLETE:
            return result
        why = f"stopped at the run's spending cap (${self.cap:g})"
        error = result.error or why
        if result.stop_reason == StopReason.COST_CAP:  # the worker stopped itself: say how far
            error = f"{why}: no further model call"
        elif result.error and result.status != Status.PARTIAL:
            error = f"{why}: {result.error}"
        return result.model_copy(update={
            "status": Status.PARTIAL if committed else Status.FAILED,
            "stop_reason": StopReason.COST_CAP, "error": error})

    def summary(self) -> str:
        """The run's spend against its cap, and by how much it went over."""
        spent = self.spent
        over = max(0.0, spent - (self.cap or 0.0))
        return (f"the run reached its spending cap: spent ${spent:.4f} of ${self.cap:g} "
                f"(over by ${over:.4f}: the model calls in flight when it was reached)")


def spent_so_far(old: RunState) -> float:
    """What a resumed run and the runs it resumed spent in all: its running total (which
    counts the chain before it), or at least what its own groups and reviews cost (a run
    killed before its total was saved)."""
    own = sum(g.cost_usd or 0.0 for g in old.groups.values())
    own += sum(r.cost_usd or 0.0 for r in old.reviews)
    return max(old.spent_usd or 0.0, own)
