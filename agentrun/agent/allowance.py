"""The run's spending cap as one worker meets it: before each model call, the worker's own spend
against the allowance the run gave it.

Workers are processes of their own, and the run (run/spending.py) learns what one spent only
from its progress events, a moment late. So the run hands each running worker an allowance in
USD, written to a file only agentrun writes (the worker's control folder under .git, read-only
in the sandbox), and raises it as it sees the worker spend; the allowances together never
exceed what is left of the cap. A worker starts a model call only while its own spend is below
its allowance; at the allowance it waits for more (as a rule a fraction of a second, until the
run has seen its last call), and it stops with `cost_cap` once the run says stop or the
allowance is all there is (`final`: an in-process worker, which nothing raises while it
runs). So each worker spends at most its allowance plus the one call it started below it, and
the run at most its cap plus one call per running worker.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agentrun.core.fsutil import atomic_write_json
from agentrun.core.usage import Usage

POLL_S = 0.05  # how often a waiting worker reads its allowance again
COST_CAP = "cost_cap"


@dataclass(frozen=True)
class Grant:
    """What the run allows one worker: spend up to `usd`; `final`: no more will come; `stop`:
    make no further call."""

    usd: float
    final: bool = False
    stop: bool = False

    def write(self, path: Path) -> None:
        atomic_write_json(path, {"usd": self.usd, "final": self.final, "stop": self.stop})

    @classmethod
    def read(cls, path: Path) -> Grant:
        """The grant in `path`; a missing or unreadable one allows nothing (the run always
        writes it before the worker starts: without it the cap cannot be kept)."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            usd = data["usd"]
            if isinstance(usd, bool) or not isinstance(usd, int | float):
                raise ValueError(usd)
            return cls(float(usd), data.get("final") is True, data.get("stop") is True)
        except (OSError, ValueError, KeyError, TypeError):
            return cls(0.0, final=True, stop=True)


@dataclass
class Allowance:
    """A worker's side of its allowance: the file, and the price of its usage so far."""

    path: Path
    price: Callable[[Usage], float]

    def check(self, usage: Usage, stop: Callable[[], str | None],
              wait: Callable[[float], object]) -> str | None:
        """None when the next call may start; else `cost_cap`, or why the worker must stop
        (`stop`: interrupted, out of time) while it waited for a larger allowance."""
        spent = self.price(usage)
        while True:
            grant = Grant.read(self.path)
            if grant.stop:
                return COST_CAP
            if spent < grant.usd:
                return None
            if grant.final:
                return COST_CAP
            reason = stop()
            if reason:
                return reason
            wait(POLL_S)
