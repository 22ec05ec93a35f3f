"""Snapshots roll a worktree back to exactly the state an attempt started from."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest
from gitutil import (
    branch_of,
    commit_files,
    head,
    init_repo,
    isolate_git_config,
    run_git,
    status,
    tree_files,
    write_files,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentrun.agent.snapshots import (
    Snapshot,
    restore_snapshot,
    snapshot_and_index,
    take_snapshot,
)
from agentrun.worktrees import create_worktree, index_path, populate_worktree

IGNORED = ("build.log", "build/out.bin", "new.log")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_git_config(monkeypatch, tmp_path)


def _project(path: Path) -> Path:
    repo = init_repo(path, {
        "README.md": "# readme v1\n", "src/app.py": "x = 1\n", "src/util.py": "u = 1\n",
        "run.sh": "#!/bin/sh\necho hi\n", ".gitignore": "*.log\nbuild/\n",
        "bin/blob": bytes(range(256)),
    })
    (repo / "run.sh").chmod(0o755)
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-q", "-m", "exec bit")
    return repo


@pytest.fixture(params=["main worktree", "linked worktree"])
def worktree(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    repo = _project(tmp_path / "repo")
    if request.param == "main worktree":
        return repo
    return create_worktree(repo, tmp_path / "wt", "agentrun/g1", "main").path


def _state(root: Path) -> dict:
    """Everything a restore must bring back, with ignored files reported apart."""
    files = tree_files(root)
    modes = {rel: stat.S_IMODE(os.lstat(root / rel).st_mode) for rel in files}
    return {
        "files": {k: v for k, v in files.items() if k not in IGNORED},
        "modes": {k: v for k, v in modes.items() if k not in IGNORED},
        "ignored": {k: v for k, v in files.items() if k in IGNORED},
        "head": head(root), "branch": branch_of(root), "status": status(root),
        "index": run_git(root, "ls-files", "--stage"),
    }


def _index_file(root: Path) -> Path:
    return root / run_git(root, "rev-parse", "--git-path", "index")


def test_restore_undoes_edits_new_files_deletions_and_commits(worktree: Path) -> None:
    # The state the attempt starts from is itself untidy: staged, unstaged and untracked work.
    write_files(worktree, {"README.md": "# readme v2 (staged)\n", "notes.txt": "untracked\n",
                           "build.log": "ignored before\n", "build/out.bin": b"\x00\x01"})
    run_git(worktree, "add", "README.md")
    write_files(worktree, {"README.md": "# readme v3 (unstaged on top)\n",
                           "src/util.py": "u = 2  # unstaged\n"})
    before = _state(worktree)
    index_bytes = _index_file(worktree).read_bytes()

    snap = take_snapshot(worktree)
    assert snap.head == before["head"] and snap.branch == f"refs/heads/{before['branch']}"
    assert _index_file(worktree).read_bytes() == index_bytes  # real index untouched
    assert _state(worktree) == before

    # A failed attempt: edits, new files, deletions, a mode change, commits, ignored output.
    write_files(worktree, {"src/app.py": "x = 'broken'\n", "new.txt": "new\n",
                           "newdir/deep/x.txt": "x\n", "bin/blob": b"changed"})
    (worktree / "src" / "util.py").unlink()
    (worktree / "notes.txt").unlink()
    (worktree / "run.sh").chmod(0o644)
    run_git(worktree, "add", "-A")
    run_git(worktree, "commit", "-q", "-m", "attempt 1, part 1")
    write_files(worktree, {"after.txt": "after the commit\n", "README.md": "clobbered\n",
                           "new.log": "ignored, new\n", "build.log": "ignored, rewritten\n"})
    run_git(worktree, "add", "after.txt")
    assert head(worktree) != before["head"]

    restore_snapshot(worktree, snap)

    after = _state(worktree)
    assert after["files"] == before["files"]
    assert after["modes"] == before["modes"]
    assert after["head"] == before["head"] and after["branch"] == before["branch"]
    assert after["index"] == before["index"]
    assert after["status"] == before["status"]
    assert after["ignored"] == {"build.log": b"ignored, rewritten\n", "build/out.bin": b"\x00\x01",
                                "new.log": b"ignored, new\n"}  # ignored files are not touched
    assert not (worktree / "newdir").exists()


def test_snapshot_of_a_clean_tree_is_head(worktree: Path) -> None:
    snap = take_snapshot(worktree)
    assert snap == Snapshot(tree=run_git(worktree, "rev-parse", "HEAD^{tree}"),
                            head=head(worktree), index=snap.tree,
                            branch=f"refs/heads/{branch_of(worktree)}")
    write_files(worktree, {"x.txt": "x\n"})
    restore_snapshot(worktree, snap)
    restore_snapshot(worktree, snap)  # idempotent
    assert status(worktree) == ""


def test_files_and_directories_swapping_places(worktree: Path) -> None:
    write_files(worktree, {"a/b.txt": "in a dir\n", "c": "a file\n"})
    (worktree / "link").symlink_to("src/app.py")
    before = _state(worktree)
    snap = take_snapshot(worktree)
    (worktree / "a" / "b.txt").unlink()
    (worktree / "a").rmdir()
    write_files(worktree, {"a": "now a file\n"})
    (worktree / "c").unlink()
    write_files(worktree, {"c/d.txt": "now a dir\n"})
    (worktree / "link").unlink()
    (worktree / "link").symlink_to("README.md")
    restore_snapshot(worktree, snap)
    assert _state(worktree) == before
    assert os.readlink(worktree / "link") == "src/app.py"


def test_deleting_gitignore_does_not_cost_ignored_files(worktree: Path) -> None:
    write_files(worktree, {"build.log": "keep me\n"})
    snap = take_snapshot(worktree)
    (worktree / ".gitignore").unlink()
    restore_snapshot(worktree, snap)
    assert (worktree / "build.log").read_text() == "keep me\n"
    assert (worktree / ".gitignore").read_text() == "*.log\nbuild/\n"
    assert status(worktree) == ""


def test_commits_on_another_branch_do_not_move_the_worker_back(worktree: Path) -> None:
    start = head(worktree)
    own = branch_of(worktree)
    snap = take_snapshot(worktree)
    commit_files(worktree, {"a.txt": "on my branch\n"})
    run_git(worktree, "checkout", "-q", "-b", "side")
    side = commit_files(worktree, {"b.txt": "on a side branch\n"})
    restore_snapshot(worktree, snap)
    assert branch_of(worktree) == own and head(worktree) == start
    assert run_git(worktree, "rev-parse", "side") == side  # other branches are left alone
    assert status(worktree) == "" and not (worktree / "a.txt").exists()


def test_detached_head_is_restored_detached(worktree: Path) -> None:
    run_git(worktree, "checkout", "-q", "--detach")
    start = head(worktree)
    snap = take_snapshot(worktree)
    assert snap.branch is None
    commit_files(worktree, {"a.txt": "a\n"})
    run_git(worktree, "checkout", "-q", "-b", "elsewhere")
    restore_snapshot(worktree, snap)
    assert branch_of(worktree) == "HEAD" and head(worktree) == start
    assert status(worktree) == ""


_PATHS = ["a.txt", "d/b.txt", "d/e/c.txt", "x.bin"]
_ops = st.lists(st.tuples(st.sampled_from(["write", "delete", "commit", "stage"]),
                          st.sampled_from(_PATHS), st.binary(max_size=40)), max_size=8)


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(before_ops=_ops, attempt_ops=_ops)
def test_restore_returns_any_state_exactly(before_ops: list, attempt_ops: list) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        repo = init_repo(Path(tmp) / "repo", {"a.txt": "a\n", "d/b.txt": "b\n"})
        _apply(repo, before_ops)
        before = _state(repo)
        snap = take_snapshot(repo)
        _apply(repo, attempt_ops)
        restore_snapshot(repo, snap)
        assert _state(repo) == before


def _apply(repo: Path, ops: list) -> None:
    for op, rel, data in ops:
        path = repo / rel
        if op == "write":
            write_files(repo, {rel: data})
        elif op == "delete" and path.exists():
            path.unlink()
        elif op == "stage" and (path.exists() or run_git(repo, "ls-files", "--", rel)):
            run_git(repo, "add", "-A", "--", rel)
        elif op == "commit":
            run_git(repo, "add", "-A")
            run_git(repo, "commit", "-q", "--allow-empty", "-m", "step")


def checkout_snapshot(wt: Path) -> Snapshot:
    return snapshot_and_index(wt)[0]


def test_checkout_snapshot_of_a_fresh_checkout_equals_a_scan(tmp_path: Path) -> None:
    repo = _project(tmp_path / "repo")
    wt = create_worktree(repo, tmp_path / "wt", "agentrun/g1", "main", checkout=False).path
    assert populate_worktree(wt)
    assert checkout_snapshot(wt) == take_snapshot(wt)
    run_git(wt, "checkout", "-q", "--detach")
    assert checkout_snapshot(wt) == take_snapshot(wt)
    assert checkout_snapshot(wt).branch is None


def test_a_workers_start_knows_its_index_and_snapshot_as_the_two_calls_do(
        tmp_path: Path) -> None:
    repo = _project(tmp_path / "repo")
    wt = create_worktree(repo, tmp_path / "wt", "agentrun/g1", "main", checkout=False).path
    snap, index = snapshot_and_index(wt)
    assert index == index_path(wt) and not index.exists()  # nothing checked out yet
    assert populate_worktree(wt, index)
    assert index.exists() and not populate_worktree(wt, index)
    assert snap == checkout_snapshot(wt) == take_snapshot(wt)
    run_git(wt, "checkout", "-q", "--detach")
    commit_files(wt, {"README.md": "# detached\n"})
    snap, index = snapshot_and_index(wt)
    assert (snap, index) == (take_snapshot(wt), index_path(wt)) and snap.branch is None


def test_restoring_a_checkout_snapshot_undoes_an_attempt(tmp_path: Path) -> None:
    repo = _project(tmp_path / "repo")
    wt = create_worktree(repo, tmp_path / "wt", "agentrun/g1", "main", checkout=False).path
    populate_worktree(wt)
    before = _state(wt)
    snap = checkout_snapshot(wt)
    write_files(wt, {"src/app.py": "x = 2\n", "junk/new.py": "y = 1\n"})
    commit_files(wt, {"README.md": "# changed and committed\n"})
    restore_snapshot(wt, snap)
    assert _state(wt) == before


def test_the_scratch_index_is_named_for_its_process_and_removed(
        worktree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A snapshot's scratch folder carries the worker's pid, so the leftovers sweep can take
    one a killed worker left (tests/test_leftovers.py), and goes when the snapshot is taken."""
    from agentrun.agent import snapshots

    made: list[Path] = []

    def owned(kind: str) -> Path:
        path = real(kind)
        made.append(path)
        assert (path.parent, path.is_dir()) == (Path(tempfile.gettempdir()), True)
        return path

    real = snapshots.owned_temp_dir
    monkeypatch.setattr(snapshots, "owned_temp_dir", owned)
    (worktree / "src/new.py").write_text("n = 1\n")
    take_snapshot(worktree)
    assert made and all(p.name.startswith(f"agentrun-snapshot-{os.getpid()}-") for p in made)
    assert not any(p.exists() for p in made)
