"""Plans written for other spec-driven tools, run as they are: GitHub spec-kit and Kiro (and
cc-sdd) `tasks.md`, GSD `PLAN.md` files and phase folders, Taskmaster `tasks.json`.

Each format has a module that reads its files into `Imported` (groups with the format's own
dependencies, context, checks and criteria) and knows how to tick its tasks. `load` finds the
format from the content (or takes `--format`) and returns the same `Spec` a native spec parses
into, with `Spec.source` naming the plan. docs/formats.md says how each format maps.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Protocol

from agentrun.core.errors import BadInput, SpecError
from agentrun.core.fsutil import relpath
from agentrun.formats.model import Imported
from agentrun.spec.model import SourceRef, Spec, TaskGroup

FORMATS = ("speckit", "kiro", "gsd", "taskmaster")
CHOICES = ("native", *FORMATS)


class Reader(Protocol):
    NAME: str

    def detect(self, text: str) -> bool: ...

    def read(self, path: Path, text: str, spec_id: str) -> Imported: ...


def reader(name: str) -> Reader:
    from agentrun.formats import gsd, kiro, speckit, taskmaster

    readers: dict[str, Reader] = {"speckit": speckit, "kiro": kiro, "gsd": gsd,
                                  "taskmaster": taskmaster}
    return readers[name]


def check_choice(fmt: str | None) -> str | None:
    if fmt is not None and fmt not in CHOICES:
        raise BadInput(f"invalid --format {fmt!r}", hint=f"use one of: {', '.join(CHOICES)}")
    return fmt


def detect(path: Path, text: str | None) -> str | None:
    """The format a file or folder is written in; None for a native spec. A folder holding
    GSD plans is a GSD phase. A checklist that has a native spec's sections (`## Task`,
    `## Acceptance Criteria`, `## Implementation Tasks`) is a native spec."""
    if path.is_dir():
        from agentrun.formats.gsd import plan_files

        return "gsd" if plan_files(path) else None
    if text is None:
        return None
    for name in ("taskmaster", "gsd", "speckit", "kiro"):  # the most telling marks first
        if reader(name).detect(text):
            return None if name in ("speckit", "kiro") and _NATIVE.search(text) else name
    return None


_NATIVE = re.compile(r"(?im)^##[ \t]+(?:\d+[.)]?[ \t]*)?(?:task|acceptance criteria|"
                     r"implementation tasks|task groups)[ \t]*:?[ \t]*$")


def spec_id_for(fmt: str, path: Path) -> str:
    """The spec id of a plan: its format and feature folder (`speckit-001-photo-albums`), the
    GSD phase folder or plan (`gsd-01-foundation`, `gsd-01-02`), `taskmaster`."""
    if fmt == "taskmaster":
        base = ""
    elif fmt == "gsd" and not path.is_dir():
        from agentrun.formats.gsd import PLAN_FILE

        m = PLAN_FILE.match(path.name)
        base = f"{m.group(1)}-{m.group(2)}" if m else path.stem
    else:
        base = path.name if path.is_dir() else path.resolve().parent.name
    name = f"{fmt}-{base}" if base else fmt
    return re.sub(r"-{2,}", "-", re.sub(r"[^A-Za-z0-9._-]", "-", name)).strip("-.")


def read_plan(path: Path, fmt: str) -> Imported:
    """Read the plan at `path` (a file, or a GSD phase folder) in format `fmt`."""
    spec_id = spec_id_for(fmt, path)
    if fmt == "gsd":
        from agentrun.formats.gsd import read_paths

        return read_paths(path, spec_id)
    if path.is_dir():
        raise SpecError(f"{path} is a directory; the {fmt} format reads one file",
                        "pass the plan file", path=str(path))
    return reader(fmt).read(path, read_text(path), spec_id)


def read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SpecError(f"cannot read {path}: {exc.strerror or exc}", "check the file",
                        path=str(path)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path} is not valid UTF-8 (offset {exc.start})",
                        "save the plan as UTF-8 text", path=str(path)) from None


def to_spec(imported: Imported, root: Path) -> Spec:
    """The spec a run of the plan uses: sections and criteria as `render` writes them, the
    groups exactly as the format reads them. Its path is where a run keeps its record."""
    from agentrun.formats.companion import companion_path
    from agentrun.formats.render import render
    from agentrun.spec.parse import parse_spec

    source = relpath(imported.origin, root)
    path = companion_path(root, imported.spec_id)
    # the sections and criteria as a spec reads them; the groups come from the plan itself
    spec = parse_spec(render(imported, source, groups=False), path)
    spec.text = render(imported, source)
    spec.groups = [TaskGroup(id=u.gid, title=u.title, tasks=list(u.tasks),
                             dependencies=list(u.deps), files=list(u.files),
                             declared_wave=u.wave, line=u.line, source_ids=list(u.source_ids),
                             context=u.context, checks=list(u.checks))
                   for u in imported.units]
    spec.declared_waves = {u.gid: u.wave for u in imported.units if u.wave is not None}
    spec.source = SourceRef(format=imported.format, path=source,
                            files=[relpath(f, root) for f in imported.files],
                            containers=dict(imported.containers),
                            done={u.gid: u.status or "done" for u in imported.units if u.done})
    return spec


def load(path: Path, root: Path, fmt: str | None = None) -> tuple[Spec, Imported | None]:
    """The spec at `path` in any format, and the `Imported` plan (None for a native spec).

    The spec a run of a plan keeps (frontmatter `source:`) stands for that plan."""
    from agentrun.formats.companion import linked_plan
    from agentrun.spec import load_spec

    check_choice(fmt)
    if fmt == "native":
        return load_spec(path), None
    if fmt is None:
        linked = linked_plan(path, root)
        if linked is not None:
            path, fmt = linked
        else:
            fmt = detect(path, _maybe_text(path) if path.is_file() else None)
    if fmt is None:
        return load_spec(path), None
    if not path.exists():
        raise SpecError(f"plan not found: {path}", "check the path", path=str(path))
    imported = read_plan(path, fmt)
    return to_spec(imported, root), imported


def _maybe_text(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
