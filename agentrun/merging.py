"""Merging a worker's branch into the user's checkout, never over the user's own files.

A real three-way merge with a merge commit, so nothing an earlier wave merged can be dropped
by a later branch that started from an older base. Before git runs, every place the branch
writes is checked against the checkout (`in_the_way`): git would overwrite or delete an
untracked or ignored file there, and the user owns it (docs/security.md, "Landing never
overwrites or deletes the user's untracked or ignored files"). A refused or conflicting merge
is aborted, leaving the checkout as it was.

Branches that may land at the same moment (workers of a wave often end together) land as a
train (`merge_train`): the same merge commits, made without the checkout, which then moves once.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from agentrun.core.errors import AgentrunError
from agentrun.gitcli import GitError, git, run_git, split_z, version
from agentrun.gitlock import IN_PROGRESS
from agentrun.workspace import head_commit, resolve_ref, tree_changes

# `git merge-tree --write-tree`: a merge computed without touching the checkout
_MERGE_TREE = (2, 38)
# a git operation in progress in the checkout (a merge train leaves the checkout to `git merge`)
_IN_PROGRESS = (*IN_PROGRESS, "rebase-merge", "rebase-apply")


@dataclass(frozen=True)
class MergeResult:
    """Outcome of merging a worker branch: `commit` is the merge commit, None if nothing new.
    `in_the_way` names the user's untracked or ignored paths that refused the merge."""

    ok: bool
    commit: str | None
    conflicts: list[str] = field(default_factory=list)
    message: str = ""
    in_the_way: list[str] = field(default_factory=list)


def merge_branch(root: Path, branch: str, message: str, head: str | None = None,
                 tip: str | None = None) -> MergeResult:
    """Merge `branch` into the branch checked out at `root` with a merge commit.

    A real three-way merge: a branch that started from an older base keeps everything merged
    since. It never overwrites or deletes what the checkout holds untracked or ignored (a
    `.env`, a build folder, agentrun's run records): such a path refuses the merge before git
    runs (`in_the_way`). On a conflict or any other refusal the merge is aborted, so the target
    branch, the index and the working tree are as they were; the caller keeps the branch for a
    human. `head` is HEAD's sha, when the caller has just read it; `tip` the commit of `branch`
    that was verified, which is then what merges, whatever the branch holds by now.
    """
    before = head or head_commit(root)
    tip = tip or resolve_ref(root, branch)
    if tip is None:
        return MergeResult(False, None, [], f"branch {branch} does not exist")
    written = _written(root, before, tip)
    if written:
        blocked = in_the_way(root, written)
        if blocked:
            return MergeResult(False, None, [], (
                f"not merged: {branch} writes {', '.join(blocked)}, which the checkout holds "
                "untracked or ignored; the merge would overwrite or delete it (move it aside, "
                "then merge the branch yourself)"), blocked)
    proc = run_git("merge", "--no-ff", "--no-edit", "--no-autostash", "-m", message,
                   "--end-of-options", tip, cwd=root)
    if proc.returncode == 0:
        after = head_commit(root)
        if after == before:  # git merges nothing, not even with --no-ff, when it is merged
            return MergeResult(True, None, [], f"{branch} has no new commits")
        return MergeResult(True, after, [], f"merged {branch}")
    conflicts = split_z(git("diff", "--name-only", "--diff-filter=U", "-z", cwd=root,
                            check=False))
    if resolve_ref(root, "MERGE_HEAD") == tip:  # this merge's, never a merge of the user's
        git("merge", "--abort", cwd=root)
    if head_commit(root) != before:
        raise AgentrunError(f"a failed merge of {branch} moved HEAD of {root} from {before}",
                            hint=f"inspect the repository; `git reset --keep {before}` undoes it")
    if conflicts:
        text = f"merging {branch} conflicts in: {', '.join(conflicts)}"
    else:
        text = f"git refused to merge {branch}: {(proc.stderr or proc.stdout).strip()}"
    return MergeResult(False, None, sorted(conflicts), text)


@dataclass(frozen=True)
class Landing:
    """One branch of a merge train: its name (for messages), the verified commit that merges
    and the merge commit's message."""

    branch: str
    tip: str
    message: str


