"""Git for agentrun: worktrees per worker, commits, verification of claims, and merges.

Each worker runs in its own worktree on its own branch, because several processes committing
in one working tree lose commits. The orchestrator verifies what a worker says it committed
against git and merges the branch with a real three-way merge, so nothing an earlier wave
merged can be dropped by a later branch that started from an older base.

The runner and the locks live in `agentrun.gitcli` and `agentrun.gitlock`; this module is the
import path for all of it.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from agentrun.core.errors import AgentrunError, CannotStart
from agentrun.gitcli import GitError, git, run_git, split_z
from agentrun.gitconfig import identity_env
from agentrun.gitlock import RunLock, git_common_dir, worktree_lock
from agentrun.removal import remove_tree

__all__ = [
    "GitError", "MergeResult", "RunLock", "Worktree", "branch_exists", "changed_files",
    "commit_all", "commits_since", "create_worktree", "current_branch", "dirty_paths",
    "ensure_identity", "forget_worktree", "git", "git_common_dir", "head_commit",
    "index_path", "in_the_way", "is_ancestor", "merge_branch", "populate_worktree",
    "ref_exists", "remove_worktree", "repo_root", "resolve_ref", "stage_all", "symlinks_of",
    "tree_changes", "TreeChange", "verify_commits", "worktree_lock",
]

_COMMIT_ID = re.compile(r"[0-9a-fA-F]{4,64}")
# a worktree being removed: its folder renamed `.<name>.removing-<pid>` beside it, then deleted
REMOVING = ".removing-"


# --- queries ---------------------------------------------------------------------------------

def repo_root(path: Path) -> Path:
    """Top of the worktree that contains `path`; CannotStart when it is not inside a repo."""
    path = Path(path)
    probe = path if path.is_dir() else path.parent
    proc = run_git("rev-parse", "--show-toplevel", cwd=probe) if probe.is_dir() else None
    if proc is None or proc.returncode != 0 or not proc.stdout.strip():
        raise CannotStart(
            f"not a git repository: {path}",
            hint="run `git init` and commit once in the project, or run agentrun from inside "
                 "a git repository",
        )
    return Path(proc.stdout.strip())


def resolve_ref(root: Path, ref: str) -> str | None:
    """Full sha of the commit `ref` names (branches, tags, shas, HEAD~2), or None if none."""
    proc = run_git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}",
                   cwd=root)
    if proc.returncode != 0:
        return None
    return proc.stdout.strip() or None


def ref_exists(root: Path, ref: str) -> bool:
    return resolve_ref(root, ref) is not None


def head_commit(root: Path) -> str:
    """Sha of HEAD; a repository without commits cannot host worktrees, so it cannot start."""
    sha = resolve_ref(root, "HEAD")
    if sha is None:
        raise CannotStart(f"the repository at {root} has no commits yet",
                          hint="make a first commit: `git add -A && git commit -m initial`")
    return sha


def current_branch(root: Path) -> str | None:
    """Short name of the checked-out branch, or None when HEAD is detached."""
    proc = run_git("symbolic-ref", "--quiet", "--short", "HEAD", cwd=root)
    if proc.returncode == 1:
        return None
    if proc.returncode != 0:
        raise GitError(["symbolic-ref", "--quiet", "--short", "HEAD"], proc.returncode,
                       proc.stderr, Path(root))
    return proc.stdout.strip()


def branch_exists(root: Path, name: str) -> bool:
    return run_git("show-ref", "--verify", "--quiet", f"refs/heads/{name}",
                   cwd=root).returncode == 0


def is_ancestor(root: Path, a: str, b: str) -> bool:
    """True when commit `a` is reachable from `b` (a == b counts)."""
    args = ["merge-base", "--is-ancestor", "--end-of-options", a, b]
    proc = run_git(*args, cwd=root)
    if proc.returncode not in (0, 1):
        raise GitError(args, proc.returncode, proc.stderr, Path(root))
    return proc.returncode == 0


def _status_paths(root: Path, *, untracked: bool) -> list[str]:
    """Paths `git status` reports, both sides of a rename. Takes no optional locks, so it never
    races a git command running in another worktree or process."""
    out = git("--no-optional-locks", "status", "--porcelain=v1", "-z", "--no-renames",
              "--untracked-files=all" if untracked else "--untracked-files=no", cwd=root)
    paths: list[str] = []
    items = iter(split_z(out))
    for item in items:
        paths.append(item[3:])
        if item[0] in "RC":  # defensive: a rename record carries its source path next
            paths.append(next(items, ""))
    return sorted({p for p in paths if p})


def dirty_paths(root: Path, *, ignore: Iterable[str] = (".specflow/runs/",)) -> list[str]:
    """Uncommitted changes, untracked files included, minus paths under the `ignore` prefixes.

    Untracked directories are listed file by file so that a prefix such as `.specflow/runs/`
    still matches when the whole `.specflow/` directory is new.
    """
    prefixes = tuple(ignore)
    return [p for p in _status_paths(root, untracked=True) if not _under_any(p, prefixes)]


def _under_any(path: str, prefixes: tuple[str, ...]) -> bool:
    for prefix in prefixes:
        bare = prefix.rstrip("/")
        if path == bare or path.startswith(bare + "/"):
            return True
    return False


def ensure_identity(root: Path) -> dict[str, str]:
    """Environment that gives commits an author when the repository's config names none.

    Returns only the variables that are missing (empty when git already knows who commits):
    the user's global identity, else agentrun's. Every commit and merge through `git()` gets
    them anyway (`gitconfig.identity_env`); the user's config is never modified.
    """
    return identity_env(root)


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
    return True


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

    Uses the git CLI, which keeps COMMIT_EDITMSG per worktree. No hook runs (`gitcli`); a
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


def commits_since(worktree_or_root: Path, base: str, ref: str = "HEAD") -> list[str]:
    """Full shas of the commits in `base..ref`, oldest first."""
    out = git("rev-list", "--reverse", "--end-of-options", f"{base}..{ref}", cwd=worktree_or_root)
    return out.split()


def changed_files(root: Path, base: str, ref: str) -> tuple[list[str], list[str], list[str]]:
    """(created, modified, deleted) paths between two commits; a rename is a delete + create.

    Plumbing (`diff-tree`) rather than `git diff`, so user diff settings cannot change it.
    """
    out = git("diff-tree", "-r", "-z", "--name-status", "--no-renames", "--end-of-options",
              base, ref, cwd=root)
    created: list[str] = []
    modified: list[str] = []
    deleted: list[str] = []
    items = iter(split_z(out))
    for status in items:
        kind = status[0]
        if kind in "RC":  # only if renames were detected after all: source, then destination
            source, dest = next(items), next(items)
            if kind == "R":
                deleted.append(source)
            created.append(dest)
            continue
        path = next(items)
        if kind == "A":
            created.append(path)
        elif kind == "D":
            deleted.append(path)
        else:  # M, T (type change)
            modified.append(path)
    return created, modified, deleted


@dataclass(frozen=True)
class TreeChange:
    """One path that differs between two commits, with its modes (`000000` where a side has
    none; `120000` a symlink, `160000` a gitlink) and the object it has afterwards."""

    status: str  # A, M, D or T (type change)
    path: str
    old_mode: str
    new_mode: str
    new_object: str


def tree_changes(root: Path, base: str, ref: str) -> list[TreeChange]:
    """Every path that differs between two commits, read from git's trees (never from a
    working tree); a rename is a delete and an add."""
    out = git("diff-tree", "-r", "-z", "--raw", "--no-renames", "--no-abbrev",
              "--end-of-options", base, ref, cwd=root)
    items = iter(split_z(out))
    changes = []
    for meta in items:
        old_mode, new_mode, _old, new_object, status = meta.lstrip(":").split(" ")[:5]
        changes.append(TreeChange(status[0], next(items), old_mode, new_mode, new_object))
    return changes


def symlinks_of(root: Path, ref: str) -> dict[str, str]:
    """Every symlink in the tree of `ref`: its path and the target it holds."""
    listed = split_z(git("ls-tree", "-r", "-z", "--full-tree", "--end-of-options", ref,
                         cwd=root))
    links = [(entry.split("\t", 1)[1], entry.split(" ")[2].split("\t")[0])
             for entry in listed if entry.startswith("120000 ")]
    if not links:
        return {}
    out = run_git("cat-file", "--batch", cwd=root,
                  stdin="".join(f"{sha}\n" for _, sha in links)).stdout
    data = out.encode("utf-8", "surrogateescape")  # a lossless round trip: sizes are bytes
    targets: dict[str, str] = {}
    at = 0
    for path, _sha in links:
        header_end = data.index(b"\n", at)
        size = int(data[at:header_end].rsplit(b" ", 1)[1])
        body = data[header_end + 1:header_end + 1 + size]
        targets[path] = body.decode("utf-8", "surrogateescape")
        at = header_end + 1 + size + 1
    return targets


def verify_commits(root: Path, claimed: Iterable[str], branch: str, base: str, *,
                   on_branch: Iterable[str] | None = None) -> tuple[list[str], list[str]]:
    """Check a worker's claimed commits against git.

    A claim is verified when it is a commit id (full or abbreviated hex, not a ref name) that
    resolves to a commit in `base..branch` (`on_branch`, when the caller listed them already).
    Returns (verified full shas in claim order, without duplicates; rejected claims, each with
    the reason).
    """
    listed = set(commits_since(root, base, branch) if on_branch is None else on_branch)
    verified: list[str] = []
    rejected: list[str] = []
    for claim in claimed:
        text = str(claim).strip()
        if not _COMMIT_ID.fullmatch(text):
            rejected.append(f"{text!r}: not a commit id")
            continue
        sha = text.lower() if text.lower() in listed else resolve_ref(root, text)
        if sha is None or not sha.startswith(text.lower()):
            rejected.append(f"{text}: no such commit (unknown or ambiguous id)")
        elif sha not in listed:
            rejected.append(f"{text}: not a commit of {branch} since {base[:12]}")
        elif sha not in verified:
            verified.append(sha)
    return verified, rejected


# --- merging ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class MergeResult:
    """Outcome of merging a worker branch: `commit` is the merge commit, None if nothing new.
    `in_the_way` names the user's untracked or ignored paths that refused the merge."""

    ok: bool
    commit: str | None
    conflicts: list[str] = field(default_factory=list)
    message: str = ""
    in_the_way: list[str] = field(default_factory=list)


