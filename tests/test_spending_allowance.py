"""The hard spending cap's two sides, in one process: the run's allowances (run/spending.py) and
a worker checking its own spend against its allowance before each call (agent/allowance.py).

Simulated workers spend one call at a time, each only when its allowance lets it, while the run
sees their spend late (one relay round behind), as it does with worker processes."""

from __future__ import annotations

import threading
from pathlib import Path

from agentrun.agent.allowance import Allowance, Grant
from agentrun.core import events as ev
from agentrun.core.results import WorkerResult
from agentrun.core.status import Status, StopReason
from agentrun.core.usage import Usage
from agentrun.run.spending import Spending

PRICING = {"m": {"input": 1_000_000.0, "output": 0.0}}  # one input token: $1
CALL = Usage(input_tokens=1)


def price(usage: Usage) -> float:
    return float(usage.input_tokens)


class Handle:
    def __init__(self) -> None:
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True


def test_running_workers_never_spend_more_than_the_cap_and_a_call_each(tmp_path):
    events: list[ev.BaseEvent] = []
    spending = Spending(10.0, "m", PRICING, events.append)
    names = ["A", "B", "C"]
    for name in names:
        spending.allow(name, tmp_path / f"{name}.json", alone=False)
    handles = {name: Handle() for name in names}
    own = dict.fromkeys(names, 0)
    unseen: list[str] = []  # calls made, not yet relayed to the run
    for _ in range(200):  # rounds: every worker that may call does; the run sees last round's
        for event in unseen:
            spending.observe(ev.AgentStepEvent(batch=event,
                                               usage=ev.UsageCounts(**CALL.to_dict())))
        unseen = []
        spending.tend(handles)
        for name in names:
            allowance = Allowance(tmp_path / f"{name}.json", price)
            if allowance.check(Usage(input_tokens=own[name]), lambda: None,
                               lambda _s: None) is None:
                own[name] += 1
                unseen.append(name)
            assert Grant.read(tmp_path / f"{name}.json").usd <= 10.0
        assert sum(g.usd for g in spending.grants.values()) <= 10.0 + 1e-9
        if all(Grant.read(tmp_path / f"{n}.json").stop for n in names):
            break
    assert spending.reached and sum(own.values()) <= 10 + len(names)
    assert sum(own.values()) >= 10
    assert {e.batch for e in events if isinstance(e, ev.CostStopEvent)} == set(names)
    # every worker spent: the allowances were shared, not handed to the first one
    assert all(n >= 2 for n in own.values()), own


def test_a_worker_alone_gets_all_that_is_left_as_its_last(tmp_path):
    spending = Spending(5.0, "m", PRICING, lambda e: None)
    spending.carry(2.0)  # earlier runs of the chain
    spending.allow("A", tmp_path / "A.json", alone=True)
    assert Grant.read(tmp_path / "A.json") == Grant(3.0, final=True)
    allowance = Allowance(tmp_path / "A.json", price)
    assert allowance.check(Usage(input_tokens=2), lambda: None, lambda _s: None) is None
    assert allowance.check(Usage(input_tokens=3), lambda: None, lambda _s: None) == "cost_cap"
    result = WorkerResult.for_batch(["A"], "A", None, status=Status.FAILED,
                                    stop_reason=StopReason.COST_CAP, cost_usd=4.0)
    spending.settle("A", result)
    assert spending.reached and spending.closed()
    capped = spending.capped(result, committed=True)
    assert (capped.status, capped.stop_reason) == (Status.PARTIAL, StopReason.COST_CAP)
    assert capped.error == "stopped at the run's spending cap ($5): no further model call"


def test_a_worker_at_its_allowance_waits_for_more_or_for_a_stop(tmp_path):
    path = tmp_path / "A.json"
    Grant(1.0).write(path)
    allowance = Allowance(path, price)
    raised = threading.Timer(0.1, lambda: Grant(2.0).write(path))
    raised.start()
    assert allowance.check(Usage(input_tokens=1), lambda: None, threading.Event().wait) is None
    stopping = threading.Timer(0.1, lambda: Grant(2.0, stop=True).write(path))
    stopping.start()
    assert allowance.check(Usage(input_tokens=2), lambda: None,
                           threading.Event().wait) == "cost_cap"
    # a worker that must stop anyway does not wait; a missing allowance allows nothing
    assert allowance.check(Usage(input_tokens=5), lambda: "interrupted",
                           threading.Event().wait) == "cost_cap"
    Grant(2.0).write(path)
    assert allowance.check(Usage(input_tokens=5), lambda: "interrupted",
                           threading.Event().wait) == "interrupted"
    missing = Allowance(Path(tmp_path / "none.json"), price)
    assert missing.check(Usage(), lambda: None, lambda _s: None) == "cost_cap"
