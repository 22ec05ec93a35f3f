"""The project and spec a command works on, and the settings of a run it continues."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from agentrun.core.fsutil import relpath

if TYPE_CHECKING:
    from agentrun.project import Project
    from agentrun.spec.model import Spec


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


def pin_to_last_run(project: Project, spec: Spec, warn: Callable[[str], None],
                    command: str) -> Project:
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
        warn(f"{CONFIG_FILE} differs from the settings run {state.run_id} started with "
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