def merge_branch(root: Path, branch: str, message: str) -> MergeResult:
    """Merge `branch` into the branch checked out at `root` with a merge commit.

    A real three-way merge: a branch that started from an older base keeps everything merged
    since. It never overwrites or deletes what the checkout holds untracked or ignored (a
    `.env`, a build folder, agentrun's run records): such a path refuses the merge before git
    runs (`in_the_way`). On a conflict or any other refusal the merge is aborted, so the target
    branch, the index and the working tree are as they were; the caller keeps the branch for a
    human.
    """
    before = head_commit(root)
    if resolve_ref(root, branch) is None:
        return MergeResult(False, None, [], f"branch {branch} does not exist")
    fork = git("merge-base", "--end-of-options", before, branch, cwd=root, check=False)
    if fork:
        written = [c.path for c in tree_changes(root, fork, branch) if c.status != "D"]
        blocked = in_the_way(root, written)
        if blocked:
            return MergeResult(False, None, [], (
                f"not merged: {branch} writes {', '.join(blocked)}, which the checkout holds "
                "untracked or ignored; the merge would overwrite or delete it (move it aside, "
                "then merge the branch yourself)"), blocked)
    proc = run_git("merge", "--no-ff", "--no-edit", "--no-autostash", "-m", message,
                   "--end-of-options", branch, cwd=root)
    if proc.returncode == 0:
        after = head_commit(root)
        if after == before:  # git merges nothing, not even with --no-ff, when it is merged
            return MergeResult(True, None, [], f"{branch} has no new commits")
        return MergeResult(True, after, [], f"merged {branch}")
    conflicts = split_z(git("diff", "--name-only", "--diff-filter=U", "-z", cwd=root,
                            check=False))
    if resolve_ref(root, "MERGE_HEAD") is not None:
        git("merge", "--abort", cwd=root)
    if head_commit(root) != before:
        raise AgentrunError(f"a failed merge of {branch} moved HEAD of {root} from {before}",
                            hint=f"inspect the repository; `git reset --keep {before}` undoes it")
    if conflicts:
        text = f"merging {branch} conflicts in: {', '.join(conflicts)}"
    else:
        text = f"git refused to merge {branch}: {(proc.stderr or proc.stdout).strip()}"
    return MergeResult(False, None, sorted(conflicts), text)


