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
    assert progress.waves_done == 1
    screen = buffer.getvalue()
    assert "Wave 2/2" in screen and "$0.0123" in screen and "write_file" in screen
