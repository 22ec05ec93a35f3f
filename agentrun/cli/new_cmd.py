"""`agentrun new "Title"`: the next free SPEC-NNN from the packaged template, made active."""

from __future__ import annotations

import os
import re
from pathlib import Path

import typer

from agentrun.cli.common import JSON_OPT, output, relpath
from agentrun.core.errors import NOT_WRITABLE_ERRNOS, cannot_write

_NUMBERED = re.compile(r"^SPEC-(\d+)", re.I)
MIN_WIDTH = 3  # SPEC-001


def new(
    title: str = typer.Argument(..., help="The spec's title, e.g. \"Add CSV export\"."),
    json_out: bool = JSON_OPT,
) -> None:
    """Create .specflow/specs/SPEC-NNN.md (next free number) from a template and make it the
    active specification in STATE.md."""
    from agentrun.core.errors import BadInput, CannotStart
    from agentrun.project import find_project

    out = output(json_out)
    title = " ".join(title.split())
    if not title:
        raise BadInput("the title is empty", hint='pass one, e.g. `agentrun new "Add CSV export"`')
    project = find_project(Path.cwd())
    if not project.specflow.is_dir():
        raise CannotStart(f"no .specflow/ directory at or above {project.root}",
                          hint="run `agentrun init` first")
    spec_id, path = create_spec(project.specflow, title)
    _make_active(project.state_md, spec_id, path.relative_to(project.root))
    rel = str(path.relative_to(project.root))
    if out.mode == "json":
        out.json({"ok": True, "id": spec_id, "path": rel})
        return
    out.stdout.print(f"created {rel} ({spec_id}, now the active specification)")
    out.stdout.print(f"Next: fill in {rel}, then `agentrun audit --static` and `agentrun plan`.")


def used_numbers(specflow: Path) -> tuple[set[int], int]:
    """The SPEC numbers taken by files under specs/ and archive/ (any depth), and the widest
    zero-padding among them, so new ids look like the existing ones."""
    numbers, width = set(), MIN_WIDTH
    for folder in (specflow / "specs", specflow / "archive"):
        if not folder.is_dir():
            continue
        for path in folder.rglob("*.md"):
            match = _NUMBERED.match(path.name)
            if match:
                numbers.add(int(match.group(1)))
                width = max(width, len(match.group(1)))
    return numbers, width


def create_spec(specflow: Path, title: str) -> tuple[str, Path]:
    """Write the spec under the next free number; never replaces a file (a name taken in the
    meantime moves on to the next number)."""
    from agentrun.spec.template import render  # the spec parser: not on `--help`'s path

    numbers, width = used_numbers(specflow)
    number = max(numbers, default=0) + 1
    specs = specflow / "specs"
    specs.mkdir(parents=True, exist_ok=True)
    while True:
        spec_id = f"SPEC-{number:0{width}d}"
        target = specs / f"{spec_id}.md"
        tmp = specs / f".{spec_id}.md.{os.getpid()}.tmp"
        try:
            tmp.write_text(render(spec_id, title), encoding="utf-8")
        except OSError as exc:  # a read-only checkout: name the spec, not the temp file
            if exc.errno not in NOT_WRITABLE_ERRNOS:
                raise
            raise cannot_write(relpath(target), exc.errno) from None
        try:
            os.link(tmp, target)  # fails if the name exists: no overwrite, no half file
        except FileExistsError:
            number += 1
            continue
        finally:
            tmp.unlink(missing_ok=True)
        return spec_id, target


def _make_active(state_md: Path, spec_id: str, rel: Path) -> None:
    from agentrun.report.state_md import StateUpdate, update_state_file

    update_state_file(state_md, StateUpdate(
        spec_id=spec_id, status="draft",
        next_step=f"fill in {rel.as_posix()}, then `agentrun audit --static`"))
