"""A worker's worktree: made, checked out, committed in, removed.

Each worker runs in its own worktree on its own branch, because several processes committing
in one working tree lose commits. Making and removing a worktree changes git's bookkeeping,
which every worktree of the repository shares, so that part runs under the worktree lock
(agentrun/gitlock.py) and nothing slow does: a worker checks its files out in its own process
(`populate_worktree`), and a removed worktree's files are deleted after the lock is released.
A worker's tree is untrusted: it is staged with plumbing that never enters a nested
repository and committed with no hook (docs/security.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from agentrun.core.errors import CannotStart
from agentrun.gitcli import GitError, git, run_git, split_z
from agentrun.gitlock import worktree_lock
from agentrun.removal import remove_tree
from agentrun.workspace import branch_exists, head_commit, resolve_ref

# a worktree being removed: its folder renamed `.<name>.removing-<pid>` beside it, then deleted
REMOVING = ".removing-"


# --- worktrees -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Worktree:
    """A worker's checkout: its directory, its branch, and the full sha it started from."""

    path: Path
    branch: str
    base: str


def create_worktree(root: Path, path: Path, branch: str, base: str, *,
                    checkout: bool = True) -> Worktree:
    """Check out `branch` at `path`, creating the branch from `base` unless it already exists.

    An existing branch means a resumed run: it is reused as it is, so the commits a worker
    already made are kept. Runs under the worktree lock. With `checkout=False` only git's
    bookkeeping is done under the lock (milliseconds) and the files are left for
    `populate_worktree`, which the worker runs in its own process, in parallel with others.
    """
    path = Path(path).absolute()
    base_sha = resolve_ref(root, base)
    if base_sha is None:
        raise CannotStart(f"cannot create worktree {path}: {base!r} is not a commit in {root}",
                          hint="pass an existing commit or branch as the base")
    lazy = [] if checkout else ["--no-checkout"]
    with worktree_lock(root):
        path.parent.mkdir(parents=True, exist_ok=True)
        args = ["worktree", "add", "--quiet", *lazy, "-b", branch, str(path), base_sha]
        proc = run_git(*args, cwd=root)
        if proc.returncode == 0:
            return Worktree(path, branch, base_sha)
        if not branch_exists(root, branch):
            raise GitError(args, proc.returncode, proc.stderr, Path(root))
        holder = _checkout_of(root, branch)
        if holder is not None and not holder.exists():  # ours; someone deleted its folder
            forget_worktree(root, holder)
            holder = None
        if holder is None:
            git("worktree", "add", "--quiet", *lazy, str(path), branch, cwd=root)
        elif holder.resolve() != path.resolve():
            raise CannotStart(
                f"branch {branch} is already checked out in {holder}",
                hint=f"finish or remove that worktree (`git worktree remove --force {holder}`), "
                     "or delete the branch to start the work afresh",
            )
    return Worktree(path, branch, base_sha)


def index_path(worktree: Path) -> Path:
    """Where the worktree's index file is (linked worktrees keep theirs in the git dir)."""
    return Path(worktree) / git("rev-parse", "--git-path", "index", cwd=worktree)


def populate_worktree(worktree: Path) -> bool:
    """Check out HEAD's files into a worktree created with `checkout=False`.

    Does nothing (and returns False) when the worktree already has an index, i.e. it was
    checked out before: a resumed worker keeps what is there.
    """
    if index_path(worktree).exists():
        return False
    git("read-tree", "-u", "--reset", "HEAD", cwd=worktree)
    _settle_index(worktree)
    return True


def _settle_index(worktree: Path) -> None:
    """Make a fresh checkout's index trusted by the next git command.

    git writes the files, then the index, within the same second. A file changed later in
    that second keeps its size and its time to the second, so git trusts no file whose time is
    not older than the index's ("racy git"): until an index is written a second later, every
    git command (the snapshots, the final commit) reads all of them again. Dated back by one
    second, the files are older than the index written next; a change made from now on gives
    a file a time the index does not hold, so none goes unseen.
    """
    second = 1_000_000_000
    for path in split_z(git("ls-files", "-z", cwd=worktree)):
        full = os.path.join(worktree, path)
        try:
            st = os.lstat(full)
            os.utime(full, ns=(st.st_atime_ns, st.st_mtime_ns - second),
                     follow_symlinks=False)
        except (OSError, NotImplementedError):  # not checked out (a gitlink's folder); a
            continue  # system that cannot date a symlink: git reads that entry again, as ever
    run_git("update-index", "-q", "--refresh", cwd=worktree)  # exits 1 if a file differs


