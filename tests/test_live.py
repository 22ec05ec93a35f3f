"""Run progress: the live table in a terminal and the plain lines elsewhere, from events."""

from __future__ import annotations

import io

from eventkit import kind, sample
from rich.console import Console

from agentrun.cli import event_lines
from agentrun.cli.live import LiveProgress
from agentrun.cli.output import Output
from agentrun.cli.progress import _HANDLERS, PlainProgress
from agentrun.core import events as ev

EVENTS = [
    ev.RunStartEvent(run_id="r1", spec="SPEC-1", mode="orchestrated", waves=2, run_dir="/r"),
    ev.WaveStartEvent(wave="1", number=1, batches=["G1", "G2"]),
    ev.WorkerStartEvent(batch="G1", groups=["G1"], worktree="/wt/G1", branch="b1"),
    ev.WorkerStartEvent(batch="G2", groups=["G2"], worktree="/wt/G2", branch="b2"),
    ev.AgentStepEvent(batch="G1", step=3, tool="write_file", tokens=4200),
    ev.WorkerResultEvent(batch="G1", groups=["G1"], status="complete", error=None, commits=1,
                         tokens=5000, cost_usd=0.0123),
    ev.WorkerTimeoutEvent(batch="G2", timeout_s=30),
    ev.WorkerResultEvent(batch="G2", groups=["G2"], status="failed",
                         error="worker exceeded its timeout", commits=0, tokens=10,
                         cost_usd=None),
    ev.MergedEvent(batch="G1", commit="abcdef123456", started=1.0),
    ev.WaveDoneEvent(wave="1", failed=["G2"]),
]


def test_plain_progress_prints_one_line_per_meaningful_event(capsys):
    progress = PlainProgress(Output("plain"))
    for event in EVENTS:
        progress(event)
    err = capsys.readouterr().err
    assert "run r1: SPEC-1 in orchestrated mode, 2 wave(s)" in err
    assert "worker G1: complete (1 commit(s), 5,000 tokens)" in err
    assert "worker G2: timed out after 30s, killed" in err
    assert "merged G1 (abcdef1)" in err
    assert "wave 1 done; failed: G2" in err
    assert "write_file" not in err  # agent steps are live-table detail, not log lines


def test_live_table_tracks_each_worker():
    out = Output("human")
    buffer = io.StringIO()
    out._stderr = Console(file=buffer, force_terminal=True, width=120)
    with LiveProgress(out) as progress:
        for event in EVENTS[:5]:
            progress(event)
        row = progress.rows["G1"]
        assert (row.state, row.step, row.tool, row.tokens) == ("working", 3, "write_file", 4200)
        for event in EVENTS[5:]:
            progress(event)
    assert progress.rows["G1"].state == "merged" and progress.rows["G1"].cost == 0.0123
    assert progress.rows["G2"].state == "failed"
    progress(ev.WorkerResultEvent(batch="G2", groups=["G2"], status="failed", commits=0,
                                  stop_reason="refusal", tokens=10, cost_usd=None))
    assert progress.rows["G2"].state == "failed (refusal)"
    assert progress.waves_done == 1
    screen = buffer.getvalue()
    assert "Wave 2/2" in screen and "$0.0123" in screen and "write_file" in screen


def test_cost_accrues_from_progress_and_totals_cover_the_run():
    out = Output("human")
    buffer = io.StringIO()
    out._stderr = Console(file=buffer, force_terminal=True, width=160)
    usage = ev.UsageCounts(input_tokens=1_000_000)
    with LiveProgress(out, {"my-model": {"input": 2.0, "output": 8.0}}) as progress:
        progress(ev.RunStartEvent(run_id="r", spec="S", mode="orchestrated", waves=1,
                                  run_dir="/r"))
        progress(ev.WaveStartEvent(wave="1", number=1, batches=["G1", "G2", "G3"]))
        progress(ev.WorkerStartEvent(batch="G1", groups=["G1"], worktree="/w", branch="b"))
        # under --max-parallel 1 the other two wait, listed as queued, costing nothing yet
        assert [r.state for r in progress.rows.values()] == ["starting", "queued", "queued"]
        progress(ev.AgentStartEvent(batch="G1", groups=["G1"], model="my-model",
                                    executor="builtin"))
        progress(ev.AgentStepEvent(batch="G1", step=1, tokens=1_000_000, worker_usage=usage,
                                   tool="read_file"))
        assert progress.rows["G1"].cost == 2.0  # priced while the worker still runs
        tokens, cost, unknown, _elapsed = progress.totals()
        assert (tokens, cost, unknown) == (1_000_000, 2.0, False)
        progress(ev.WorkerStartEvent(batch="G2", groups=["G2"], worktree="/w", branch="b"))
        progress(ev.AgentStepEvent(batch="G2", step=1, tokens=500, tool="ls",  # no model known:
                                   worker_usage=ev.UsageCounts(input_tokens=500)))  # no price
        assert progress.totals()[:3] == (1_000_500, 2.0, True)
    screen = buffer.getvalue()
    assert "queued" in screen and "1,000,500 tokens" in screen
    assert "$2.0000+ (some prices unknown)" in screen


def _seen(progress) -> tuple:
    """What a person could see change: the phase, the totals, each row (a new row too)."""
    return (progress.phase, progress.waves_total, progress.waves_done, progress.reviews,
            {name: (id(r), r.state, r.step, r.tool, r.tokens, r.cost, r.model, r.ended)
             for name, r in progress.rows.items()})


def test_the_display_dispatches_every_event_type_by_its_class(capsys):
    """Each event type the run emits is shown (it changes the table, or has a log line) or
    left out on purpose (`IGNORED`); each that the display claims does what it claims."""
    streamed = {c for c in ev.event_classes() if c not in ev.RELAYED}  # a worker's: relayed
    handled, lines = set(_HANDLERS), set(event_lines._LINES)
    assert handled | lines | event_lines.IGNORED == streamed
    assert not (handled | lines) & event_lines.IGNORED
    batch, wave = sample(ev.WorkerStartEvent).batch, sample(ev.IntegrationStartEvent).wave
    for cls in sorted(streamed, key=kind):
        event = sample(cls)
        out = Output("human")
        out._stderr = Console(file=io.StringIO(), force_terminal=True, width=200)
        with LiveProgress(out) as progress:
            for before in (ev.WorkerStartEvent(batch=batch, groups=[batch], worktree="/w",
                                               branch="b"),
                           ev.IntegrationStartEvent(wave=wave, command="make", commit="c"),
                           ev.BaseCheckStartEvent(command="make", commit="c"),
                           ev.ReviewStartEvent(spec="S", model="m", provider="p")):
                progress(before)
            seen = _seen(progress)
            progress(event)
            assert (_seen(progress) != seen) == (cls in handled), kind(cls)
        plain = PlainProgress(Output("plain"))
        plain(event)
        said = capsys.readouterr().err
        assert bool(said.strip()) == (cls in lines), kind(cls)
        assert (event_lines.describe(event) is not None) == (cls in lines)
