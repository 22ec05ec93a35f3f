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

    from agentrun.app.clean import clean as clean_up

    out = output(json_out)
    items = clean_up(dry_run=dry_run, force=force)
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
