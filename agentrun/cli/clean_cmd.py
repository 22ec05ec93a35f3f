"""`agentrun clean`: remove the worktrees and branches finished runs left behind."""

from __future__ import annotations

import typer

from agentrun.cli.common import JSON_OPT, output


def clean(
    dry_run: bool = typer.Option(False, "--dry-run", "-n",
                                 help="List what would be removed; remove nothing."),
    force: bool = typer.Option(False, "--force",
                               help="Also remove what failed, interrupted or killed runs kept, "
                                    "and worktrees with uncommitted changes."),
    json_out: bool = JSON_OPT,
) -> None:
    """Remove the worktrees and `agentrun/...` branches of finished runs.

    A complete run's leftovers are removed; a run that failed, was interrupted or was killed
    kept its worktrees for inspection or `run --resume`: those go only with --force, as do
    worktrees with uncommitted changes. The run in progress (holding the run lock) and
    anything agentrun did not create are never touched.
    """
    from rich.markup import escape

    from agentrun import workspace
    from agentrun.core.errors import CannotStart
    from agentrun.project import find_project
    from agentrun.run import cleanup, leftovers

    out = output(json_out)
    project = find_project()
    root = workspace.repo_root(project.root)
    lock = workspace.RunLock(root, "clean")
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
            except workspace.GitError as exc:
                item.action, item.reason = "kept", f"could not remove it: {exc}"
        if not dry_run:  # killed runs' scaffolding: space reserves, folders set aside, HOMEs
            leftovers.sweep(root, project.runs_dir, running)
    finally:
        lock.release()
    if out.mode == "json":
        out.json({"ok": True, "dry_run": dry_run, "items": [i.to_dict() for i in items]})
        return
    console = out.stdout
    if not items:
        console.print("Nothing to clean: no worktree or branch of a run is left.")
    for item in items:
        what = " · ".join(x for x in (item.branch, item.worktree) if x)
        line = f"{item.action}: {escape(what)} (run {item.run_id}, {item.run_status})"
        console.print(line + (f" — {escape(item.reason)}" if item.reason else ""))
