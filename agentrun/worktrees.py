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
from agentrun.workspace import branch_exists, resolve_ref

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


def populate_worktree(worktree: Path, index: Path | None = None) -> bool:
    """Check out HEAD's files into a worktree created with `checkout=False`.

    Does nothing (and returns False) when the worktree already has an index (at `index`, if
    the caller knows where), i.e. it was checked out before: a resumed worker keeps what is
    there.
    """
    if (index or index_path(worktree)).exists():
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
    """Make git forget the worktree at `path`, whose directory is gone: exactly that one."""
    error = forget_worktrees(root, [path]).get(path)
    if error is not None:
        raise error


def forget_worktrees(root: Path, paths: list[Path]) -> dict[Path, GitError]:
    """Make git forget the worktrees at `paths`, whose directories are gone: exactly those,
    with one listing for all. A bare `git worktree prune` would also forget every worktree of
    the user's whose disk is not mounted right now (an offline or removable drive), and it
    would lose its link to the repository. Returns the paths git could not forget."""
    if not paths:
        return {}
    listed = [line[len("worktree "):] for line in
              git("worktree", "list", "--porcelain", "-z", cwd=root).split("\0")
              if line.startswith("worktree ")][1:]  # never the main worktree
    errors: dict[Path, GitError] = {}
    for path in paths:
        wanted = {str(path), str(Path(path).resolve())}
        for known in (p for p in listed if p in wanted):
            try:
                git("worktree", "remove", "--force", known, cwd=root)
            except GitError as exc:
                errors[path] = exc
    return errors


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
    branch: `detach_worktrees`, then `delete_aside`."""
    [detached] = detach_worktrees(root, [wt], delete_branch=delete_branch)
    if detached.error is not None:
        raise detached.error
    if detached.aside is not None:
        delete_aside(root, wt, detached.aside)


@dataclass(frozen=True)
class Detached:
    """One worktree of `detach_worktrees`: `aside`, where its folder waits to be deleted
    (None: nothing to delete), or `error`, why git could not forget it or its branch."""

    aside: Path | None = None
    error: Exception | None = None


def detach_worktrees(root: Path, wts: list[Worktree], *,
                     delete_branch: bool = True) -> list[Detached]:
    """Git's part of removing worktrees, for all of `wts` under one hold of the worktree lock:
    each linked worktree's folder is renamed aside (milliseconds) and forgotten, and their
    branches go in one `git branch -D`. The caller deletes the folders aside (`delete_aside`)
    after the lock is released, so that the removals of several worktrees overlap (deleting
    thousands of files waits on the disk, not on the CPU). One entry per worktree, in order:
    a failure stops only that worktree's removal."""
    out = [Detached()] * len(wts)
    with worktree_lock(root):
        forget: dict[Path, int] = {}  # the folders gone (aside, or deleted by someone)
        for i, wt in enumerate(wts):
            try:
                if (wt.path / ".git").is_file():  # linked (the main one has a directory)
                    aside = wt.path.with_name(f".{wt.path.name}{REMOVING}{os.getpid()}")
                    os.rename(wt.path, aside)
                    out[i], forget[wt.path] = Detached(aside), i
                elif wt.path.exists():
                    git("worktree", "remove", "--force", str(wt.path), cwd=root)
                else:
                    forget[wt.path] = i
            except (GitError, OSError) as exc:
                out[i] = Detached(error=exc)
        for path, refused in forget_worktrees(root, list(forget)).items():
            out[forget[path]] = Detached(error=refused)  # its folder stays aside: swept later
        if delete_branch:
            _delete_branches(root, wts, out)
    return out


def _delete_branches(root: Path, wts: list[Worktree], out: list[Detached]) -> None:
    """Delete the branches of the worktrees git forgot, in one command; a branch that is
    still there afterwards fails its worktree's removal."""
    mine = {i: wt.branch for i, wt in enumerate(wts) if out[i].error is None and wt.branch}
    if not mine:
        return
    args = ["branch", "-D", *dict.fromkeys(mine.values())]
    proc = run_git(*args, cwd=root)
    if proc.returncode == 0:
        return
    for i, branch in mine.items():
        if branch_exists(root, branch):
            out[i] = Detached(error=GitError(args, proc.returncode, proc.stderr, Path(root)))


def delete_aside(root: Path, wt: Worktree, aside: Path) -> None:
    """Delete the folder `detach_worktrees` renamed aside for `wt` (a GitError says which
    worktree could not be removed)."""
    try:
        _delete_tree(aside)
    except OSError as exc:
        raise GitError(["worktree", "remove", "--force", str(wt.path)], 1, str(exc),
                       Path(root)) from None


def _delete_tree(path: Path) -> None:
    remove_tree(path)  # a worker's tree: any depth, any permissions (agentrun/removal.py)


# --- commits ---------------------------------------------------------------------------------

def commit_changes(worktree: Path, message: str) -> bool:
    """Stage everything (new, changed, deleted; .gitignore respected) and commit it; False
    when there was nothing to commit.

    Uses the git CLI, which keeps COMMIT_EDITMSG per worktree. No hook runs (`gitconfig`); a
    nested repository the worker made is staged as what it is, a gitlink, which the merge
    policy then refuses by name.
    """
    if not message.strip():
        raise ValueError("commit message must not be empty")
    stage_all(worktree)
    staged = run_git("diff", "--cached", "--quiet", cwd=worktree)
    if staged.returncode == 0:
        return False
    if staged.returncode != 1:
        raise GitError(["diff", "--cached", "--quiet"], staged.returncode, staged.stderr,
                       Path(worktree))
    git("commit", "--quiet", "--no-verify", "-m", message, cwd=worktree)
    return True


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
