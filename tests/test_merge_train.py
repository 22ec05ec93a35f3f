"""Batches that may land together land as a merge train (agentrun/merging.py, `merge_train`):
the history one-by-one merges make — a merge commit per batch, in order, each from its
verified commit — with the checkout moved once. The train only runs in the plain case and hands
anything else to the one-by-one merge: a conflict, a file of the user's in the way, a change
of the user's the move would overwrite, anything staged, a git operation in progress."""

from __future__ import annotations

from pathlib import Path

import pytest
from gitutil import commit_files, head, run_git
from test_run_target import Repo

from agentrun import gitcli, merging
from agentrun.core.results import WorkerResult
from agentrun.core.status import Status
from agentrun.plan import Batch
from agentrun.run.land import WaveLanding

GIDS = ("G1", "G2", "G3")


def _history(root: Path, base: str) -> list[tuple[str, str, str, str]]:
    """Each merge since `base`, first parent first: its message, tree, and both parents'
    trees (commit ids differ by their dates; what they hold must not)."""
    out = run_git(root, "log", "--first-parent", "--format=%H", f"{base}..HEAD").split()
    return [(run_git(root, "log", "-1", "--format=%B", c).strip(),
             run_git(root, "rev-parse", f"{c}^{{tree}}"),
             run_git(root, "rev-parse", f"{c}^1^{{tree}}"),
             run_git(root, "rev-parse", f"{c}^2^{{tree}}")) for c in reversed(out)]


def _landing(t: Repo, gids: tuple[str, ...] = GIDS) -> tuple[WaveLanding, dict]:
    results = {g: t.work(g) for g in gids}
    for g in gids:
        t.state.groups[g].title = f"{g}'s title"
    return WaveLanding(t.lander, [Batch(id=g, groups=[g]) for g in gids]), results


