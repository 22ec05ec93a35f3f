"""Run progress: the live table in a terminal and the plain lines elsewhere, from events."""

from __future__ import annotations

import io

from rich.console import Console

from agentrun.cli.live import LiveProgress, PlainProgress
from agentrun.cli.output import Output

EVENTS = [
    {"type": "run_start", "run_id": "r1", "spec": "SPEC-1", "mode": "orchestrated", "waves": 2},
    {"type": "wave_start", "wave": "1", "number": 1, "batches": ["G1", "G2"]},
    {"type": "worker_start", "batch": "G1", "groups": ["G1"], "worktree": "/wt/G1"},
    {"type": "worker_start", "batch": "G2", "groups": ["G2"], "worktree": "/wt/G2"},
    {"type": "agent_step", "batch": "G1", "step": 3, "tool": "write_file", "tokens": 4200},
    {"type": "worker_result", "batch": "G1", "groups": ["G1"], "status": "complete",
     "error": None, "commits": 1, "tokens": 5000, "cost_usd": 0.0123},
    {"type": "worker_timeout", "batch": "G2", "timeout_s": 30},
    {"type": "worker_result", "batch": "G2", "groups": ["G2"], "status": "failed",
     "error": "worker exceeded its timeout", "commits": 0, "tokens": 10, "cost_usd": None},
    {"type": "merged", "batch": "G1", "commit": "abcdef123456"},
    {"type": "wave_done", "wave": "1", "failed": ["G2"]},
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
    progress({"type": "worker_result", "batch": "G2", "status": "failed",
              "stop_reason": "refusal", "tokens": 10, "cost_usd": None})
    assert progress.rows["G2"].state == "failed (refusal)"
    assert progress.waves_done == 1
    screen = buffer.getvalue()
    assert "Wave 2/2" in screen and "$0.0123" in screen and "write_file" in screen


def test_cost_accrues_from_progress_and_totals_cover_the_run():
    out = Output("human")
    buffer = io.StringIO()
    out._stderr = Console(file=buffer, force_terminal=True, width=160)
    usage = {"input_tokens": 1_000_000, "output_tokens": 0, "cache_read_tokens": 0,
             "cache_write_tokens": 0}
    with LiveProgress(out, {"my-model": {"input": 2.0, "output": 8.0}}) as progress:
        progress({"type": "run_start", "run_id": "r", "spec": "S", "mode": "orchestrated",
                  "waves": 1})
        progress({"type": "wave_start", "wave": "1", "number": 1,
                  "batches": ["G1", "G2", "G3"]})
        progress({"type": "worker_start", "batch": "G1", "groups": ["G1"], "worktree": "/w"})
        # under --max-parallel 1 the other two wait, listed as queued, costing nothing yet
        assert [r.state for r in progress.rows.values()] == ["starting", "queued", "queued"]
        progress({"type": "agent_start", "batch": "G1", "model": "my-model"})
        progress({"type": "agent_step", "batch": "G1", "step": 1, "tokens": 1_000_000,
                  "worker_usage": usage, "tool": "read_file"})
        assert progress.rows["G1"].cost == 2.0  # priced while the worker still runs
        tokens, cost, unknown, _elapsed = progress.totals()
        assert (tokens, cost, unknown) == (1_000_000, 2.0, False)
        progress({"type": "worker_start", "batch": "G2", "groups": ["G2"], "worktree": "/w"})
        progress({"type": "agent_step", "batch": "G2", "step": 1, "tokens": 500,
                  "worker_usage": {"input_tokens": 500}, "tool": "ls"})  # model not known: no price
        assert progress.totals()[:3] == (1_000_500, 2.0, True)
    screen = buffer.getvalue()
    assert "queued" in screen and "1,000,500 tokens" in screen
    assert "$2.0000+ (some prices unknown)" in screen