def merge_train(root: Path, landings: list[Landing], head: str) -> list[MergeResult]:
    """Merge several branches at once, in their order, each with a merge commit of its own:
    the history `merge_branch` makes one by one, at a fraction of its cost.

    git computes each merge without the checkout (`git merge-tree`), each merge commit is made
    on the one before; the branch moves to the last of them, only if it is still at `head`,
    and the checkout once, from `head` to there, as `git checkout` moves it: a file the user
    changed there, or any file in the way, refuses the move before anything changes (and the
    branch goes back). The train runs only in the plain case and stops at the first branch it
    cannot merge cleanly: it returns the results of the branches it merged (a prefix of
    `landings`, none when the checkout is not plain), and `merge_branch` takes the rest, with
    all its care.
    """
    if len(landings) < 2 or version() < _MERGE_TREE or not _plain(root):
        return []
    commits: list[str] = []
    prev, prev_tree = head, git("rev-parse", "--verify", "--end-of-options", f"{head}^{{tree}}",
                                cwd=root)
    for landing in landings:
        merged = run_git("merge-tree", "--write-tree", "--no-messages", "-z",
                         "--end-of-options", prev, landing.tip, cwd=root)
        tree = split_z(merged.stdout)[0] if merged.returncode == 0 and merged.stdout else ""
        if not tree or tree == prev_tree:  # a conflict, no merge base, or nothing new (merged
            break  # already, perhaps): `git merge` says which, and does what it does
        prev = git("commit-tree", "-p", prev, "-p", landing.tip, "-m",
                   _cleaned(landing.message), "--end-of-options", tree, cwd=root)
        prev_tree = tree
        commits.append(prev)
    if len(commits) < 2:
        return []  # one merge: `merge_branch` costs no more, and says more
    written = [c.path for c in tree_changes(root, head, prev) if c.status != "D"]
    if in_the_way(root, written):
        return []  # `merge_branch` refuses the branch that writes there, by name
    # the branch first, only if it is still at `head` (a commit of the user's meanwhile: the
    # one-by-one way lands on it); then the checkout, or the branch back if git refuses
    if not _move(root, head, prev, commits[-2]):
        return []
    if run_git("read-tree", "-m", "-u", head, prev, cwd=root).returncode != 0:
        if not _move(root, prev, head, head):
            raise AgentrunError(
                f"the branch checked out at {root} moved while a merge train landed on it",
                hint=f"inspect the repository; its branch was at {head} before the train")
        return []  # a file the user changed is in the way: nothing moved
    return [MergeResult(True, commit, [], f"merged {landing.branch}")
            for landing, commit in zip(landings, commits, strict=False)]


def _move(root: Path, old: str, new: str, orig_head: str) -> bool:
    """Move the checked-out branch from `old` to `new` and ORIG_HEAD to `orig_head`, at once
    and only if the branch is still at `old`."""
    return run_git("update-ref", "-m", "merge: a merge train", "--stdin", cwd=root,
                   stdin=f"update HEAD {new} {old}\nupdate ORIG_HEAD {orig_head}\n"
                   ).returncode == 0


def _cleaned(message: str) -> str:
    """A message as `git merge -m` records it (`git stripspace`): no trailing blanks, no blank
    lines first, last or twice in a row."""
    lines: list[str] = []
    for line in message.splitlines():
        line = line.rstrip()
        if line or (lines and lines[-1]):
            lines.append(line)
    return "\n".join(lines).rstrip("\n")


def _plain(root: Path) -> bool:
    """Whether the checkout has nothing staged and no git operation in progress: all a merge
    train may meet (`git merge` refuses the rest in words of its own)."""
    if run_git("diff-index", "--cached", "--quiet", "HEAD", "--", cwd=root).returncode != 0:
        return False
    paths = git("rev-parse", *(a for name in _IN_PROGRESS for a in ("--git-path", name)),
                cwd=root).splitlines()
    return not any((root / path).exists() for path in paths)


def _written(root: Path, before: str, branch: str) -> list[str]:
    """The paths `branch` writes since it forked from `before`; none without a merge base
    (git refuses to merge unrelated histories)."""
    try:  # one git process for the usual case: one merge base
        changes = tree_changes(root, before, branch, from_fork=True)
    except GitError:  # none, or several (git merges them into one first)
        fork = git("merge-base", "--end-of-options", before, branch, cwd=root, check=False)
        changes = tree_changes(root, fork, branch) if fork else []
    return [c.path for c in changes if c.status != "D"]


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
