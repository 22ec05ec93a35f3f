"""The `clean` use case: remove what finished runs left (their worktrees and `agentrun/...`
branches, run/cleanup.py) and the scaffolding of killed ones (run/leftovers.py), under the
run lock so that a run in progress is never touched."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentrun.run.cleanup import LeftoverCheckout


def clean(*, dry_run: bool, force: bool) -> list[LeftoverCheckout]:
    """Every leftover found, each with what was done to it (`action`, and `reason` when it
    was kept). A dry run removes nothing, and lists even while a run holds the lock."""
    from agentrun import gitcli, gitlock, workspace
    from agentrun.core.errors import CannotStart
    from agentrun.project import find_project
    from agentrun.run import cleanup, leftovers

    project = find_project()
    root = workspace.repo_root(project.root)
    lock = gitlock.RunLock(root, "clean")
    running = None
    try:
        lock.acquire()
    except CannotStart as exc:
        if not dry_run:
            raise
        running = cleanup.lock_holder(lock.path) or exc.message
    try:
        items = cleanup.find(root, project.runs_dir, project.execution_dir, running)
        for item in items:
            if not cleanup.decide(item, force=force):
                continue
            if dry_run:
                item.action = "would remove"
                continue
            try:
                cleanup.remove(root, item)
                item.action = "removed"
            except gitcli.GitError as exc:
                item.action, item.reason = "kept", f"could not remove it: {exc}"
        if not dry_run:  # killed runs' scaffolding: space reserves, folders set aside, HOMEs
            leftovers.sweep(root, project.runs_dir, running)
    finally:
        lock.release()
    return items
