"""The packaged spec template (`agentrun new`), and what of it is only placeholder text.

A spec created from the template and run as it stands would have workers build the template's
example files; the static audit uses `placeholders` to say which parts still need writing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import date
from functools import cache
from pathlib import Path

from agentrun.spec.parse import parse_spec

TEMPLATE = Path(__file__).resolve().parent.parent / "templates" / "spec.md"
PROSE_SECTIONS = ("Context", "Task", "Requirements")  # what the writer must put in words


def render(spec_id: str, title: str) -> str:
    """The template's text for a new spec."""
    values = {"{id}": spec_id, "{title}": title, "{date}": date.today().isoformat(),
              "{title_yaml}": json.dumps(title, ensure_ascii=False)}
    text = TEMPLATE.read_text(encoding="utf-8")
    return re.sub(r"\{(?:id|title|date|title_yaml)\}", lambda m: values[m.group(0)], text)


@dataclass(frozen=True)
class Placeholders:
    prose: dict[str, tuple[str, ...]]  # section title -> its placeholder paragraphs
    files: tuple[str, ...]  # the example files the template names


def paragraphs(body: str) -> list[str]:
    """A section body's paragraphs, whitespace collapsed, without subsection headings."""
    text = "\n".join(line for line in body.splitlines() if not line.lstrip().startswith("#"))
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip()]


@cache
def placeholders() -> Placeholders:
    spec = parse_spec(render("SPEC-0", "Title"), TEMPLATE)
    prose = {title: tuple(p for p in paragraphs(section.body) if not p.startswith("- "))
             for title in PROSE_SECTIONS if (section := spec.section(title)) is not None}
    return Placeholders(prose, tuple(dict.fromkeys([*spec.files_to_create,
                                                    *spec.files_to_modify])))
