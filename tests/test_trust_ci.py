"""`agentrun aggregate` trusts git, not the result files: a forged artifact naming another
branch or base fails its batch and moves nothing (a bare origin, clones as CI jobs)."""

from __future__ import annotations

import json

from gitutil import run_git
from test_ci_fanout import aggregate_job, bare_origin, clone, worker_job

from agentrun.run.assignment import ci_branch

ONE = [("G1", [], "one.txt")]
SCRIPT = {"groups": {"G1": [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "one.txt", "content": "1\n"}}],
     "usage": {"input_tokens": 10, "output_tokens": 5}},
    {"tool_calls": [{"name": "submit_result", "arguments": {
        "status": "complete", "summary": "wrote one.txt", "criteria_met": [],
        "deviations": []}}], "usage": {"input_tokens": 10, "output_tokens": 5}}]}}
ENTRY = {"wave": 1, "batch": "single", "groups": "G1", "branch": ci_branch("SPEC-73", "single")}


def push_evil(origin, tmp_path, branch: str, *, on: str = "main") -> str:
    """An attacker's commit on `branch` of origin (from `on`); returns its sha."""
    evil = clone(origin, tmp_path / f"evil-{branch.replace('/', '-')}")
    run_git(evil, "checkout", "-q", "-B", "work", f"origin/{on}")
    (evil / "evil.txt").write_text("pwned\n")
    run_git(evil, "add", "evil.txt")
    run_git(evil, "commit", "-q", "-m", "evil")
    run_git(evil, "push", "-q", "--force", "origin", f"HEAD:refs/heads/{branch}")
    return run_git(evil, "rev-parse", "HEAD")


def forge(path, **fields) -> None:
    data = json.loads(path.read_text())
    data.update(fields)
    path.write_text(json.dumps(data))


def test_a_result_naming_another_branch_is_not_merged(tmp_path):
    origin = bare_origin(tmp_path, "SPEC-73", ONE, SCRIPT)
    evil = push_evil(origin, tmp_path, "feature/evil")
    results = tmp_path / "results"
    proc, out = worker_job(origin, tmp_path, "SPEC-73", ENTRY, results)
    assert proc.returncode == 0, proc.stderr
    forge(out, branch="feature/evil")
    agg, done = aggregate_job(origin, tmp_path / "agg", "SPEC-73", [out])
    assert done.returncode == 1, done.stderr
    group = done.json["groups"]["G1"]
    assert group["status"] == "failed" and "feature/evil" in group["error"]
    main = run_git(origin, "rev-parse", "main")
    assert run_git(origin, "merge-base", main, evil) != evil  # evil is not in main
    assert "evil.txt" not in run_git(origin, "ls-tree", "--name-only", "main")
    assert "one.txt" not in run_git(origin, "ls-tree", "--name-only", "main")


def test_a_result_naming_main_is_not_merged(tmp_path):
    origin = bare_origin(tmp_path, "SPEC-73", ONE, SCRIPT)
    results = tmp_path / "results"
    proc, out = worker_job(origin, tmp_path, "SPEC-73", ENTRY, results)
    assert proc.returncode == 0, proc.stderr
    evil = push_evil(origin, tmp_path, "main")  # main moved under the aggregate job
    forge(out, branch="main")
    agg, done = aggregate_job(origin, tmp_path / "agg", "SPEC-73", [out])
    assert done.returncode == 1, done.stderr
    assert "main" in done.json["groups"]["G1"]["error"]
    assert "one.txt" not in run_git(origin, "ls-tree", "--name-only", "main")
    assert run_git(origin, "rev-parse", "main~1") == evil  # only the report commit on top


def test_a_result_naming_a_base_git_does_not_confirm_is_not_merged(tmp_path):
    """The job's branch carries an attacker's commit under the worker's; the forged base
    would hide it from verification."""
    origin = bare_origin(tmp_path, "SPEC-73", ONE, SCRIPT)
    evil = push_evil(origin, tmp_path, "feature/evil")
    job = clone(origin, tmp_path / "job")
    run_git(job, "checkout", "-q", "-B", ENTRY["branch"], evil)
    (job / "one.txt").write_text("1\n")
    run_git(job, "add", "one.txt")
    run_git(job, "commit", "-q", "-m", "G1")
    run_git(job, "push", "-q", "origin", f"HEAD:refs/heads/{ENTRY['branch']}")
    results = tmp_path / "results"
    proc, out = worker_job(origin, tmp_path, "SPEC-73", ENTRY, results, push=False)
    assert proc.returncode == 0, proc.stderr
    forge(out, base_commit=evil, commits=[run_git(job, "rev-parse", "HEAD")])
    agg, done = aggregate_job(origin, tmp_path / "agg", "SPEC-73", [out])
    assert done.returncode == 1, done.stderr
    group = done.json["groups"]["G1"]
    assert group["status"] == "failed" and "base commit" in group["error"]
    assert "evil.txt" not in run_git(origin, "ls-tree", "--name-only", "main")
