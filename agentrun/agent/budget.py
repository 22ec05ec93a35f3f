"""Token budget: how much a worker has spent, and what it should do about it.

The budget is a *spend* budget for one execution (all attempts and sub-agents of a worker), not a
context-window gauge. Every model call adds its full `Usage.total`:
`input_tokens + output_tokens + cache_read_tokens + cache_write_tokens`. Cached input is counted
because the model still processes it and the budget's job is to bound the work done; exact
figures come from the provider's response, never from an estimate.

Thresholds: >=50% summarise, >=70% spawn a sub-agent, >=90% complete now; 100% is enforced by
the loop (the attempt stops with stop_reason "budget").
"""

from __future__ import annotations

import threading
from typing import Any

from agentrun.core.limits import DEFAULT_TOKEN_BUDGET
from agentrun.core.usage import Usage

# (percent, recommendation) from the highest threshold down
THRESHOLDS: tuple[tuple[int, str], ...] = (
    (100, "stop"),
    (90, "complete_now"),
    (70, "spawn_subagent"),
    (50, "summarize"),
)
WARN_AT = (70, 90)  # thresholds that inject a warning into the conversation


class TokenTracker:
    """Thread-safe running total of tokens against a budget."""

    def __init__(self, budget: int = DEFAULT_TOKEN_BUDGET) -> None:
        if budget <= 0:
            raise ValueError("token budget must be positive")
        self.budget = budget
        self._used = 0
        self._usage = Usage()
        self._lock = threading.Lock()

    def add(self, usage: Usage | int) -> int:
        """Add one call's usage (or a raw token count); returns the new cumulative total."""
        with self._lock:
            if isinstance(usage, Usage):
                self._usage = self._usage + usage
                self._used += usage.total
            else:
                self._used += int(usage)
            return self._used

    @property
    def used(self) -> int:
        with self._lock:
            return self._used

    @property
    def usage(self) -> Usage:
        """The summed `Usage` of every call added as a `Usage`."""
        with self._lock:
            return Usage(**self._usage.to_dict())

    @property
    def remaining(self) -> int:
        return max(0, self.budget - self.used)

    @property
    def percent(self) -> float:
        return self.used / self.budget * 100

    @property
    def exhausted(self) -> bool:
        return self.used >= self.budget

    def threshold(self) -> int:
        """The highest threshold reached (0 when below 50%)."""
        return _level(self.percent)[0]

    def recommendation(self) -> str:
        return _level(self.percent)[1]

    def status(self) -> dict[str, Any]:
        """What `check_token_budget` returns to the model."""
        used = self.used  # read once: every figure below describes the same moment
        pct = used / self.budget * 100
        threshold, recommendation = _level(pct)
        return {
            "used": used,
            "budget": self.budget,
            "remaining": max(0, self.budget - used),
            "percent": round(pct, 1),
            "threshold": threshold,
            "recommendation": recommendation,
        }


def _level(percent: float) -> tuple[int, str]:
    """The highest threshold `percent` reaches and its recommendation ((0, continue) below 50%)."""
    return next(((t, rec) for t, rec in THRESHOLDS if percent >= t), (0, "continue"))
