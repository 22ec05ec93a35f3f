"""The run's spending cap (`--max-cost`): what the run has spent, summed live, and what
happens when it reaches the cap.

Every model turn of a worker (its retries and sub-agents included) reports its usage in the
worker's progress stream; the orchestrator prices it as it arrives, so the sum moves while the
workers run, not only when they end. A finished worker's own cost replaces its live sum. At
80% of the cap the run says so once; at 100% no new worker starts, running workers are asked to
wrap up at their next model turn and stopped after a short grace, and the run ends with
`stop_reason: cost_cap`. What is spent beyond the cap is the calls in flight at that moment
and each running worker's wrap-up turn.
The reviewer runs in-process and cannot be wound down mid-way: it is charged when it ends, and
the run checks the cap before starting it (or a fix cycle), which bounds its overshoot to one
review.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from agentrun.protocol import Status, StopReason, WorkerResult
from agentrun.providers.base import Usage
from agentrun.providers.pricing import cost_usd
from agentrun.report.execution_state import RunState
from agentrun.run.backends import WorkerHandle
from agentrun.run.record import EventSink

WARN_AT = 0.8
WRAP_UP_GRACE_S = 30.0  # after the wrap-up message, how long a worker has to submit
_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def turn_usage(event: Mapping[str, Any]) -> Usage | None:
    """The usage a worker's `step` progress event reports for one model turn (None when the
    event carries none, or not as whole non-negative numbers: it is the worker's word)."""
    raw = event.get("usage")
    if not isinstance(raw, Mapping):
        return None
    values = [raw.get(k, 0) for k in _USAGE_KEYS]
    if any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in values):
        return None
    return Usage(*values)


class Spending:
    """The run's spend against `cap` (USD; None: no cap), with what the runs it resumes
    spent (`carry`). It is the execute loop's gate: `closed` once the cap is reached, and `tend`
    winds down the workers still running."""

    def __init__(self, cap: float | None, model: str, pricing: Mapping[str, Any],
                 emit: EventSink, *, grace_s: float = WRAP_UP_GRACE_S) -> None:
        self.cap = cap
        self.model = model
        self.pricing = dict(pricing)
        self.emit = emit
        self.settled = 0.0
        self.grace_s = grace_s
        self.live: dict[str, Usage] = {}  # batch -> usage reported so far by its running worker
        self.wrapped: dict[str, float] = {}  # batch -> when it was asked to wrap up
        self.stopped: set[str] = set()
        self.warned = False
        self.reached = False
        self.on_total: Callable[[float], None] = lambda _: None  # the settled sum moved

    @property
    def spent(self) -> float:
        return self.settled + sum(self._price(u) for u in self.live.values())

    def _price(self, usage: Usage) -> float:
        return cost_usd(self.model, usage, self.pricing) or 0.0

    def observe(self, event: Mapping[str, Any]) -> None:
        """A relayed progress event: a model turn's usage adds to its worker's live sum."""
        batch = event.get("batch")
        if event.get("type") != "agent_step" or not isinstance(batch, str):
            return
        usage = turn_usage(event)
        if usage is not None:
            self.live[batch] = self.live.get(batch, Usage()) + usage
            self._check()

    def settle(self, batch: str, result: WorkerResult) -> None:
        """A worker ended: its own cost replaces what its progress added up to."""
        live = self.live.pop(batch, Usage())
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
        if not self.warned and spent >= WARN_AT * self.cap:
            self.warned = True
            self.emit({"type": "cost_warning", "spent_usd": round(spent, 6),
                       "cap_usd": self.cap})
        if spent >= self.cap:
            self.reached = True
            self.emit({"type": "cost_cap", "spent_usd": round(spent, 6), "cap_usd": self.cap,
                       "running": sorted(self.live)})

    # -- the gate of the execute loop -------------------------------------------------------
    def closed(self) -> bool:
        return self.reached

    def tend(self, running: Mapping[str, WorkerHandle]) -> None:
        """Once the cap is reached: ask each running worker to wrap up, and stop the ones
        still running `grace_s` later."""
        if not self.reached:
            return
        now = time.monotonic()
        for batch, handle in running.items():
            if batch not in self.wrapped:
                self.wrapped[batch] = now
                handle.wrap_up()
                self.emit({"type": "wrap_up", "batch": batch})
            elif batch not in self.stopped and now - self.wrapped[batch] > self.grace_s:
                self.stopped.add(batch)
                handle.stop()

    def capped(self, result: WorkerResult, committed: bool) -> WorkerResult:
        """A worker the cap wound down: unless it completed, its committed work is kept as
        `partial` (nothing committed: `failed`), stopped by the cost cap."""
        if result.status == Status.COMPLETE:
            return result
        why = f"stopped at the run's spending cap (${self.cap:g})"
        return result.model_copy(update={
            "status": Status.PARTIAL if committed else Status.FAILED,
            "stop_reason": StopReason.COST_CAP,
            "error": f"{why}: {result.error}" if result.error and result.status != Status.PARTIAL
            else result.error or why})

    def summary(self) -> str:
        """The run's spend against its cap, and by how much it went over."""
        spent = self.spent
        over = max(0.0, spent - (self.cap or 0.0))
        return (f"the run reached its spending cap: spent ${spent:.4f} of ${self.cap:g} "
                f"(over by ${over:.4f}: the model calls in flight when it was reached, and "
                "the running workers' wrap-up turns)")


def spent_so_far(old: RunState) -> float:
    """What a resumed run and the runs it resumed spent in all: its running total (which
    counts the chain before it), or at least what its own groups and reviews cost (a run
    killed before its total was saved)."""
    own = sum(g.cost_usd or 0.0 for g in old.groups.values())
    own += sum(r.cost_usd or 0.0 for r in old.reviews)
    return max(old.spent_usd or 0.0, own)
