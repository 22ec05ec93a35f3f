"""Landing a wave's branches in group order on real git repositories."""

from __future__ import annotations

import threading
from pathlib import Path

from gitutil import head, run_git, status
from runkit import make_project, spec_text

from agentrun.core.events import BaseEvent, KeptWorktreeEvent
from agentrun.core.results import WorkerResult
from agentrun.core.status import Status
from agentrun.plan import Batch
from agentrun.project import Project
from agentrun.report.execution_state import GroupState, RunState
from agentrun.run.land import Lander, WaveLanding
from agentrun.run.record import Recorder
from agentrun.spec.parse import load_spec

SPEC_ID = "SPEC-L"


class Landing:
    """A project whose groups G1, G2 each have a worktree and a branch from the same base."""

    def __init__(self, tmp_path: Path) -> None:
        self.root = make_project(tmp_path / "repo", SPEC_ID, spec_text(
            SPEC_ID, [("G1", [], "a.txt"), ("G2", [], "b.txt")]), {"turns": []},
            files={"shared.txt": "base\n"})
        self.base = head(self.root)
        self.worktrees = tmp_path / "worktrees"
        self.events: list[BaseEvent] = []
        spec = load_spec(self.root / ".specflow" / "specs" / f"{SPEC_ID}.md")
        self.state = RunState(run_id="r1", spec_id=SPEC_ID, spec_path="s.md",
                              mode="orchestrated", base_commit=self.base,
                              target_branch="main", started="now")
        record = Recorder(Project(self.root), spec, "orchestrated", "r1", tmp_path / "run",
                          tmp_path / "state.json", self.events.append)
        record.state = self.state
        self.lander = Lander(self.root, SPEC_ID, self.state, record, threading.Event())

    def work(self, gid: str, files: dict[str, str]) -> WorkerResult:
        """A worker's finished branch for `gid` committing `files`; its group as verified."""
        branch, wt = f"agentrun/{SPEC_ID}/r1/{gid}", self.worktrees / gid
        run_git(self.root, "worktree", "add", "-q", "-b", branch, str(wt), self.base)
        for rel, text in files.items():
            (wt / rel).write_text(text)
        run_git(wt, "add", "-A")
        run_git(wt, "commit", "-q", "-m", f"{gid} work")
        commits = [head(wt)]
        self.state.groups[gid] = GroupState(id=gid, title=f"title {gid}", batch=gid,
                                            status=Status.COMPLETE, commits=commits,
                                            branch=branch, worktree=str(wt))
        return WorkerResult(group=gid, groups=[gid], status=Status.COMPLETE, commits=commits,
                            branch=branch, batch=gid)

    def merges(self) -> list[str]:
        """Merge commit subjects on the target branch, oldest first."""
        return run_git(self.root, "log", "--merges", "--reverse", "--format=%s").splitlines()


def test_branches_land_in_group_order_whatever_order_they_finish(tmp_path):
    t = Landing(tmp_path)
    results = {"G2": t.work("G2", {"b.txt": "two\n"})}
    landing = WaveLanding(t.lander, [Batch("G1", ["G1"]), Batch("G2", ["G2"])])
    landing.land_ready(results)
    assert t.merges() == []  # G2 waits for G1, which comes first
    results["G1"] = t.work("G1", {"a.txt": "one\n"})
    landing.land_ready(results)
    assert t.merges() == [f"Merge {SPEC_ID} G1: title G1", f"Merge {SPEC_ID} G2: title G2"]
    assert (t.root / "a.txt").read_text() == "one\n"
    assert (t.root / "b.txt").read_text() == "two\n"
    assert [b.id for b in landing.finish(results)] == ["G1", "G2"]
    assert all(t.state.groups[g].merge_commit for g in ("G1", "G2"))
    assert [e.type for e in t.events] == ["merged", "merged"]


def test_a_conflicting_branch_fails_its_group_and_leaves_the_target_clean(tmp_path):
    t = Landing(tmp_path)
    results = {"G1": t.work("G1", {"shared.txt": "one\n"}),
               "G2": t.work("G2", {"shared.txt": "two\n"})}
    landing = WaveLanding(t.lander, [Batch("G1", ["G1"]), Batch("G2", ["G2"])])
    landing.land_ready(results)
    after_g1 = head(t.root)
    assert landed_ids(landing.finish(results)) == ["G1"]
    landing.clean_up()
    assert head(t.root) == after_g1
    assert (t.root / "shared.txt").read_text() == "one\n"
    assert status(t.root) == ""
    assert not (t.root / ".git" / "MERGE_HEAD").exists()
    g2 = t.state.groups["G2"]
    assert g2.status == Status.FAILED
    assert g2.error == "merge conflict in shared.txt"
    assert [e.type for e in t.events] == ["merged", "merge_conflict", "kept_worktree"]


def test_a_landed_worktree_is_removed_and_a_failed_one_kept(tmp_path):
    t = Landing(tmp_path)
    ok = t.work("G1", {"a.txt": "one\n"})
    bad = t.work("G2", {"b.txt": "half\n"})
    bad.status = Status.FAILED
    t.state.groups["G2"].status = Status.FAILED
    landing = WaveLanding(t.lander, [Batch("G1", ["G1"]), Batch("G2", ["G2"])])
    landing.land_ready({"G1": ok, "G2": bad})
    assert (t.worktrees / "G1").exists()  # until the wave is over and checked
    landing.finish({"G1": ok, "G2": bad})
    landing.clean_up()  # in the background: the run goes on
    t.lander.settle()
    assert not (t.worktrees / "G1").exists()
    assert t.state.groups["G1"].worktree is None
    assert run_git(t.root, "branch", "--list", f"agentrun/{SPEC_ID}/r1/G1") == ""
    assert (t.worktrees / "G2" / "b.txt").read_text() == "half\n"
    assert t.state.groups["G2"].worktree == str(t.worktrees / "G2")
    assert not (t.root / "b.txt").exists()  # failed work is not merged
    kept = t.events[-1]
    assert isinstance(kept, KeptWorktreeEvent) and kept.batch == "G2"
    assert kept.branch == f"agentrun/{SPEC_ID}/r1/G2"


def test_without_a_check_of_the_wave_a_worktree_goes_as_its_work_lands(tmp_path):
    t = Landing(tmp_path)
    first, second = t.work("G1", {"a.txt": "one\n"}), t.work("G2", {"b.txt": "two\n"})
    landing = WaveLanding(t.lander, [Batch("G1", ["G1"]), Batch("G2", ["G2"])],
                          remove_early=True)
    landing.land_ready({"G1": first})  # G2's worker still runs
    assert "G1" in t.lander.removing and "G2" not in t.lander.removing
    t.lander.settle()
    assert not (t.worktrees / "G1").exists() and t.state.groups["G1"].worktree is None
    assert run_git(t.root, "branch", "--list", f"agentrun/{SPEC_ID}/r1/G1") == ""
    assert (t.worktrees / "G2" / "b.txt").read_text() == "two\n"
    landing.land_ready({"G1": first, "G2": second})
    landing.finish({"G1": first, "G2": second})
    landing.clean_up()
    t.lander.settle()
    assert not (t.worktrees / "G2").exists() and (t.root / "b.txt").read_text() == "two\n"
    assert [e.type for e in t.events] == ["merged", "merged"]


def landed_ids(batches: list[Batch]) -> list[str]:
    return [b.id for b in batches]
