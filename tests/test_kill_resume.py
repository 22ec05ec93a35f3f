"""A run killed from outside (SIGKILL of its whole process group, as CI cancels a job), then
`agentrun run --resume`: the dead run's finished work is merged, not redone; every group
merges once, no commit is lost, and nothing of the dead run is left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from clirun import ENTRY_POINT, agentrun, cli_env
from gitutil import run_git
from runkit import make_project, scripted, spec_text, writes

FIVE = [("G1", [], "src/a.py"), ("G2", [], "src/b.py"), ("G3", ["G1", "G2"], "src/c.py"),
        ("G4", ["G1"], "src/d.py"), ("G5", ["G3", "G4"], "src/e.py")]


def script(slow: dict[str, float]) -> dict:
    return {"groups": {gid: writes(path, f"# {gid}\n", latency=slow.get(gid, 0.0))
                       for gid, _, path in FIVE}}


def events(root: Path) -> list[dict]:
    found = sorted((root / ".specflow/runs").glob("*/events.ndjson"))
    if not found:
        return []
    return [json.loads(line) for line in found[0].read_text().splitlines() if line.strip()]


def wait_for(predicate, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def merges(root: Path, base: str) -> list[str]:
    return run_git(root, "log", "--merges", "--format=%s", f"{base}..HEAD").splitlines()


def leftovers(root: Path) -> tuple[str, str]:
    branches = run_git(root, "for-each-ref", "--format=%(refname:short)", "refs/heads/agentrun")
    return run_git(root, "worktree", "list", "--porcelain"), branches


def kill_run(root: Path, when) -> str:
    """Start a run in a process group of its own, SIGKILL the group once `when(events)`
    holds; returns the killed run's id."""
    proc = subprocess.Popen([str(ENTRY_POINT), "run", "SPEC-1", *scripted()], cwd=root,
                            env=cli_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: when(events(root)))
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    run_id = next(e["run_id"] for e in events(root) if e["type"] == "run_start")
    return run_id


def _started(root: Path, gid: str):
    """The worker of `gid` is running: it has written its first progress line."""
    def check(_evs) -> bool:
        found = list((root / ".git/agentrun/runs").glob(f"*/workers/{gid}/progress.ndjson"))
        return bool(found) and found[0].stat().st_size > 0
    return check


def _merged(batch: str):
    return lambda evs: any(e["type"] == "merged" and e["batch"] == batch for e in evs)


# where the run is killed: (the slow groups, the group whose worker runs at the kill, the
# group whose orphaned worker's result file is then deleted, to be derived from git). A
# worker killed as soon as it has started needs 1.5 s of latency to be still running; G2
# keeps 2 s, as G1's worker and merge must finish while it runs.
POINTS = {
    "first-wave-workers": ({"G1": 1.5, "G2": 1.5}, "G2", "G1"),
    "between-merge-and-next-wave": ({"G2": 2.0}, None, None),
    "last-wave": ({"G5": 1.5}, "G5", None),
}


@pytest.mark.parametrize("point", sorted(POINTS))
def test_sigkill_then_resume_adopts_and_leaves_nothing(tmp_path, point):
    """With "first-wave-workers", G1's result is also lost: a missing result is derived from
    git and said."""
    slow, running, lost = POINTS[point]
    root = make_project(tmp_path / "p", "SPEC-1", spec_text("SPEC-1", FIVE), script(slow))
    if running is None:  # G1 merged while G2's worker runs: the next wave has not begun
        running = "G2"
        when = lambda evs: _merged("G1")(evs) and _started(root, "G2")(evs)  # noqa: E731
    else:
        when = _started(root, running)
    base = run_git(root, "rev-parse", "HEAD")
    dead = kill_run(root, when)
    if lost:
        workers = root / ".git/agentrun/runs" / dead / "workers"
        wait_for(lambda: (workers / lost / "result.json").exists())  # the orphan finished
        (workers / lost / "result.json").unlink()
    # a kill can land inside an atomic write: its temp file stays beside the file
    for written in (".specflow/specs/SPEC-1.md", ".specflow/STATE.md",
                    ".specflow/execution/SPEC-1-state.json"):
        folder, name = (root / written).parent, (root / written).name
        (folder / f".{name}.k1lled00.tmp").write_text("half a write")
    resumed = agentrun("run", "SPEC-1", *scripted("--resume", "--allow-dirty"), cwd=root)
    assert resumed.returncode == 0, resumed.stderr
    result = resumed.json
    assert result["status"] == "complete" and result["resumed_from"] == dead
    # every group merged exactly once, and its file is on the branch
    subjects = merges(root, base)
    for gid, _, path in FIVE:
        assert sum(f" {gid}:" in s for s in subjects) == 1, subjects
        assert (root / path).read_text() == f"# {gid}\n"
        for sha in result["groups"][gid]["commits"]:
            run_git(root, "merge-base", "--is-ancestor", sha, "HEAD")
    # nothing of the dead run is left: no worktree, no branch
    worktrees, branches = leftovers(root)
    assert worktrees.count("worktree ") == 1 and branches == ""
    assert not any((root / ".specflow/runs" / dead / "worktrees").glob("*"))
    assert run_git(root, "status", "--porcelain") == ""
    # the dead run's slow workers finished on their own: adopted, not redone
    adopted = {e["batch"] for e in _run_events(result) if e["type"] == "adopted"}
    assert adopted == set(slow)
    started = {e["batch"] for e in _run_events(result) if e["type"] == "worker_start"}
    assert not started & adopted
    if lost:
        group = result["groups"][lost]
        assert group["status"] == "complete" and len(group["commits"]) == 1
        assert any("result was saved" in d and dead in d for d in group["deviations"])


