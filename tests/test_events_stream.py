"""`--events -`: stderr carries the run's events and nothing else, one versioned JSON object a
line, ending with how the run ended; the log moves to stdout. The same events drive the live
display, whose integration check and review are phases of their own, their tokens counted."""

from __future__ import annotations

import io
import json
from pathlib import Path

from clirun import agentrun
from rich.console import Console
from runkit import make_project, scripted, spec_text, writes
from test_review_cli import met, review_turn

from agentrun.cli.live import LiveProgress
from agentrun.cli.output import Output
from agentrun.cli.progress import BASE_CHECK, PlainProgress
from agentrun.core import events as ev

GROUPS = [("G1", [], "one.txt"), ("G2", [], "two.txt")]
REVIEW = {**review_turn([met(1, "one.txt:1, two.txt:1"), met(2, "git diff --stat")]),
          "usage": {"input_tokens": 3000, "output_tokens": 200}}


def lines_of(stream: str) -> list[dict]:
    """Every line of `stream` as one JSON object (the test fails on any other line)."""
    return [json.loads(line) for line in stream.splitlines()]


def test_the_event_stream_is_json_only_and_ends_with_how_the_run_ended(tmp_path):
    script = {"groups": {"G1": writes("one.txt", "1\n"), "G2": writes("two.txt", "2\n")},
              "agents": {"code-reviewer": [{"tool_calls": [
                  {"name": "read_file", "arguments": {"path": "one.txt"}}],
                  "usage": {"input_tokens": 2000, "output_tokens": 50}}, REVIEW]}}
    root = make_project(tmp_path / "p", "SPEC-9", spec_text("SPEC-9", GROUPS, status="draft"),
                        script)
    args = [a for a in scripted("--validate", "true", "--mode", "orchestrated", review=True)
            if a != "--json"]
    proc = agentrun("run", "SPEC-9", *args, "--events", "-", cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    events = lines_of(proc.stderr)
    assert {e["v"] for e in events} == {1}
    assert events[-1]["type"] == "run_done" and events[-1]["status"] == "complete"
    kinds = [e["type"] for e in events]
    for kind in ("base_check_start", "base_check_done", "integration_start",
                 "integration_step", "integration_passed", "review_start", "review_step",
                 "review_done", "agent_step", "worker_result"):
        assert kind in kinds, kind
    assert kinds.index("integration_passed") < kinds.index("review_start")
    done = next(e for e in events if e["type"] == "review_done")
    assert done["result"] == "APPROVED" and done["tokens"] == 5250
    # the log and its warnings went to stdout, before the report
    assert "warning: SPEC-9 status is draft, not audited" in proc.stdout
    assert "wave 1: integration check `true`" in proc.stdout
    assert "review: APPROVED (Review v1, 5,250 tokens" in proc.stdout
    assert proc.stdout.index("wave 1: starting") < proc.stdout.index("Result: complete")

    # the live display, fed the same events: a row for each phase, all tokens in the totals
    result = json.loads((Path(events[-1]["run_dir"]) / "result.json").read_text())
    out = Output("human")
    screen = io.StringIO()
    out._stderr = Console(file=screen, force_terminal=True, width=140)
    with LiveProgress(out) as live:
        for event in events:
            live(ev.parse(json.dumps(event)))  # the same objects the run emitted
            if event["type"] == "review_step" and event["step"] == 1:  # counted as it goes
                assert live.phase == "Review" and live.rows["review"].tokens == 2050
    assert [live.rows[name].state for name in (BASE_CHECK, "check 1", "review")] == \
        ["passed", "passed", "approved"]
    assert live.rows["check 1"].step == 1 and live.rows["review"].tokens == 5250
    assert live.totals()[0] == result["usage"]["input_tokens"] + \
        result["usage"]["output_tokens"] + result["usage"]["cache_read_tokens"] + \
        result["usage"]["cache_write_tokens"]
    shown = screen.getvalue()
    assert "check 1" in shown and "approved" in shown and "5,250" in shown

    # refused before it starts (its spec is dirty): the stream still ends saying so
    (root / "one.txt").write_text("changed\n")
    refused = agentrun("run", "SPEC-9", *scripted("--rerun", "--events", "-"), cwd=root)
    assert refused.returncode == 3, refused.stderr
    [end] = lines_of(refused.stderr)
    assert (end["type"], end["status"], end["exit_code"]) == ("run_done", "error", 3)
    assert "uncommitted changes: one.txt" in end["error"]["message"]
    assert refused.json["error"]["message"] == end["error"]["message"]  # stdout: the document


def test_plain_progress_names_the_phases(capsys):
    progress = PlainProgress(Output("plain"))
    for event in [ev.IntegrationStepEvent(wave="1", check=2, groups=("G2",)),
                  ev.IntegrationFailedEvent(wave="1", culprits=(("G2",),)),
                  ev.ReviewDoneEvent(result="CHANGES_REQUESTED", version=2, tokens=1500,
                                     cost_usd=0.25),
                  ev.ReviewStepEvent(step=3, tokens=900)]:
        progress(event)
    err = capsys.readouterr().err.splitlines()
    assert [line.split(" ", 1)[1] for line in err] == [
        "wave 1: check 2: G2 alone", "wave 1: integration check failed (broken by G2)",
        "review: CHANGES_REQUESTED (Review v2, 1,500 tokens, $0.2500)"]


def test_an_aggregate_refused_before_it_starts_still_ends_its_stream(tmp_path):
    """`aggregate` checks its inputs before it aggregates anything; refused there (a bad
    option, a result file that is not one), its event stream still ends with run_done
    saying why, as a run's does."""
    root = make_project(tmp_path / "p", "SPEC-9", spec_text("SPEC-9", GROUPS), {})
    bad_option = agentrun("aggregate", "SPEC-9", "r.json", "--on-failure", "later",
                          "--events", "-", cwd=root)
    assert bad_option.returncode == 2, bad_option.stdout + bad_option.stderr
    [end] = lines_of(bad_option.stderr)
    assert (end["type"], end["status"], end["exit_code"]) == ("run_done", "error", 2)
    assert "invalid --on-failure 'later'" in end["error"]["message"]
    (tmp_path / "r.json").write_text("not a result\n")
    stream = tmp_path / "events.ndjson"
    bad_result = agentrun("aggregate", "SPEC-9", str(tmp_path / "r.json"), "--events",
                          str(stream), cwd=root)
    assert bad_result.returncode == 2, bad_result.stdout + bad_result.stderr
    [end] = lines_of(stream.read_text())
    assert (end["type"], end["status"], end["exit_code"]) == ("run_done", "error", 2)
    assert "r.json" in end["error"]["message"] and end["error"]["hint"]
    assert end["error"]["message"] in bad_result.stderr  # the log says the same
