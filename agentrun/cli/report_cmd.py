"""`agentrun report [RUN]`: the path of a run's HTML report, written from its record when the
run did not write one (a killed run, or one from before reports)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from agentrun.cli.common import JSON_OPT, output

if TYPE_CHECKING:
    from agentrun.project import Project

RUN_ARG = typer.Argument(None, metavar="[RUN]", show_default=False,
                         help="A run id (a folder of .specflow/runs/) or a run's folder "
                              "(default: the last run of the active spec).")


def report(
    run: str | None = RUN_ARG,
    open_it: bool = typer.Option(False, "--open", help="Open the report in a web browser."),
    json_out: bool = JSON_OPT,
) -> None:
    """Print the path of a run's self-contained HTML report (`report.html` in its record):
    its plan, a timeline of the workers, tokens and cost, checks, review and failures."""
    from agentrun import gitcli, workspace
    from agentrun.core.errors import BadInput
    from agentrun.core.events import RunStartEvent
    from agentrun.project import find_project
    from agentrun.report.execution_state import state_path
    from agentrun.report.html import REPORT_FILE, write_report
    from agentrun.report.html_data import read_events
    from agentrun.run.record import control_dir

    out = output(json_out)
    project = find_project()
    if not project.specflow.is_dir():
        raise BadInput(f"no .specflow/ directory at or above {project.root}",
                       hint="run `agentrun init` to create one")
    run_dir = _run_dir(project, run)
    path = run_dir / REPORT_FILE
    if not path.is_file():
        spec = next((e.spec for e in read_events(run_dir / "events.ndjson")
                     if isinstance(e, RunStartEvent)), None)
        try:
            control = control_dir(workspace.repo_root(project.root), run_dir.name)
        except gitcli.GitError:
            control = None
        state_file = state_path(project.execution_dir, spec) if spec else None
        path = write_report(run_dir, control, state_file=state_file,
                            title=_spec_title(project.root, run_dir, state_file))
    opened = _open(path) if open_it else None
    if out.mode == "json":
        out.json({"ok": True, "run_id": run_dir.name, "report": str(path),
                  **({"opened": opened} if open_it else {})})
        return
    print(path)
    if open_it and not opened:
        out.warn("no web browser to open it here (no display); open the file above yourself")


def _run_dir(project: Project, run: str | None) -> Path:
    """The record of run `run` (an id or a folder), or of the active spec's last run."""
    from agentrun.core.errors import BadInput
    from agentrun.project import active_spec_name
    from agentrun.report.execution_state import load_state, state_path
    from agentrun.report.state_md import read_state_md

    runs = project.runs_dir
    hint = f"`agentrun status` names the last run; the runs are in {runs}"
    if run is None:
        spec = active_spec_name(read_state_md(project.state_md))
        state = load_state(state_path(project.execution_dir, spec)) if spec else None
        if state is None:
            raise BadInput(f"no run of {spec} recorded yet" if spec else
                           "no active spec, so no last run to report",
                           hint="name a run: `agentrun report RUN-ID`, or run a spec first")
        run = state.run_id
    given = Path(run)
    folder = given if given.is_dir() else runs / run if "/" not in run else given
    if not ((folder / "events.ndjson").is_file() or (folder / "result.json").is_file()):
        raise BadInput(f"no run {run}: neither a run id under {runs} nor a run's folder",
                       hint=hint)
    return folder.resolve()


def _spec_title(root: Path, run_dir: Path, state_file: Path | None) -> str:
    """The title of the run's spec as it reads now (the report's heading); empty when the
    spec is gone or unreadable: the report is written all the same."""
    from agentrun.core.errors import AgentrunError
    from agentrun.report.html_data import read_state
    from agentrun.spec.parse import load_spec

    state = read_state(run_dir, state_file)
    if state is None or not state.spec_path:
        return ""
    try:
        return load_spec(root / state.spec_path).title
    except AgentrunError:
        return ""


def _open(path: Path) -> bool:
    """Open `path` in a browser where there is one to show it; never a text-mode browser
    taking over the terminal (no display: nothing is started)."""
    graphical = sys.platform in ("darwin", "win32") or any(
        os.environ.get(v) for v in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER"))
    if not graphical:
        return False
    import webbrowser

    try:
        return bool(webbrowser.open(path.as_uri()))
    except webbrowser.Error:
        return False
