"""Landing a wave's branches in group order on real git repositories."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from gitutil import head, run_git, status
from runkit import make_project, spec_text

from agentrun import gitcli, worktrees
from agentrun.core.events import BaseEvent, KeptWorktreeEvent, WarningEvent
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


class GitCalls:
    """The git subcommands started through agentrun's runner, as `sub args...` strings."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.seen: list[str] = []
        spawn = gitcli.spawn_git

        def counting(argv, cwd, env, stdin):
            self.seen.append(" ".join(argv[gitcli.subcommand_at(argv):]))
            return spawn(argv, cwd, env, stdin)

        monkeypatch.setattr(gitcli, "spawn_git", counting)

    def count(self, prefix: str) -> int:
        return sum(1 for call in self.seen if call.startswith(prefix))


def three_landed(t: Landing) -> tuple[WaveLanding, dict[str, WorkerResult]]:
    t.state.groups.clear()
    results = {g: t.work(g, {f"{g}.txt": g}) for g in ("G1", "G2", "G3")}
    landing = WaveLanding(t.lander, [Batch(g, [g]) for g in results])
    landing.land_ready(results)
    assert landed_ids(landing.finish(results)) == ["G1", "G2", "G3"]
    return landing, results


def branches(t: Landing) -> str:
    return run_git(t.root, "branch", "--list", f"agentrun/{SPEC_ID}/*")


def test_worktrees_removed_together_cost_git_one_listing_and_one_branch_deletion(
        tmp_path, monkeypatch):
    t = Landing(tmp_path)
    landing, _ = three_landed(t)
    calls = GitCalls(monkeypatch)
    landing.clean_up()
    t.lander.settle()
    assert not any((t.worktrees / g).exists() for g in ("G1", "G2", "G3"))
    assert not list(t.worktrees.iterdir())  # no folder left aside either
    assert branches(t) == ""
    assert all(t.state.groups[g].worktree is None for g in ("G1", "G2", "G3"))
    assert run_git(t.root, "worktree", "list", "--porcelain").count("worktree ") == 1
    # each worktree is forgotten by name; the listing and the branches' deletion are shared
    assert calls.count("worktree remove") == 3
    assert calls.count("worktree list") == 1
    assert calls.count("branch -D") == 1
    assert [e.type for e in t.events] == ["merged"] * 3


def test_a_branch_git_refuses_to_delete_fails_only_its_own_removal(tmp_path):
    t = Landing(tmp_path)
    landing, _ = three_landed(t)
    # another git process holds G2's branch meanwhile: git cannot delete it
    lock = t.root / ".git" / "refs" / "heads" / f"agentrun/{SPEC_ID}/r1/G2.lock"
    lock.write_text("")
    landing.clean_up()
    t.lander.settle()
    lock.unlink()
    assert branches(t).split() == [f"agentrun/{SPEC_ID}/r1/G2"]  # the others are gone
    assert t.state.groups["G1"].worktree is None and t.state.groups["G3"].worktree is None
    assert t.state.groups["G2"].worktree == str(t.worktrees / "G2")  # the state says so
    warnings = [e for e in t.events if isinstance(e, WarningEvent)]
    assert len(warnings) == 1 and str(t.worktrees / "G2") in warnings[0].message


def test_a_folder_that_cannot_be_deleted_is_a_warning_for_its_worktree_alone(
        tmp_path, monkeypatch):
    t = Landing(tmp_path)
    landing, _ = three_landed(t)
    delete = worktrees._delete_tree
    tried: list[Path] = []

    def stubborn(path: Path) -> None:
        tried.append(path)
        if ".G3" in path.name:
            raise PermissionError(13, "Permission denied", str(path))
        delete(path)

    monkeypatch.setattr(worktrees, "_delete_tree", stubborn)
    landing.clean_up()
    t.lander.settle()
    assert len(tried) == 3  # the control: every folder's deletion was tried
    warnings = [e.message for e in t.events if isinstance(e, WarningEvent)]
    assert len(warnings) == 1 and "G3" in warnings[0] and "Permission denied" in warnings[0]
    # git has forgotten G3's worktree all the same; its folder waits aside for the next sweep
    assert all(t.state.groups[g].worktree is None for g in ("G1", "G2", "G3"))
    assert [p.name for p in t.worktrees.iterdir()] == [tried[-1].name] == [
        p.name for p in tried if ".G3" in p.name]
    assert branches(t) == ""


def test_the_run_reports_while_the_removed_folders_are_deleted(tmp_path, monkeypatch):
    t = Landing(tmp_path)
    landing, _ = three_landed(t)
    delete, release = worktrees._delete_tree, threading.Event()

    def slow(path: Path) -> None:
        release.wait(30)
        delete(path)

    monkeypatch.setattr(worktrees, "_delete_tree", slow)
    landing.clean_up()
    t.lander.settle(folders=False)  # git's part only
    asides = sorted(p.name for p in t.worktrees.iterdir())
    assert len(asides) == 3 and all(".removing-" in a for a in asides)  # still there
    assert all(t.state.groups[g].worktree is None for g in ("G1", "G2", "G3"))
    assert run_git(t.root, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert branches(t) == ""
    release.set()
    t.lander.settle_folders()
    assert not list(t.worktrees.iterdir())
    assert not any(isinstance(e, WarningEvent) for e in t.events)


def test_a_removal_that_breaks_unexpectedly_is_a_warning_not_a_hang(tmp_path, monkeypatch):
    t = Landing(tmp_path)
    landing, _ = three_landed(t)
    broken: list[int] = []

    def breaks(root, wts, **_):
        broken.append(len(wts))
        raise RuntimeError("unexpected")

    monkeypatch.setattr(worktrees, "detach_worktrees", breaks)
    landing.clean_up()
    settled = threading.Thread(target=t.lander.settle, daemon=True)
    settled.start()
    settled.join(timeout=30)
    assert broken == [3]  # the control: the removal did break
    assert not settled.is_alive()
    warnings = [e.message for e in t.events if isinstance(e, WarningEvent)]
    assert len(warnings) == 3 and all("unexpected" in w for w in warnings)
    assert all((t.worktrees / g).exists() for g in ("G1", "G2", "G3"))
