"""Helpers shared by command modules: loading the project and spec, common options."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import typer

from agentrun.cli.output import Output, detect_mode
from agentrun.core.fsutil import relpath

if TYPE_CHECKING:
    from agentrun.project import Project
    from agentrun.spec.model import Spec

SPEC_ARG = typer.Argument(None, metavar="[SPEC]", show_default=False,
                          help="Spec file or id (default: the active spec in .specflow/STATE.md).")
__all__ = ["CHANGED_OPT", "FORMAT_OPT", "JSON_OPT", "SPEC_ARG", "Mode", "kept_lines", "load",
           "output", "pin_to_last_run", "relpath"]
Mode = Literal["single", "orchestrated"]  # `--mode`: help lists the values, typer checks them

JSON_OPT = typer.Option(False, "--json", help="Print one JSON document on stdout.")
FORMAT_OPT = typer.Option(
    None, "--format", metavar="native|speckit|kiro|gsd|taskmaster",
    help="The plan's format (default: found from its content; see docs/formats.md).")
CHANGED_OPT = typer.Option(
    False, "--changed",
    help="Only the groups whose tasks, files or dependencies changed since they last "
         "landed, and the groups that depend on them; the others are kept.")


def output(json_flag: bool, events: str | None = None) -> Output:
    """The command's output; `events`: its `--events` target (`-` takes stderr)."""
    return Output(detect_mode(json_flag), events_on_stderr=events == "-")


def load(spec_arg: str | None, *, names_paths: bool = True, fmt: str | None = None,
         changed: bool = False) -> tuple[Project, Spec]:
    """The project and parsed spec a command works on; errors are SpecError/BadInput.

    The spec may be a plan in another tool's format (agentrun/formats/: detected, or `fmt`);
    its groups the plan marks done are left out, as are, with `changed`, the groups that
    did not change since they last landed (they are listed in `Spec.kept`).

    `names_paths`: the command uses the spec id in file names or branches, so an id that
    could leave the repository (`../../x`) is refused here, before anything is written.
    """
    from agentrun.formats import load as load_any
    from agentrun.project import project_for_spec
    from agentrun.spec.ids import require_safe_id

    project, path = project_for_spec(spec_arg)
    if spec_arg is not None and not path.exists():
        suggest_spec(project.specs_dir, spec_arg)
    spec, _ = load_any(path, project.root, fmt)
    if changed or spec.source is not None:
        from agentrun.formats.living import select

        spec = select(spec, project.execution_dir, changed=changed)
    return project, require_safe_id(spec) if names_paths else spec


def pin_to_last_run(project: Project, spec: Spec, out: Output, command: str) -> Project:
    """The project as the spec's last run fixed it when it started (its config, agents and
    prompts; see project.py), for a command that continues that run. Unchanged when the spec
    has no run yet (the command then says so itself)."""
    from agentrun.config import CONFIG_FILE
    from agentrun.report.execution_state import load_state, state_path

    state = load_state(state_path(project.execution_dir, spec.id))
    if state is None:
        return project
    start = state.start_commit or state.base_commit
    pinned = project.pinned(start, state.config)
    if pinned.config.model_dump() != project.config.model_dump():
        out.warn(f"{CONFIG_FILE} differs from the settings run {state.run_id} started with "
                 f"(at {start[:12]}); {command} keeps the run's settings — start a new run to "
                 "use the changed file")
    return pinned


def suggest_spec(specs_dir: Path, given: str) -> None:
    """A misspelt spec id or path is bad input that names the spec meant, when one is close."""
    import difflib

    from agentrun.core.errors import SpecError

    names = sorted(p.stem for p in specs_dir.glob("*.md")) if specs_dir.is_dir() else []
    stem = Path(given).name.removesuffix(".md")
    close = difflib.get_close_matches(stem, names, n=1, cutoff=0.6) or \
        difflib.get_close_matches(stem.upper(), [n.upper() for n in names], n=1, cutoff=0.6)
    if not close:
        return
    meant = next(n for n in names if n.upper() == close[0].upper())
    raise SpecError(f"spec not found: {given}",
                    hint=f"did you mean {meant}? ({relpath(specs_dir / (meant + '.md'))})")


def kept_lines(spec: Spec) -> list[str]:
    """One line per group the run leaves as it is, and one naming the plan it was read from."""
    from agentrun.formats.render import FORMAT_NAMES

    lines = []
    if spec.source is not None:
        lines.append(f"Plan: {FORMAT_NAMES.get(spec.source.format, spec.source.format)} "
                     f"{spec.source.path} (record: {relpath(spec.path)})")
    for k in spec.kept:
        ids = f" ({', '.join(k.source_ids)})" if k.source_ids else ""
        lines.append(f"Kept: {k.id}{ids} — {k.reason}")
    return lines


def groups_doc(spec: Spec) -> dict[str, Any]:
    """`plan --json`'s account of every group: the ones planned, with the source task ids
    each holds, and the kept ones."""
    from dataclasses import asdict

    return {
        "groups": [{"id": g.id, "title": g.title, "source_ids": g.source_ids,
                    "dependencies": g.dependencies, "files": g.files, "checks": g.checks}
                   for g in spec.groups],
        "kept": [asdict(k) for k in spec.kept],
        "source": asdict(spec.source) if spec.source is not None else None,
    }