def forget_worktree(root: Path, path: Path) -> None:
    """Make git forget the worktree at `path`, whose directory is gone: exactly that one. A
    bare `git worktree prune` would also forget every worktree of the user's whose disk is
    not mounted right now (an offline or removable drive), and it would lose its link to
    the repository."""
    wanted = {str(path), str(Path(path).resolve())}
    listed = [line[len("worktree "):] for line in
              git("worktree", "list", "--porcelain", "-z", cwd=root).split("\0")
              if line.startswith("worktree ")]
    for known in (p for p in listed[1:] if p in wanted):  # never the main worktree
        git("worktree", "remove", "--force", known, cwd=root)


def _checkout_of(root: Path, branch: str) -> Path | None:
    """The worktree directory where `branch` is checked out, if any (the main one included)."""
    current: Path | None = None
    for line in git("worktree", "list", "--porcelain", "-z", cwd=root).split("\0"):
        if line.startswith("worktree "):
            current = Path(line[len("worktree "):])
        elif line == f"branch refs/heads/{branch}":
            return current
    return None


def remove_worktree(root: Path, wt: Worktree, *, delete_branch: bool = True) -> None:
    """Delete the worktree directory (even with uncommitted changes) and, by default, its
    branch.

    Only git's bookkeeping runs under the worktree lock: a linked worktree's directory is
    renamed aside there (milliseconds) and its files are deleted after the lock is released,
    so that removals of several worktrees overlap (deleting thousands of files waits on the
    disk, not on the CPU)."""
    aside: Path | None = None
    with worktree_lock(root):
        if (wt.path / ".git").is_file():  # a linked worktree (the main one has a directory)
            aside = wt.path.with_name(f".{wt.path.name}{REMOVING}{os.getpid()}")
            os.rename(wt.path, aside)
            forget_worktree(root, wt.path)  # its directory is gone (aside)
        elif wt.path.exists():
            git("worktree", "remove", "--force", str(wt.path), cwd=root)
        else:
            forget_worktree(root, wt.path)  # the directory someone deleted
        if delete_branch:
            proc = run_git("branch", "-D", wt.branch, cwd=root)
            if proc.returncode != 0 and branch_exists(root, wt.branch):
                raise GitError(["branch", "-D", wt.branch], proc.returncode, proc.stderr,
                               Path(root))
    if aside is not None:
        try:
            _delete_tree(aside)
        except OSError as exc:
            raise GitError(["worktree", "remove", "--force", str(wt.path)], 1, str(exc),
                           Path(root)) from None


def _delete_tree(path: Path) -> None:
    remove_tree(path)  # a worker's tree: any depth, any permissions (agentrun/removal.py)


# --- commits ---------------------------------------------------------------------------------

def commit_all(worktree: Path, message: str) -> str | None:
    """Stage everything (new, changed, deleted; .gitignore respected) and commit it.

    Uses the git CLI, which keeps COMMIT_EDITMSG per worktree. No hook runs (`gitconfig`); a
    nested repository the worker made is staged as what it is, a gitlink, which the merge
    policy then refuses by name. Returns the new sha, or None when there was nothing to
    commit.
    """
    if not message.strip():
        raise ValueError("commit message must not be empty")
    stage_all(worktree)
    staged = run_git("diff", "--cached", "--quiet", cwd=worktree)
    if staged.returncode == 0:
        return None
    if staged.returncode != 1:
        raise GitError(["diff", "--cached", "--quiet"], staged.returncode, staged.stderr,
                       Path(worktree))
    git("commit", "--quiet", "--no-verify", "-m", message, cwd=worktree)
    return head_commit(worktree)


def stage_all(tree: Path, env: dict[str, str] | None = None) -> None:
    """Stage every change of a working tree as `git add -A` does (new, changed, deleted;
    .gitignore respected; a nested repository as a gitlink), but with plumbing that never
    looks inside a nested repository: `git add` runs `git status` in one checked out at a
    gitlink path, under that repository's own config. Gitlinks already in the index are left
    as they are. `env` adds to git's environment (a scratch index)."""
    changed = split_z(git("diff-files", "-z", "--name-only", "--ignore-submodules=all",
                          cwd=tree, env=env))
    new = [p.rstrip("/") for p in split_z(git("ls-files", "-z", "--others",
                                              "--exclude-standard", cwd=tree, env=env))]
    if changed or new:  # removals and changes first: a file may become a folder, and back
        git("update-index", "--add", "--remove", "-z", "--stdin", cwd=tree, env=env,
            stdin="".join(f"{p}\0" for p in [*changed, *new]))
