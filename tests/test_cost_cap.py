"""The spending cap over a whole run, through `agentrun run`: the reviewer and the fix cycles
count against it and do not start once it is reached, and a chain of resumes counts what every
run of the chain spent."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import yaml
from clirun import agentrun
from fake_model_server import FakeModelServer, RecordedRequest, Reply
from gitutil import run_git
from runkit import make_project, scripted, spec_text, writes
from test_real_projects import CALL_USD, group_of, project, run, turns_done
from test_review_cli import met, review_turn

# -- the reviewer and the fix cycles (scripted provider, in-process workers) ----------------
WORKER_USD = 0.235  # 2,200 input + 150 output tokens at $100 per million
FIRST_CALL_USD = 0.11  # its first call: 1,000 input + 100 output tokens
REVIEW_USD = 0.70  # 7,000 input tokens
APPROVE = [met(1, "a.txt:1 holds the greeting"), met(2, "git diff --stat: 1 file changed")]
FINDING = {"severity": "major", "file": "a.txt:1", "issue": "the greeting has no period",
           "fix": "write `hello.`"}


def reviewed_project(tmp_path: Path, reviews: list[dict[str, Any]],
                     config: dict[str, Any] | None = None,
                     files: dict[str, str] | None = None) -> Path:
    costly = [{**turn, "usage": {"input_tokens": 7000, "output_tokens": 0}} for turn in reviews]
    script = {"default": writes("a.txt", "hello\n"), "agents": {"code-reviewer": costly},
              "groups": {"FIX-1": writes("a.txt", "hello.\n")}}
    return make_project(tmp_path / "p", "SPEC-1", spec_text("SPEC-1", []), script, {
        ".specflow/config.yaml": yaml.safe_dump(
            {"pricing": {"scripted": {"input": 100.0, "output": 100.0}}, **(config or {})}),
        **(files or {})})


def reviewed_run(root: Path, cap: float, *extra: str):
    return agentrun("run", "SPEC-1", *scripted("--in-process", "--max-cost", f"{cap}", *extra,
                                               review=True), cwd=root)


def events(result: dict[str, Any]) -> list[dict[str, Any]]:
    lines = (Path(result["run_dir"]) / "events.ndjson").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_a_cap_reached_by_the_workers_skips_the_review_and_the_run_is_not_approved(tmp_path):
    """The worker's last call reaches the cap: its work is complete, the review does not
    start."""
    root = reviewed_project(tmp_path, [review_turn(APPROVE)])
    proc = reviewed_run(root, 0.20)
    assert proc.returncode == 1, proc.stderr
    doc = proc.json
    assert doc["status"] == "partial" and doc["stop_reason"] == "cost_cap"
    assert doc["groups"]["single"]["status"] == "complete"
    assert doc["reviews"] == []  # the reviewer never ran
    assert doc["review"]["reviewed"] is False
    assert "spending cap" in doc["review"]["skipped"]
    line = next(w for w in doc["warnings"] if w.startswith("the review was not run"))
    assert "spent $0.2350 of $0.2" in line and "`agentrun review SPEC-1`" in line
    assert "the review was not run" in proc.stderr
    assert "`agentrun review SPEC-1`" in (root / ".specflow/STATE.md").read_text()
    assert doc["spent_usd"] == WORKER_USD


def test_the_reviewers_cost_counts_and_a_fix_cycle_does_not_start_past_the_cap(tmp_path):
    root = reviewed_project(tmp_path, [review_turn(APPROVE, [FINDING]), review_turn(APPROVE)])
    proc = reviewed_run(root, 0.50, "--fix-cycles", "1")
    assert proc.returncode == 1, proc.stderr
    doc = proc.json
    assert doc["status"] == "partial" and doc["stop_reason"] == "cost_cap"
    assert [r["result"] for r in doc["reviews"]] == ["CHANGES_REQUESTED"]
    assert "FIX-1" not in doc["groups"]  # no fix worker started
    assert abs(doc["spent_usd"] - (WORKER_USD + REVIEW_USD)) < 1e-9
    assert any(w.startswith("the fix cycle was not run") for w in doc["warnings"])
    kinds = [e["type"] for e in events(doc)]
    assert kinds.index("review_start") < kinds.index("cost_warning") < kinds.index("cost_cap")


def test_the_fix_workers_cost_counts_and_the_next_review_does_not_start_past_the_cap(
        tmp_path):
    root = reviewed_project(tmp_path, [review_turn(APPROVE, [FINDING]), review_turn(APPROVE)])
    cap = WORKER_USD + REVIEW_USD + 0.05  # reached by the fix worker's first call
    proc = reviewed_run(root, cap, "--fix-cycles", "1")
    assert proc.returncode == 1, proc.stderr
    doc = proc.json
    assert doc["stop_reason"] == "cost_cap" and doc["status"] == "partial"
    fix = doc["groups"]["FIX-1"]
    assert (fix["status"], fix["stop_reason"]) == ("partial", "cost_cap")
    assert len(doc["reviews"]) == 1  # the second review did not run
    assert abs(doc["spent_usd"] - (WORKER_USD + REVIEW_USD + FIRST_CALL_USD)) < 1e-9
    assert any(w.startswith("the review of the fix was not run: the run reached its spending "
                            "cap") for w in doc["warnings"])


def test_agentrun_fix_counts_what_the_run_spent_and_holds_to_the_cap(tmp_path):
    """`agentrun fix` continues the run: the cap covers what it spent before, and its total
    keeps counting. Two cases on one project: a cap the run has passed, then a higher one.
    Its worker's worktree is set up as the run's were (the check needs what set-up makes)."""
    root = reviewed_project(tmp_path, [review_turn(APPROVE, [FINDING])],
                            {"setup_command": "echo ok > .ready",
                             "validation_command": "test -f .ready"},
                            {".gitignore": ".specflow/runs/\n.ready\n"})
    proc = reviewed_run(root, 100)
    assert proc.returncode == 1 and proc.json["stop_reason"] == "review", proc.stderr
    script = yaml.safe_load((root / ".specflow/script.yaml").read_text())
    script["agents"]["code-reviewer"] = [{**review_turn(APPROVE),
                                          "usage": {"input_tokens": 7000, "output_tokens": 0}}]
    (root / ".specflow/script.yaml").write_text(yaml.safe_dump(script))
    run_git(root, "commit", "-qam", "the second review approves")
    fix = ("fix", "SPEC-1", "--provider", "scripted", "--script", ".specflow/script.yaml",
           "--in-process", "--json")

    proc = agentrun(*fix, "--max-cost", f"{WORKER_USD + REVIEW_USD - 0.01}", cwd=root)
    assert proc.returncode == 1, proc.stderr
    doc = proc.json
    assert doc["stop_reason"] == "cost_cap" and "FIX-1" not in doc["groups"]
    assert abs(doc["spent_usd"] - (WORKER_USD + REVIEW_USD)) < 1e-9
    assert any(w.startswith("the fix cycle was not run") for w in doc["warnings"])

    proc = agentrun(*fix, "--max-cost", "5", cwd=root)
    assert proc.returncode == 0, proc.stderr
    doc = proc.json
    assert doc["status"] == "complete" and doc["groups"]["FIX-1"]["status"] == "complete"
    assert [(c["wave"], c["ok"]) for c in doc["integration"]][-1] == ("fix-1", True)
    assert abs(doc["spent_usd"] - 2 * (WORKER_USD + REVIEW_USD)) < 1e-9
    assert "spending cap $5 for the whole run" in proc.stderr


# -- a chain of resumes (fake model server, worker processes) -------------------------------
LINE = [("G1", [], "src/a.py"), ("G2", [], "src/b.py"), ("G3", ["G1"], "src/c.py"),
        ("G4", ["G3"], "src/d.py")]


class FailsOnce:
    """Each group writes its file, then submits; G1's first submission reports a failure
    (so the run that paid for it is not the one that completes G1)."""

    def __init__(self) -> None:
        self.groups: list[str] = []
        self.failed = False
        self.lock = threading.Lock()
        self.runs: dict[str, int] = {}  # (each run of a group writes its file anew)

    def __call__(self, request: RecordedRequest) -> Reply:
        group = group_of(request)
        usage = {"input_tokens": 100, "output_tokens": 20, "cache_read_tokens": 50}
        if turns_done(request) == 0:
            with self.lock:
                self.groups.append(group)
                self.runs[group] = n = self.runs.get(group, 0) + 1
            path = dict((g, p) for g, _, p in LINE)[group]
            return Reply(tool_calls=[{"name": "write_file", "arguments": {
                "path": path, "content": f"# {group} {n}\n"}}], usage=usage)
        with self.lock:
            fail = group == "G1" and not self.failed
            self.failed = self.failed or fail
        args = {"status": "failed" if fail else "complete", "summary": "done",
                "criteria_met": [] if fail else ["every file exists"], "deviations": []}
        if fail:
            args["error"] = "the parser module is missing"
        return Reply(tool_calls=[{"name": "submit_result", "arguments": args}], usage=usage)


def test_a_resume_counts_what_every_run_of_the_chain_spent(tmp_path):
    """Every worker makes 2 calls, one at a time (a call costs CALL_USD). Run 1 (G1 fails,
    G2) ends at its cap of 4 calls with wave 1; run 2 redoes G1, and G3's first call reaches
    its cap of 6.5: G3 makes no second call, its file is kept as partial work; run 3's cap is
    below the 7 calls the chain has spent: nothing starts. Run 4 finishes."""
    root = project(tmp_path / "p", LINE)
    model = FailsOnce()

    def step(cap_calls: float):
        with FakeModelServer(responder=model) as server:
            proc = run(root, server, "--max-parallel", "1", *(["--resume"] if model.groups
                                                             else []),
                       "--max-cost", f"{cap_calls * CALL_USD}")
        return proc, len(server.requests)

    proc, calls = step(4)
    assert proc.returncode == 1 and proc.json["stop_reason"] == "cost_cap", proc.stderr
    assert proc.json["groups"]["G1"]["status"] == "failed" and calls == 4
    assert proc.json["groups"]["G2"]["status"] == "complete"
    assert abs(proc.json["spent_usd"] - 4 * CALL_USD) < 1e-9

    proc, calls = step(6.5)
    assert proc.returncode == 1 and proc.json["stop_reason"] == "cost_cap", proc.stderr
    assert calls == 3 and model.groups[-2:] == ["G1", "G3"]
    g3 = proc.json["groups"]["G3"]
    assert (g3["status"], g3["stop_reason"]) == ("partial", "cost_cap")
    assert abs(proc.json["spent_usd"] - 7 * CALL_USD) < 1e-9

    proc, calls = step(6.9)  # higher than run 2's cap, below the chain's 7 calls
    assert proc.returncode == 1 and proc.json["stop_reason"] == "cost_cap", proc.stderr
    assert calls == 0
    assert proc.json["groups"]["G4"]["status"] == "blocked"
    assert abs(proc.json["spent_usd"] - 7 * CALL_USD) < 1e-9
    assert any("spent $1.1900" in w for w in proc.json["warnings"])

    proc, calls = step(12)
    assert proc.returncode == 0, proc.stderr
    assert calls == 4 and proc.json["status"] == "complete"
    assert abs(proc.json["spent_usd"] - 11 * CALL_USD) < 1e-9
