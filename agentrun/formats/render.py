"""A read plan written as an agentrun spec: what `agentrun import` writes, and the spec a run
of the plan keeps its summary and review history in (`.specflow/specs/<id>.md`).

The native task-group notation holds one line per task, so multi-line task text (a GSD
`<action>`, a Taskmaster `details`) is written on one line; a run of the plan itself hands
each worker the text exactly as the plan has it.
"""

from __future__ import annotations

import re

import yaml

from agentrun.formats.model import Imported, Unit

FORMAT_NAMES = {"speckit": "spec-kit", "kiro": "Kiro", "gsd": "GSD",
                "taskmaster": "Taskmaster"}
_BLOCK_START = re.compile(r"^(?:[-*+>#|]|\d+[.)]|=+$|`{3,}|~{3,})")
GENERATED = ("Context", "Task", "Requirements", "Acceptance Criteria", "Constraints",
             "Implementation Tasks")


def criteria(imported: Imported) -> list[str]:
    """The plan's acceptance lines; without any, each group done as written."""
    if imported.criteria:
        return [one_line(c) for c in imported.criteria]
    return [f"{u.title}: done as the plan describes" for u in imported.units]


def render(imported: Imported, source: str, *, link: str = "source",
           groups: bool = True) -> str:
    """The spec text. `link` is the frontmatter key naming the plan: `source` for the spec a
    run keeps (agentrun reads the plan again), `imported_from` for an import (it stands
    alone). Without `groups`, all but the Implementation Tasks section."""
    lines = ["---", f"id: {imported.spec_id}", f"title: {_double_quoted(imported.title)}",
             "type: feature", f"{link}: {_double_quoted(source)}",
             f"format: {imported.format}", "---", "", f"# {one_line(imported.title)}", ""]
    for title, body in sections(imported, source).items():
        if groups or title != "Implementation Tasks":
            lines += [f"## {title}", "", body.rstrip(), ""]
    return "\n".join(lines)


def sections(imported: Imported, source: str) -> dict[str, str]:
    name = FORMAT_NAMES.get(imported.format, imported.format)
    context = imported.context.strip() or f"A {name} plan."
    return {
        "Context": f"{context}\n\nRead from the {name} plan `{source}`.",
        "Task": (f"Carry out the {name} plan `{source}`: every task group below, in the order "
                 "their dependencies allow. Each group's tasks are the plan's own text."),
        "Requirements": imported.requirements.strip()
        or "The tasks below, as the plan words them.",
        "Acceptance Criteria": "\n".join(f"- [ ] {c}" for c in criteria(imported)),
        "Constraints": "- Change only what the tasks ask for.",
        "Implementation Tasks": "\n\n".join(group(u) for u in imported.units),  # last
    }


def group(unit: Unit) -> str:
    lines = [f"### {unit.gid}: {one_line(unit.title)}", ""]
    lines.append(f"Depends on: {', '.join(unit.deps) if unit.deps else '—'}")
    if unit.files:
        lines.append("Files: " + ", ".join(f"`{f}`" for f in unit.files))
    lines.append(f"Source: {', '.join(unit.source_ids)}")
    lines.append("")
    lines += [f"- {bullet(t)}" for t in unit.tasks]
    lines += [f"- Check: {bullet(c)}" for c in unit.checks]
    if unit.context.strip():
        lines.append(f"- Context: {bullet(unit.context)}")
    return "\n".join(lines)


def _double_quoted(value: str) -> str:
    return yaml.safe_dump(value, default_style='"', allow_unicode=True, width=1 << 30).strip()


def one_line(text: str) -> str:
    return " ".join(text.split())


def bullet(text: str) -> str:
    """Text on one line that stays one list item's text."""
    flat = one_line(text)
    return "\\" + flat if _BLOCK_START.match(flat) else flat
