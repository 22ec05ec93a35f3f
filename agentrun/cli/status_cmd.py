"""`agentrun status`: the active spec, its last run and per-group results."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from agentrun.cli.common import JSON_OPT, output

if TYPE_CHECKING:
    from rich.console import Console

    from agentrun.project import Project
    from agentrun.report.execution_state import RunState


def status(
    spec: str | None = typer.Argument(None, metavar="[SPEC]", show_default=False,
                                      help="Spec file or id (default: the active spec)."),
    json_out: bool = JSON_OPT,
) -> None:
    """Show the active spec, the last run and its per-group results."""
    from rich.markup import escape

    out = output(json_out)
    project, active, spec_id, state, orphaned = _last_run(spec)
    if out.mode == "json":
        out.json({"ok": True, "project": str(project.root), "active_spec": active,
                  "spec": spec_id, "last_run": state.to_dict() if state else None})
        return
    console = out.stdout
    console.print(f"Project: {escape(str(project.root))}")
    console.print(f"Active specification: {escape(active or 'none')}")
    if not spec_id:
        return
    if state is None:
        console.print(f"{escape(spec_id)}: no run recorded yet "
                      f"(run `agentrun run {escape(spec_id)}`)")
        return
    _print_run(console, spec_id, state, orphaned)


def _last_run(spec: str | None
              ) -> tuple[Project, str | None, str | None, RunState | None, bool]:
    """The project, its active spec, the spec asked about and its last run's state (a run
    killed before it recorded its end reads as interrupted, with a warning saying so)."""
    from agentrun.core.errors import BadInput
    from agentrun.core.status import RunStatus
    from agentrun.project import active_spec_name, find_project
    from agentrun.report.execution_state import load_state, state_path
    from agentrun.report.state_md import read_state_md

    project = find_project()
    if not project.specflow.is_dir():
        raise BadInput(f"no .specflow/ directory at or above {project.root}",
                       hint="run `agentrun init` to create one")
    active = active_spec_name(read_state_md(project.state_md))
    spec_id = spec or active
    if spec_id and spec_id.endswith(".md"):
        spec_id = spec_id.rsplit("/", 1)[-1][:-3]
    state = load_state(state_path(project.execution_dir, spec_id)) if spec_id else None
    if spec is not None and state is None and not project.resolve_spec(spec).exists():
        _unknown(project, spec)
    orphaned = state is not None and state.orphaned
    if state is not None and orphaned:  # killed before it could record its end
        state.status = RunStatus.INTERRUPTED
        state.warnings.append(f"the process that ran {state.run_id} is gone without recording "
                              f"how the run ended (killed): `agentrun run {spec_id} --resume` "
                              "continues it")
    return project, active, spec_id, state, orphaned


def _print_run(console: Console, spec_id: str, state: RunState, orphaned: bool) -> None:
    """The last run: its status, a table of its groups, tokens, cost and review."""
    from rich.markup import escape
    from rich.table import Table

    from agentrun.report.summary import STATUS_MARK, format_cost, kept_worktrees, review_words

    console.print(f"Last run of {escape(spec_id)}: {state.run_id} — [bold]{state.status}"
                  f"[/bold] ({state.mode}, started {state.started}, finished "
                  f"{state.finished or '—'})")
    if orphaned:
        console.print(escape(state.warnings[-1]))
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("Group", "Wave", "Status", "Commits", "Attempts", "Tokens", "Note"):
        table.add_column(col)
    for g in state.groups.values():
        note = (g.error or g.summary or "").splitlines()[0][:70] if (g.error or g.summary) \
            else ""
        table.add_row(g.id, g.wave, STATUS_MARK.get(g.status, g.status), str(len(g.commits)),
                      str(g.attempts), f"{g.usage.total:,}", escape(note))
    console.print(table)
    console.print(f"Tokens: {state.usage.total:,} · cost {format_cost(state.cost_usd)}")
    console.print(f"Review: {escape(review_words(state))}")  # the latest, from the run record
    for ids, path, _ in kept_worktrees(state.groups.values()):
        console.print(f"Kept worktree for {', '.join(ids)}: {escape(path)}")


def _unknown(project: Project, given: str) -> None:
    """A SPEC argument that names neither a spec nor a recorded run is bad input (exit 2),
    naming the spec meant when one is close."""
    from agentrun.cli.common import relpath, suggest_spec
    from agentrun.core.errors import SpecError

    suggest_spec(project.specs_dir, given)
    raise SpecError(f"spec not found: {given}",
                    hint=f"the specs are in {relpath(project.specs_dir)}; `agentrun status` "
                         "alone shows the active one")
