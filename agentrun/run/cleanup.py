"""What `agentrun clean` may remove: the worktrees and branches runs left behind.

Only what agentrun created is ever considered — a branch named `agentrun/<spec>/<run-id>/<batch>`
and a worktree on such a branch or inside a run's `worktrees/` folder — and how its run ended
decides: a complete run's leftovers go; a run that ended otherwise (failed, partial, aborted,
interrupted, or killed before it could say) kept them for a human or `--resume`, so they go
only when forced. A worktree with uncommitted changes is kept unless forced, and the run that
holds the run lock is never touched.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from agentrun import gitcli, worktrees
from agentrun.core.errors import BadInput
from agentrun.core.status import RunStatus
from agentrun.report.execution_state import load_state
from agentrun.run.leftovers import is_check_branch

BRANCH = re.compile(r"agentrun/[^/]+/(?P<run>\d{8}-\d{6}-[0-9a-f]{4})/[^/]+")
RUN_ID = re.compile(r"\d{8}-\d{6}-[0-9a-f]{4}")
KILLED = "killed"  # a run with no record of its end and no process holding the run lock
RUNNING = "running"


@dataclass
class LeftoverCheckout:
    """One worktree and/or branch of a run, and what `clean` does with it."""

    run_id: str
    run_status: str
    branch: str | None
    worktree: str | None
    action: str = ""  # removed | would remove | kept | skipped
    reason: str = ""

    def to_dict(self) -> dict[str, str | None]:
        return asdict(self)


def lock_holder(lock_file: Path) -> str | None:
    """The run id the run lock's holder wrote (read only while the lock is held by it)."""
    try:
        data = json.loads(lock_file.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return None
    run = data.get("run_id") if isinstance(data, dict) else None
    return run if isinstance(run, str) else None


def run_statuses(runs_dir: Path, execution_dir: Path) -> dict[str, str]:
    """How each recorded run ended: its run record's result, else the execution state that
    names it; a run with neither never finished."""
    ended: dict[str, str] = {}
    for path in sorted(execution_dir.glob("*-state.json")) if execution_dir.is_dir() else []:
        try:
            state = load_state(path) if path.is_file() else None
        except BadInput:  # unreadable: the run records still say how runs ended
            continue
        if state is not None and state.finished:
            ended[state.run_id] = str(state.status)
    for path in sorted(runs_dir.glob("*/result.json")) if runs_dir.is_dir() else []:
        try:
            status = json.loads(path.read_text(encoding="utf-8")).get("status")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(status, str):
            ended[path.parent.name] = status
    return ended


def find(root: Path, runs_dir: Path, execution_dir: Path,
         running: str | None) -> list[LeftoverCheckout]:
    """Every worktree and branch runs left behind, with its run's status."""
    statuses = run_statuses(runs_dir, execution_dir)
    found: dict[str, LeftoverCheckout] = {}  # by branch, or by worktree path when it has none
    for path, branch in _worktrees(root):
        run = _run_of(branch, path, runs_dir)
        if run:
            found[branch or path] = LeftoverCheckout(run, "", branch, path)
    out = gitcli.git("for-each-ref", "--format=%(refname:short)", "refs/heads/agentrun/",
                     cwd=root)
    for branch in out.split():
        match = BRANCH.fullmatch(branch)
        if match and branch not in found:
            found[branch] = LeftoverCheckout(match["run"], "", branch, None)
    for item in found.values():
        item.run_status = RUNNING if item.run_id == running else statuses.get(item.run_id,
                                                                              KILLED)
    return sorted(found.values(), key=lambda i: (i.run_id, i.branch or "", i.worktree or ""))


def decide(item: LeftoverCheckout, *, force: bool) -> bool:
    """Set what happens to `item`; True when it is to be removed."""
    if item.run_status == RUNNING:
        item.action, item.reason = "skipped", "its run is in progress"
        return False
    if is_check_branch(item.branch):  # an integration check's throwaway: never work
        return True
    if item.worktree and Path(item.worktree).is_dir() and _dirty(Path(item.worktree)) \
            and not force:
        item.action, item.reason = "kept", "uncommitted changes in the worktree; --force " \
                                           "removes it"
        return False
    if item.run_status != RunStatus.COMPLETE and not force:
        why = ("the run was killed before it finished: `run --resume` adopts its work"
               if item.run_status == KILLED else f"the run ended {item.run_status}")
        item.action, item.reason = "kept", f"{why}; --force removes it"
        return False
    return True


def remove(root: Path, item: LeftoverCheckout) -> None:
    """Remove the worktree (if any) and the branch (if any)."""
    if item.worktree:
        wt = worktrees.Worktree(Path(item.worktree), item.branch or "", "")
        worktrees.remove_worktree(root, wt, delete_branch=bool(item.branch))
    elif item.branch:
        gitcli.git("branch", "-D", item.branch, cwd=root)


def _worktrees(root: Path) -> list[tuple[str, str | None]]:
    """(path, branch or None) of each linked worktree."""
    items: list[tuple[str, str | None]] = []
    for block in gitcli.git("worktree", "list", "--porcelain", cwd=root).split("\n\n"):
        lines = block.splitlines()
        path = next((ln[9:] for ln in lines if ln.startswith("worktree ")), None)
        branch = next((ln[len("branch refs/heads/"):] for ln in lines
                       if ln.startswith("branch refs/heads/")), None)
        if path:
            items.append((path, branch))
    return items[1:]  # the first is the main worktree


def _run_of(branch: str | None, path: str, runs_dir: Path) -> str | None:
    """The run a worktree belongs to: by its branch's name, or by its folder."""
    match = BRANCH.fullmatch(branch or "")
    if match:
        return match["run"]
    try:
        rel = Path(path).resolve().relative_to(runs_dir.resolve())
    except ValueError:
        return None
    parts = rel.parts
    if len(parts) == 3 and parts[1] == "worktrees" and RUN_ID.fullmatch(parts[0]):
        return parts[0]
    return None


def _dirty(worktree: Path) -> bool:
    return bool(gitcli.git("--no-optional-locks", "status", "--porcelain",
                           cwd=worktree, check=False).strip())
