"""State snapshots of a worker's worktree, so that a failed attempt can be rolled back.

Before the first write of an attempt the retry loop takes a snapshot; when the attempt fails,
the worktree is restored to it before the retry. The retry then starts from exactly the state
the first attempt saw, and the worker's branch never keeps half of a failed attempt.

A snapshot is commit-free: the working tree (untracked files included, ignored ones not) is
stored as a git tree object built in a temporary index, so taking one changes neither HEAD,
the branch, nor the real index. Ignored files are outside the snapshot and are never touched.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from agentrun.gitcli import GitError, git, run_git, split_z
from agentrun.processes import owned_temp_dir
from agentrun.workspace import head_commit
from agentrun.worktrees import index_path, stage_all


@dataclass(frozen=True)
class Snapshot:
    """What a worktree looked like: content tree, HEAD, staged tree and checked-out branch."""

    tree: str  # working tree content, untracked (not ignored) files included
    head: str
    index: str | None = None  # tree of the real index; None when it held unmerged entries
    branch: str | None = None  # full ref HEAD pointed at (refs/heads/...), None when detached


def take_snapshot(worktree: Path) -> Snapshot:
    """Record the worktree's state without touching its index, HEAD or files."""
    with _scratch_index(worktree) as env:
        index_proc = run_git("write-tree", cwd=worktree, env=env)
        stage_all(worktree, env)
        tree = git("write-tree", cwd=worktree, env=env)
    index = index_proc.stdout.strip() if index_proc.returncode == 0 else None
    return Snapshot(tree=tree, head=head_commit(worktree), index=index,
                    branch=_symbolic_head(worktree))


def snapshot_and_index(worktree: Path) -> tuple[Snapshot, Path]:
    """The snapshot of a worktree that holds exactly HEAD's checkout, as a fresh checkout does
    (from HEAD alone, without reading a file), and where the worktree's index file is
    (`worktrees.index_path`: none there, nothing is checked out yet): one git process."""
    index, head, tree, ref = git("rev-parse", "--git-path", "index", "HEAD", "HEAD^{tree}",
                                 "--symbolic-full-name", "HEAD", cwd=worktree).split("\n")
    return (Snapshot(tree=tree, head=head, index=tree, branch=None if ref == "HEAD" else ref),
            Path(worktree) / index)


def restore_snapshot(worktree: Path, snap: Snapshot) -> None:
    """Put the worktree back exactly as it was when `snap` was taken.

    Files are restored byte for byte (only those that differ are rewritten, files the attempt
    created are deleted), commits made since are dropped from the branch, and the index is
    reset so that files untracked or unstaged then are untracked or unstaged again.
    """
    _restore_files(worktree, _current_tree(worktree), snap.tree)
    _restore_head(worktree, snap)
    head_tree = git("rev-parse", f"{snap.head}^{{tree}}", cwd=worktree)
    if snap.index is not None and snap.index != head_tree:
        git("read-tree", snap.index, cwd=worktree)
    run_git("update-index", "-q", "--refresh", cwd=worktree)  # exits 1 if files differ: fine


@contextmanager
def _scratch_index(worktree: Path) -> Iterator[dict[str, str]]:
    """Environment pointing git at a throwaway copy of the worktree's index.

    Copying (with its timestamps) instead of starting empty keeps the cached file stats, so
    `git add -A` only hashes files that changed.
    """
    real = index_path(worktree)
    tmp = owned_temp_dir("snapshot")  # one a killed worker leaves: see leftovers.py
    try:
        env = {"GIT_INDEX_FILE": str(tmp / "index")}
        if real.exists():
            shutil.copy2(real, env["GIT_INDEX_FILE"])
        else:
            git("read-tree", "HEAD", cwd=worktree, env=env)
        yield env
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _current_tree(worktree: Path) -> str:
    with _scratch_index(worktree) as env:
        stage_all(worktree, env)
        return git("write-tree", cwd=worktree, env=env)


def _symbolic_head(worktree: Path) -> str | None:
    proc = run_git("symbolic-ref", "--quiet", "HEAD", cwd=worktree)
    return proc.stdout.strip() if proc.returncode == 0 else None


def _restore_files(worktree: Path, now: str, target: str) -> None:
    """Make the non-ignored files match `target`: write what differs, delete what it lacks.

    Writing comes first so that a restored .gitignore decides which leftovers count as
    ignored: those are kept, like every other ignored file.
    """
    items = split_z(git("diff-tree", "-r", "-z", "--no-renames", "--name-status", now, target,
                        cwd=worktree))
    changes = list(zip(items[0::2], items[1::2], strict=True))
    to_write = [path for status, path in changes if status != "D"]
    if to_write:
        with _scratch_index(worktree) as env:
            git("read-tree", target, cwd=worktree, env=env)
            git("checkout-index", "-f", "-z", "--stdin", cwd=worktree, env=env,
                stdin="\0".join(to_write) + "\0")
    leftovers = [path for status, path in changes if status == "D"]
    ignored = set(_ignored(worktree, leftovers)) if leftovers else set()
    for path in leftovers:
        if path not in ignored:
            _remove_file(Path(worktree), path)


def _ignored(worktree: Path, paths: list[str]) -> list[str]:
    """Those of `paths` the worktree's ignore rules match, tracked or not."""
    proc = run_git("check-ignore", "--no-index", "-z", "--stdin", cwd=worktree,
                   stdin="\0".join(paths) + "\0")
    if proc.returncode not in (0, 1):
        raise GitError(["check-ignore", "--no-index", "-z", "--stdin"], proc.returncode,
                       proc.stderr, Path(worktree))
    return split_z(proc.stdout)


def _remove_file(root: Path, path: str) -> None:
    """Delete one file and then the directories it leaves empty (git cannot track those)."""
    target = root / path
    if target.is_symlink() or target.is_file():
        target.unlink()
    parent = target.parent
    while parent != root:
        try:
            os.rmdir(parent)
        except OSError:  # not empty, or already gone
            break
        parent = parent.parent


def _restore_head(worktree: Path, snap: Snapshot) -> None:
    """Point HEAD where it was (same branch, or detached) and drop the attempt's commits."""
    current = _symbolic_head(worktree)
    if snap.branch is not None and current != snap.branch:
        git("symbolic-ref", "HEAD", snap.branch, cwd=worktree)
    elif snap.branch is None and current is not None:
        git("update-ref", "--no-deref", "HEAD", snap.head, cwd=worktree)
    git("reset", "-q", "--mixed", snap.head, cwd=worktree)