def _run_events(result: dict) -> list[dict]:
    path = Path(result["run_dir"]) / "events.ndjson"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_run_killed_during_its_review_is_not_finished_and_resume_reviews_it(tmp_path):
    """The review is part of the run: until its verdict no state says complete; killed during
    it, the run stays unfinished, and `--resume` (past the spec's `review` status) reviews
    it again without redoing the merged work."""
    from test_review_cli import met, review_turn

    approve = {**review_turn([met(1, "src/a.py:1"), met(2, "git diff --stat")]),
               "latency_s": 0.5}
    script = {"groups": {"G1": writes("src/a.py", "# G1\n")},
              "agents": {"code-reviewer": [approve]}}
    root = make_project(tmp_path / "p", "SPEC-1", spec_text("SPEC-1", FIVE[:1]), script)
    state_file = root / ".specflow/execution/SPEC-1-state.json"
    proc = subprocess.Popen([str(ENTRY_POINT), "run", "SPEC-1", *scripted(review=True)],
                            cwd=root, env=cli_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: any(e["type"] == "review_start" for e in events(root)))
        during = json.loads(state_file.read_text())
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert not any(e["type"] == "review_done" for e in events(root))  # killed mid-review
    after = json.loads(state_file.read_text())
    for state in (during, after):
        assert state["status"] == "reviewing" and state["finished"] is None, state
    assert "status: review" in (root / ".specflow/specs/SPEC-1.md").read_text()
    merged = run_git(root, "rev-parse", "HEAD")

    resumed = agentrun("run", "SPEC-1", *scripted("--resume", review=True), cwd=root)
    assert resumed.returncode == 0, resumed.stderr
    doc = resumed.json
    assert doc["status"] == "complete" and doc["review"]["result"] == "APPROVED"
    assert not any(e["type"] == "worker_start" for e in _run_events(doc))
    assert merges(root, merged) == []  # G1's merge stands; nothing merged again
    assert "status: done" in (root / ".specflow/specs/SPEC-1.md").read_text()


def test_agentrun_review_concludes_a_run_stopped_during_its_review(tmp_path):
    """`agentrun review` of such a run decides it as the run's own review would have."""
    from agentrun.project import Project
    from agentrun.report.execution_state import GroupState, RunState, load_state, save_state
    from agentrun.review.reviewer import SpecReview
    from agentrun.review.verdict import ReviewResult
    from agentrun.run.review_step import conclude_review

    root = make_project(tmp_path / "p", "SPEC-1", spec_text("SPEC-1", FIVE[:1]), {})
    project = Project(root)
    path = project.execution_dir / "SPEC-1-state.json"
    state = RunState(run_id="20260101-000000-abcd", spec_id="SPEC-1", spec_path="s.md",
                     mode="single", base_commit="0" * 40, target_branch="main",
                     started="then", status="reviewing",
                     groups={"G1": GroupState(id="G1", status="complete")})
    save_state(path, state)
    verdict = SpecReview("SPEC-1", root / "s.md", state.run_id, ReviewResult.APPROVED, [],
                         version=2, model="scripted")
    assert conclude_review(project, "SPEC-1", SpecReview(
        "SPEC-1", root / "s.md", "another-run", ReviewResult.APPROVED, [])) is None
    assert load_state(path).status == "reviewing"
    done = conclude_review(project, "SPEC-1", verdict)
    assert done is not None and done.status == "complete" and done.finished
    assert load_state(path).reviews[-1].version == 2
    record = json.loads((project.runs_dir / state.run_id / "result.json").read_text())
    assert record["status"] == "complete" and record["review"]["result"] == "APPROVED"
    assert conclude_review(project, "SPEC-1", verdict) is None  # finished: nothing waits
