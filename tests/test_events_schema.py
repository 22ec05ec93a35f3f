"""The event schema (agentrun/core/events/): every event round-trips through its JSON line,
anything else is refused, and docs/events.md documents exactly the classes' types and fields."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from eventkit import kind, sample

from agentrun.core import events as ev

DOC = Path(__file__).resolve().parent.parent / "docs" / "events.md"
CLASSES = ev.event_classes()
WIRE_ONLY = {"v", "t", "type"}  # every event's; the doc says so once, above its tables


def doc_tables() -> dict[str, tuple[set[str], set[str]]]:
    """Each documented event type: (its fields, those marked `?`: absent when None)."""
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not re.fullmatch(r"`[a-z_]+`", cells[0]):
            continue
        names = re.findall(r"`([a-z_]+)(\??)`", cells[1])
        rows[cells[0].strip("`")] = ({n for n, _ in names}, {n for n, q in names if q})
    return rows


def test_the_union_holds_every_event_class_once():
    types_ = [kind(c) for c in CLASSES]
    assert len(types_) == len(set(types_)) > 60
    defined = {c for c in vars(ev).values() if isinstance(c, type) and c is not ev.BaseEvent
               and issubclass(c, ev.BaseEvent) and "type" in c.__dict__.get("__annotations__", {})}
    assert defined == set(CLASSES)  # no event class left out of `Event`


@pytest.mark.parametrize("cls", CLASSES, ids=kind)
def test_every_event_round_trips_through_its_json_line(cls):
    for optional in (True, False):
        event = sample(cls, optional=optional)
        line = ev.dumps(event)
        data = json.loads(line)
        assert list(data)[:3] == ["v", "t", "type"] and data["v"] == ev.SCHEMA_VERSION
        assert data["type"] == kind(cls)
        assert ev.parse(line) == event
        assert ev.parse(line.encode()) == event
        # absent-when-None fields are left out; every other field is on the line
        expected = set(cls.model_fields) - (set() if optional else cls.absent_fields)
        assert set(data) == expected
    with pytest.raises(ValueError):  # frozen
        event.t = 0  # type: ignore[misc]


def test_the_union_refuses_unknown_and_malformed_lines():
    good = ev.WorkerTimeoutEvent(batch="G1", timeout_s=30)
    assert ev.parse(ev.dumps(good)) == good
    base = ev.wire(good)
    bad = [
        "not json", "[1, 2]", "null", "{}",
        {**base, "type": "worker_exploded"},  # unknown type
        {k: v for k, v in base.items() if k != "type"},
        {k: v for k, v in base.items() if k != "timeout_s"},  # a field missing
        {**base, "extra": 1},  # a field unknown
        {**base, "timeout_s": "30"},  # no coercion of untrusted input
        {**base, "batch": ["G1"]},
        {**base, "v": 2},  # a later schema
        {**base, "t": True},
        {**ev.wire(ev.AgentStepEvent(batch="G1", step=1, tokens=1)),
         "usage": {"input_tokens": -5}},
        {**ev.wire(ev.StepEvent(step=1, tokens=1)), "usage": {"input_tokens": 1, "x": 2}},
        {**ev.wire(ev.SpawnEvent(pgid=5)), "pgid": True},
    ]
    for item in bad:
        line = item if isinstance(item, str) else json.dumps(item)
        with pytest.raises(ValueError):
            ev.parse(line)


def test_a_progress_line_is_only_ever_a_workers_own_event():
    step = ev.StepEvent(step=2, tokens=10, usage=ev.UsageCounts(input_tokens=10), started=1.5)
    assert ev.parse_progress(ev.dumps(step)) == step
    for forged in (ev.AgentStepEvent(batch="G2", step=2, tokens=10),  # another worker's
                   ev.WorkerResultEvent(batch="G1", groups=["G1"], status="complete",
                                        commits=1, tokens=1),
                   ev.RunDoneEvent(status="complete")):
        assert ev.parse(ev.dumps(forged)) == forged
        with pytest.raises(ValueError, match="progress"):
            ev.parse_progress(ev.dumps(forged))


def test_relayed_events_carry_the_workers_fields_and_batch():
    assert set(ev.RELAYED) == {c for c in CLASSES if "agent_" + kind(c) in
                               {kind(r) for r in ev.RELAYED.values()}}
    for raw, agent in ev.RELAYED.items():
        assert kind(agent) == f"agent_{kind(raw)}"
        assert set(agent.model_fields) == set(raw.model_fields) | {"batch"}
        assert agent.absent_fields == raw.absent_fields
        event = sample(raw)
        out = ev.relayed(event, "G1_G2")
        assert type(out) is agent and out.batch == "G1_G2"  # type: ignore[attr-defined]
        assert out.t == event.t  # when the worker said it
        assert ev.wire(out) == {**ev.wire(event), "type": kind(agent), "batch": "G1_G2"}
    for raw, review in ev.REVIEWED.items():
        assert kind(review) == f"review_{kind(raw)}"
        assert ev.wire(ev.reviewed(sample(raw))) == {**ev.wire(sample(raw)), "type": kind(review)}
    assert ev.reviewed(ev.AttemptEvent(attempt=1, max_attempts=2, agent="a")) is None


def test_docs_list_exactly_the_events_and_their_fields():
    documented = doc_tables()
    streamed = [c for c in CLASSES if c not in ev.RELAYED]  # a worker's file: as agent_*
    assert set(documented) == {kind(c) for c in streamed}
    for cls in streamed:
        fields, absent = documented[kind(cls)]
        assert fields == set(cls.model_fields) - WIRE_ONLY, kind(cls)
        assert absent == cls.absent_fields, kind(cls)
    text = DOC.read_text(encoding="utf-8")
    for payload, row in ((ev.UsageCounts, "`usage`, `worker_usage`"),
                         (ev.CriterionItem, "an item of `criteria`"),
                         (ev.FindingItem, "an item of `findings`"),
                         (ev.ErrorInfo, "`error` of `run_done`")):
        line = next(ln for ln in text.splitlines() if ln.startswith(f"| {row} |"))
        assert set(re.findall(r"`([a-z_]+)`", line.split("|")[2])) == set(payload.model_fields)
    assert f'"v": {ev.SCHEMA_VERSION}' in text


def test_a_workers_progress_file_is_read_as_untrusted(tmp_path):
    """What the orchestrator relays from a worker's progress file (run/backends.py): its own
    events, as this worker's; any other line is dropped, the first said as a warning."""
    from types import SimpleNamespace

    from agentrun.run.process_backend import ProcessHandle

    path = tmp_path / "progress.ndjson"
    good = ev.StepEvent(step=1, tool="read_file", tokens=12, usage=ev.UsageCounts(input_tokens=12))
    lines = [ev.dumps(good), "not json", '{"type": "step", "step": "1"}',
             ev.dumps(ev.WorkerResultEvent(batch="G1", groups=["G1"], status="complete",
                                           commits=9, tokens=1)),
             ev.dumps(ev.AgentStepEvent(batch="G2", step=1)), "",
             ev.dumps(ev.ToolEvent(name="write_file", started=1.0)), '{"type": "tool", "na']
    path.write_text("\n".join(lines))  # the last line is not finished yet
    got: list[tuple[ev.BaseEvent, bool]] = []
    handle = ProcessHandle(SimpleNamespace(), SimpleNamespace(  # type: ignore[arg-type]
        batch="G1", progress_path=str(path)), None,  # type: ignore[arg-type]
        lambda event, record=True: got.append((event, record)))
    handle.relay_progress()
    relayed = [e for e, _ in got if not isinstance(e, ev.WarningEvent)]
    assert relayed == [ev.relayed(good, "G1"), ev.relayed(ev.ToolEvent(
        name="write_file", started=1.0, t=relayed[1].t), "G1")]
    assert all(not record for e, record in got if e in relayed)  # the worker's file has them
    warnings = [e for e, _ in got if isinstance(e, ev.WarningEvent)]
    assert len(warnings) == 1 and warnings[0].batch == "G1" and handle.dropped == 4
    assert "not a progress event" in warnings[0].message
    with open(path, "a") as fh:  # the rest of the last line comes
        fh.write('me": 3}\n')
    handle.relay_progress()
    assert handle.dropped == 5 and len(got) == 3  # said once only