@pytest.fixture
def merges(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The `git merge` processes started (the one-by-one way)."""
    started: list[str] = []
    spawn = gitcli.spawn_git

    def counting(argv, cwd, env, stdin):
        if argv[gitcli.subcommand_at(argv):][:1] == ["merge"]:
            started.append(" ".join(argv))
        return spawn(argv, cwd, env, stdin)

    monkeypatch.setattr(gitcli, "spawn_git", counting)
    return started


def test_a_train_makes_the_history_one_by_one_merges_make(tmp_path, merges):
    t = Repo(tmp_path / "train")
    landing, results = _landing(t)
    (t.root / "mine.txt").write_text("the user's untracked file\n")
    (t.root / "README.md").write_text("the user's change, not committed\n")
    landing.land_ready(results)
    assert [b.id for b in landing.landed] == list(GIDS) and merges == []  # no `git merge`

    one = Repo(tmp_path / "one")  # the control: the same work, merged one by one
    one_landing, one_results = _landing(one)
    for g in GIDS:
        one_landing.land_ready({g: one_results[g]})  # each alone: no train
    assert len(merges) == 3
    assert _history(t.root, t.base) == _history(one.root, one.base)
    assert [t.state.groups[g].merge_commit for g in GIDS] == \
        run_git(t.root, "log", "--first-parent", "--format=%H", f"{t.base}..HEAD").split()[::-1]
    assert t.state.target_head == head(t.root)
    assert run_git(t.root, "rev-parse", "ORIG_HEAD") == run_git(t.root, "rev-parse", "HEAD~1")
    assert (t.root / "mine.txt").read_text() == "the user's untracked file\n"
    assert (t.root / "README.md").read_text() == "the user's change, not committed\n"
    assert run_git(t.root, "status", "--porcelain") == " M README.md\n?? mine.txt"


def test_a_train_merges_the_verified_commit_not_a_later_one(tmp_path, merges):
    t = Repo(tmp_path)
    landing, results = _landing(t)
    commit_files(tmp_path / "G2", {"late.txt": "after the check\n"}, "late")
    landing.land_ready(results)
    assert merges == [] and not (t.root / "late.txt").exists()
    assert run_git(t.root, "rev-parse", "HEAD~1^2") == results["G2"].commits[-1]


def _conflicting(t: Repo, gid: str) -> None:
    """Make `gid`'s branch also write G1's file, otherwise."""
    commit_files(t.root.parent / gid, {"G1.txt": f"{gid} says otherwise\n"}, f"{gid} clash")
    t.state.groups[gid].commits = run_git(t.root, "rev-list", "--reverse",
                                          f"{t.base}..{t.state.groups[gid].branch}").split()


def test_a_conflict_stops_the_train_and_fails_only_its_batch(tmp_path, merges):
    t = Repo(tmp_path)
    gids = ("G1", "G2", "G3", "G4")
    landing, results = _landing(t, gids)
    _conflicting(t, "G3")
    results["G3"] = results["G3"].model_copy(update={"commits": t.state.groups["G3"].commits})
    landing.land_ready(results)
    assert [b.id for b in landing.landed] == ["G1", "G2", "G4"]
    assert t.state.groups["G3"].status == Status.FAILED
    assert "G1.txt" in (t.state.groups["G3"].error or "")
    assert len(merges) == 3  # G3's merge (and its abort) and G4's went one by one
    assert (t.root / "G1.txt").read_text() == "G1" and (t.root / "G4.txt").exists()
    assert run_git(t.root, "status", "--porcelain") == ""


@pytest.mark.parametrize("case", ["untracked in the way", "ignored in the way",
                                  "user's change in the way", "something staged",
                                  "a merge in progress"])
def test_anything_but_the_plain_case_lands_one_by_one(tmp_path, merges, case):
    t = Repo(tmp_path)
    landing, results = _landing(t)
    if case in ("untracked in the way", "ignored in the way"):
        (t.root / "G2.txt").write_text("the user's own\n")
        if case == "ignored in the way":
            with (t.root / ".git" / "info" / "exclude").open("a") as fh:
                fh.write("G2.txt\n")
    elif case == "user's change in the way":  # a file G2 changes, changed by the user
        commit_files(t.root, {"shared.txt": "base\n"}, "shared")
        t.state.target_head = head(t.root)
        commit_files(tmp_path / "G2", {"shared.txt": "G2's\n"}, "G2 shared")
        results["G2"] = results["G2"].model_copy(update={"commits": run_git(
            t.root, "rev-list", "--reverse", f"{t.base}..{results['G2'].branch}").split()})
        (t.root / "shared.txt").write_text("the user's, not committed\n")
    elif case == "something staged":
        (t.root / "staged.txt").write_text("staged\n")
        run_git(t.root, "add", "staged.txt")
    else:
        (t.root / ".git" / "MERGE_HEAD").write_text(t.base + "\n")
    before = head(t.root)
    assert merging.merge_train(t.root, [
        merging.Landing(r.branch or "", r.commits[-1], f"m {g}") for g, r in results.items()],
        before) == []
    assert head(t.root) == before and merges == []  # the train moved nothing
    landing.land_ready(results)
    # the one-by-one way took them all, and said what it refused (a file in the way before
    # `git merge` runs)
    in_the_way = case in ("untracked in the way", "ignored in the way")
    assert len(merges) == (2 if in_the_way else 3)
    landed = [b.id for b in landing.landed]
    if in_the_way or case == "user's change in the way":
        assert landed == ["G1", "G3"] and t.state.groups["G2"].status == Status.FAILED
    else:  # git refuses every merge there, and says why
        assert landed == [] and all("merge failed" in (t.state.groups[g].error or "")
                                    for g in GIDS)
    if in_the_way:
        assert (t.root / "G2.txt").read_text() == "the user's own\n"
    if case == "a merge in progress":  # the user's, never aborted by a merge that failed
        assert (t.root / ".git" / "MERGE_HEAD").read_text() == t.base + "\n"
    if case == "user's change in the way":
        assert (t.root / "shared.txt").read_text() == "the user's, not committed\n"


def test_a_train_needs_two_batches_that_merge(tmp_path, merges):
    t = Repo(tmp_path)
    landing, results = _landing(t, ("G1", "G2"))
    results["G1"] = WorkerResult(group="G1", groups=["G1"], status=Status.FAILED, commits=[],
                                 branch=results["G1"].branch, batch="G1")
    t.state.groups["G1"].status = Status.FAILED
    landing.land_ready(results)
    assert [b.id for b in landing.landed] == ["G2"] and len(merges) == 1


def test_work_merged_already_is_not_merged_again(tmp_path, merges):
    t = Repo(tmp_path)
    landing, results = _landing(t)
    assert merging.merge_branch(t.root, results["G2"].branch or "", "G2 by hand").ok
    t.state.target_head = head(t.root)
    landing.land_ready(results)
    assert [b.id for b in landing.landed] == list(GIDS)
    subjects = run_git(t.root, "log", "--merges", "--format=%s", f"{t.base}..HEAD").splitlines()
    # no empty merge commit for G2: `git merge` found it merged, as one by one it would
    assert subjects == ["Merge SPEC-T G3: G3's title", "Merge SPEC-T G1: G1's title",
                        "G2 by hand"]
    assert t.state.groups["G2"].merge_commit is None


def test_a_commit_of_the_users_during_the_train_leaves_everything_to_the_one_by_one_way(
        tmp_path):
    t = Repo(tmp_path)
    _, results = _landing(t)
    landings = [merging.Landing(r.branch or "", r.commits[-1], f"m {g}")
                for g, r in results.items()]
    seen = head(t.root)  # what the target check saw
    mine = commit_files(t.root, {"mine.txt": "mine\n"}, "the user's commit, meanwhile")
    assert merging.merge_train(t.root, landings, seen) == []
    assert head(t.root) == mine and run_git(t.root, "status", "--porcelain") == ""
    assert not (t.root / "G1.txt").exists()  # the checkout did not move either
    # the control: seen as it is now, the train lands all three on the user's commit
    assert len(merging.merge_train(t.root, landings, mine)) == 3
    assert run_git(t.root, "merge-base", "--is-ancestor", mine, "HEAD") == ""
