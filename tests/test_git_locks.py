"""git's lock files left in the way of a run are found before anything starts: one that a
running git holds or a killed one left is named with its fix (exit 3, nothing merged, no
worker started); one written before the machine last started is removed, and said."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from clirun import agentrun
from gitutil import init_repo, run_git
from runkit import make_project, scripted, spec_text, writes

from agentrun.core.errors import CannotStart
from agentrun.gitlock import boot_time, clear_git_locks

TWO = [("G1", [], "one.txt"), ("G2", [], "two.txt")]


def wait_for(predicate, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def before_boot(path: Path) -> None:
    """Date `path` to before this machine started, as after a reboot."""
    booted = boot_time()
    if booted is None:
        pytest.skip("this system does not say when it started")
    os.utime(path, (booted - 60, booted - 60))


def test_an_index_lock_held_then_left_by_a_killed_git(tmp_path):
    script = {"groups": {"G1": writes("one.txt", "1\n"), "G2": writes("two.txt", "2\n")}}
    root = make_project(tmp_path / "p", "SPEC-1", spec_text("SPEC-1", TWO), script)
    head = run_git(root, "rev-parse", "HEAD")
    lock = root / ".git/index.lock"
    # the user's own commit, its pre-commit hook still running: git holds the index lock
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "pre-commit").write_text("#!/bin/sh\nsleep 120\n")
    (hooks / "pre-commit").chmod(0o755)
    (root / "README.md").write_text("# edited\n")
    user = subprocess.Popen(["git", "-c", f"core.hooksPath={hooks}", "commit", "-qam", "mine"],
                            cwd=root, start_new_session=True)
    try:
        wait_for(lock.exists)
        held = agentrun("run", "SPEC-1", *scripted("--allow-dirty"), cwd=root)
    finally:
        os.killpg(user.pid, signal.SIGKILL)  # killed mid-commit: its lock stays behind
        user.wait()
    assert held.returncode == 3, held.stderr
    assert f"git's lock file {lock} exists" in held.stderr
    assert f"git is running in this repository now (pid {user.pid}" in held.stderr
    assert lock.exists() and user.returncode == -signal.SIGKILL

    left = agentrun("run", "SPEC-1", *scripted("--allow-dirty"), cwd=root)
    assert left.returncode == 3, left.stderr
    assert "no git process is running in this repository now" in left.stderr
    assert f"rm {lock}" in left.stderr and "Traceback" not in left.stderr
    # nothing started: no run record, no worktree, no commit
    assert not (root / ".specflow/runs").exists()
    assert run_git(root, "rev-parse", "HEAD") == head
    assert len(run_git(root, "worktree", "list").splitlines()) == 1

    before_boot(lock)
    done = agentrun("run", "SPEC-1", *scripted("--allow-dirty"), cwd=root)
    assert done.returncode == 0, done.stderr
    assert not lock.exists() and (root / "two.txt").exists()
    assert (root / "README.md").read_text() == "# edited\n"  # the user's edit is untouched
    assert any(f"removed the stale git lock {lock}" in w for w in done.json["warnings"])


def test_a_linked_worktrees_lock_and_a_merge_in_progress(tmp_path):
    """Run from a linked worktree, its own index lock is the one that counts."""
    root = init_repo(tmp_path / "r")
    linked = tmp_path / "linked"
    run_git(root, "worktree", "add", "-q", "-b", "side", str(linked))
    lock = Path(run_git(linked, "rev-parse", "--absolute-git-dir")) / "index.lock"
    lock.write_text("")
    assert clear_git_locks(root, "main") == []  # the main checkout's index is free
    with pytest.raises(CannotStart, match=f"git's lock file {lock} exists"):
        clear_git_locks(linked, "side")
    before_boot(lock)
    assert "removed the stale git lock" in clear_git_locks(linked, "side")[0]
    assert not lock.exists()
    (Path(run_git(linked, "rev-parse", "--absolute-git-dir")) / "MERGE_HEAD").write_text(
        run_git(linked, "rev-parse", "HEAD") + "\n")
    with pytest.raises(CannotStart, match="a merge is in progress"):
        clear_git_locks(linked, "side")
