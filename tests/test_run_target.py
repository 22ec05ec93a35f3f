"""A run lands only on the branch it started on. The user switching branches (or detaching
HEAD, or resetting the branch) between waves stops the landing — nothing is merged or committed
elsewhere, the run is not complete (exit 1) — and `--resume` back on the branch merges the
finished work instead of redoing it. Commits the user adds on top of the run's branch are
kept."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from clirun import agentrun, finish, start
from gitutil import commit_files, head, init_repo, run_git
from runkit import make_project, scripted, spec_text, writes

from agentrun.core.events import BaseEvent
from agentrun.core.results import WorkerResult
from agentrun.core.status import Status, StopReason
from agentrun.project import Project
from agentrun.report.execution_state import GroupState, RunState
from agentrun.run.integration import undo_wave
from agentrun.run.land import Lander
from agentrun.run.record import Recorder
from agentrun.run.target import Target
from agentrun.spec.parse import parse_spec

WAVES = [("G1", [], "one.txt"), ("G2", ["G1"], "two.txt"), ("G3", ["G1"], "three.txt")]


def events(root: Path) -> list[dict]:
    found = sorted((root / ".specflow/runs").glob("*/events.ndjson"))
    if not found:
        return []
    lines = found[-1].read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip().endswith("}")]


def wait_for(predicate, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def test_switching_branches_between_waves_stops_the_landing_and_resume_lands_it(tmp_path):
    """G1 merges; the user switches while G2 and G3 work; neither lands. Back on `main`,
    with G3's task edited meanwhile, `--resume` merges G2's finished branch and runs G3
    again: only what is still the same task is reused."""
    script = {"groups": {"G1": writes("one.txt", "1\n"),
                         "G2": writes("two.txt", "2\n", latency=1.0),
                         "G3": writes("three.txt", "3\n")}}  # lands after G2, in group order
    root = make_project(tmp_path / "p", "SPEC-1", spec_text("SPEC-1", WAVES), script)
    base = head(root)
    run_git(root, "branch", "other")
    proc = start("run", "SPEC-1", *scripted(), cwd=root)
    # G1 merged, G2's worker running (its model answers after 1 s): the user switches
    wait_for(lambda: any(e["type"] == "worker_start" and e["batch"] == "G2"
                         for e in events(root)))
    run_git(root, "switch", "-q", "other")
    assert proc.poll() is None  # the switch happened while the run was running
    stopped = finish(proc)
    assert stopped.returncode == 1, stopped.stderr
    doc = json.loads(stopped.stdout)
    assert doc["status"] == "partial" and doc["stop_reason"] == "target_moved"
    message = "the run merges into main, but other is checked out now"
    assert message in stopped.stderr and "git switch main" in stopped.stderr
    kinds = [e["type"] for e in events(root)]
    assert kinds.index("merged") < kinds.index("target_moved")  # G1 landed before the switch
    for gid in ("G2", "G3"):
        group = doc["groups"][gid]
        assert group["status"] == "interrupted" and group["stop_reason"] == "target_moved"
        assert run_git(root, "rev-parse", "--verify", group["branch"])  # its work is kept
    # nothing landed on `other`; `main` holds G1's merge and nothing after it
    assert head(root) == base and run_git(root, "rev-parse", "other") == base
    main_log = run_git(root, "log", "--first-parent", "--format=%s", f"{base}..main")
    assert main_log.splitlines() == ["Merge SPEC-1 G1: Create `one.txt`"]

    wrong = agentrun("run", "SPEC-1", *scripted("--resume"), cwd=root)
    assert wrong.returncode == 3, wrong.stderr
    assert "merged into main, but other is checked out" in wrong.stderr
    assert run_git(root, "rev-parse", "other") == base  # not even agentrun's own files
    run_git(root, "switch", "-q", "main")
    spec = root / ".specflow/specs/SPEC-1.md"
    spec.write_text(spec.read_text().replace("Create `three.txt`", "Create `three.txt` (3)"))
    resumed = agentrun("run", "SPEC-1", *scripted("--resume"), cwd=root)
    assert resumed.returncode == 0, resumed.stderr
    run_events = [json.loads(line) for line in
                  (Path(resumed.json["run_dir"]) / "events.ndjson").read_text().splitlines()]
    assert [e["batch"] for e in run_events if e["type"] == "adopted"] == ["G2"]
    assert [e["batch"] for e in run_events if e["type"] == "worker_start"] == ["G3"]
    assert any("the task of G3 changed since run" in w for w in resumed.json["warnings"])
    assert (root / "two.txt").read_text() == "2\n" and (root / "three.txt").exists()
    assert run_git(root, "rev-parse", "other") == base


class Repo:
    """A run's target branch `main` with a worker branch for G1 and one for G2."""

    def __init__(self, tmp_path: Path) -> None:
        self.root = init_repo(tmp_path / "r")
        self.base = head(self.root)
        self.events: list[BaseEvent] = []
        self.state = RunState(run_id="r1", spec_id="SPEC-T", spec_path="s.md",
                              mode="orchestrated", base_commit=self.base,
                              target_branch="main", started="now", target_head=self.base)
        spec = parse_spec("---\nid: SPEC-T\n---\n# T\n", self.root / "s.md")
        record = Recorder(Project(self.root), spec, "orchestrated", "r1", tmp_path / "run",
                          tmp_path / "state.json", self.events.append)
        record.state = self.state
        self.target = Target(self.root, self.state, record)
        self.lander = Lander(self.root, "SPEC-T", self.state, record, threading.Event(),
                             self.target)

    def work(self, gid: str) -> WorkerResult:
        branch = f"agentrun/SPEC-T/r1/{gid}"
        run_git(self.root, "branch", branch, self.base)
        wt = self.root.parent / gid
        run_git(self.root, "worktree", "add", "-q", str(wt), branch)
        commit = commit_files(wt, {f"{gid}.txt": gid}, f"{gid} work")
        self.state.groups[gid] = GroupState(id=gid, status=Status.COMPLETE, commits=[commit],
                                            branch=branch)
        return WorkerResult(group=gid, groups=[gid], status=Status.COMPLETE, commits=[commit],
                            branch=branch, batch=gid)


def test_the_users_commits_on_the_branch_are_kept_a_reset_or_detached_head_stops(tmp_path):
    t = Repo(tmp_path)
    g1, g2 = t.work("G1"), t.work("G2")
    mine = commit_files(t.root, {"mine.txt": "mine\n"}, "my own work")  # before any merge
    assert t.lander.merge("G1", g1)
    assert run_git(t.root, "merge-base", "--is-ancestor", mine, "HEAD") == ""
    assert any("1 commit(s) not made by this run landed on main" in w and "my own work" in w
               for w in t.state.warnings)
    merged = head(t.root)
    # an integration failure now must not reset the user's commit away with the wave
    restored, note = undo_wave(t.root, "main", t.base, merged, {merged})
    assert not restored and "moved on" in note and head(t.root) == merged
    run_git(t.root, "reset", "-q", "--hard", mine)  # the user drops the run's merge
    assert not t.lander.merge("G2", g2)
    assert t.state.stop_reason == StopReason.TARGET_MOVED
    assert "main no longer holds" in t.state.warnings[-1]
    assert t.state.groups["G2"].status == Status.INTERRUPTED and head(t.root) == mine

    t.state.stop_reason = None
    t.target.left_at()
    run_git(t.root, "checkout", "-q", "--detach")
    assert "HEAD is detached at" in (t.target.problem() or "")
    assert not t.lander.merge("G2", g2) and head(t.root) == mine