def in_the_way(root: Path, paths: Iterable[str]) -> list[str]:
    """Of the places a merge writes `paths`, those the working tree at `root` holds as
    something git does not track: an untracked or ignored file, symlink or folder at the path,
    a file or symlink where a parent folder goes, untracked or ignored files in a folder that a
    file replaces. git would overwrite or delete each (for ignored ones git 2.39 does not even
    ask on a non-fast-forward merge). Read from the file system without following a symlink."""
    top = Path(root)
    single: set[str] = set()  # a file, symlink or other non-folder: in the way unless tracked
    folders: set[str] = set()  # a folder where a file goes: in the way if it holds untracked
    for path in paths:
        parts = path.split("/")
        for depth in range(1, len(parts) + 1):
            here = "/".join(parts[:depth])
            try:
                mode = os.lstat(top / here).st_mode
            except OSError:  # nothing there (or a file above it, already noted): no loss
                break
            if stat.S_ISDIR(mode):
                if depth == len(parts):
                    folders.add(here)
                continue
            single.add(here)
            break
    blocked: set[str] = set()
    if single:
        tracked = set(split_z(git("ls-files", "-z", "--cached", "--full-name", "--",
                                  *(f":(top,literal){p}" for p in sorted(single)), cwd=root)))
        blocked |= single - tracked
    if folders:
        loose = split_z(git("ls-files", "-z", "--others", "--directory", "--full-name", "--",
                            *(f":(top,literal){p}" for p in sorted(folders)), cwd=root))
        blocked |= {entry.rstrip("/") for entry in loose}
    return sorted(blocked)
