"""Reading a repository: refs, the checkout's state, and what a worker's branch changed.

Everything here only asks git and changes nothing: where the checkout's top is, which commit
a name means, what is uncommitted, and, for a worker's branch, its commits, the paths it
changed read from git's trees (never from a working tree), its symlinks, and which of the
commits a worker claims are really on it: the orchestrator believes git, never a worker's
word (docs/ARCHITECTURE.md). A worker's worktree is made, committed in and removed by
`agentrun/worktrees.py`; a branch is merged into the user's checkout by `agentrun/merging.py`;
every git call runs through `agentrun/gitcli.py`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from agentrun.core.errors import CannotStart
from agentrun.gitcli import GitError, git, run_git, split_z
from agentrun.gitconfig import identity_env

_COMMIT_ID = re.compile(r"[0-9a-fA-F]{4,64}")


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


def checked_out(root: Path) -> tuple[str | None, str | None]:
    """The checked-out branch's full-length short name (`refs/heads/` taken off; None when HEAD
    is detached) and HEAD's sha (None before the first commit), asked of one git process.
    `current_branch` may spell a branch longer, where a tag has its name."""
    proc = run_git("rev-parse", "HEAD^{commit}", "--symbolic-full-name", "HEAD", cwd=root)
    found = proc.stdout.split("\n")
    if proc.returncode == 0 and len(found) >= 2:
        sha, name = found[0], found[1]
        if name == "HEAD":
            return None, sha
        if name.startswith("refs/heads/"):
            return name[len("refs/heads/"):], sha
    return current_branch(root), resolve_ref(root, "HEAD")


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


# --- a branch's changes ----------------------------------------------------------------------

def commits_since(worktree_or_root: Path, base: str, ref: str = "HEAD") -> list[str]:
    """Full shas of the commits in `base..ref`, oldest first."""
    out = git("rev-list", "--reverse", "--end-of-options", f"{base}..{ref}", cwd=worktree_or_root)
    return out.split()


def commits_on(root: Path, base: str, ref: str) -> list[str] | None:
    """`commits_since`, or None when `ref` names no commit: one git process when it does."""
    args = ("rev-list", "--reverse", "--end-of-options", f"{base}..{ref}^{{commit}}")
    proc = run_git(*args, cwd=root)
    if proc.returncode == 0:
        return proc.stdout.split()
    if resolve_ref(root, ref) is None:
        return None
    raise GitError(list(args), proc.returncode, proc.stderr, Path(root))


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


def tree_changes(root: Path, base: str, ref: str, *, from_fork: bool = False) -> list[TreeChange]:
    """Every path that differs between two commits, read from git's trees (never from a
    working tree); a rename is a delete and an add. `from_fork`: what `ref` changed since it
    forked from `base` (their one merge base; GitError when there is none or several)."""
    fork = ("--merge-base",) if from_fork else ()
    out = git("diff-tree", "-r", "-z", "--raw", "--no-renames", "--no-abbrev", *fork,
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
