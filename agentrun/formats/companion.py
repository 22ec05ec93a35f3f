"""The spec a run of another tool's plan keeps: `.specflow/specs/<id>.md`.

A run writes its Execution Summary, a review its Review History and the spec's status into a
spec file; for a plan in another format that file is this one, never the user's `tasks.md`
(which only gets its checkboxes ticked). It is the plan rendered as a spec, with `source:`
naming the plan, so `agentrun run <id>`, `review <id>` and `status` find the plan again. Each
run brings the rendered sections up to date and keeps what runs and reviews added.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agentrun.core.errors import BadInput, SpecError
from agentrun.core.fsutil import atomic_write_text, read_text_exact, relpath
from agentrun.spec import frontmatter
from agentrun.spec.model import Spec
from agentrun.spec.writeback import set_frontmatter_value, upsert_section
from agentrun.yamlload import safe_load

_BOX = re.compile(r"^(\s*[-*]\s+\[)[xX](\])", re.M)


def companion_path(root: Path, spec_id: str) -> Path:
    return root / ".specflow" / "specs" / f"{spec_id}.md"


def linked_plan(path: Path, root: Path) -> tuple[Path, str] | None:
    """(plan, format) when `path` is the spec a run of a plan keeps."""
    from agentrun.formats import FORMATS

    meta = _meta(path)
    if meta is None:
        return None
    source, fmt = meta.get("source"), meta.get("format")
    if not isinstance(source, str) or fmt not in FORMATS:
        return None
    return (root / source, str(fmt))


def _meta(path: Path) -> dict[str, Any] | None:
    if path.suffix != ".md" or not path.is_file():
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if "source:" not in text[:4000]:
        return None
    try:
        block = frontmatter.locate_dashed(text, str(path))
        meta = safe_load(block.yaml_text) if block is not None else None
    except Exception:  # noqa: BLE001 - not ours to judge here: the native reader reports it
        return None
    return meta if isinstance(meta, dict) else None


def write(spec: Spec, root: Path) -> bool:
    """Create or bring up to date the spec a run of `spec`'s plan keeps; True when the file
    changed. Sections the plan renders are replaced (criteria keep their ticks while their
    text is unchanged); the Execution Summary, Review History and status stay."""
    assert spec.source is not None
    path = spec.path
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        text = set_frontmatter_value(spec.text, "status", "draft")
        atomic_write_text(path, text)
        return True
    old = read_text_exact(path)
    meta = _meta(path) or {}
    if meta.get("source") != spec.source.path:
        raise BadInput(f"{relpath(path)} exists and is not the record of runs of "
                       f"{spec.source.path}",
                       hint="rename or move that spec (or pass the plan with a different "
                            "folder name); agentrun keeps a plan's runs in "
                            f".specflow/specs/{spec.id}.md")
    from agentrun.formats.render import GENERATED

    new = old
    for title in GENERATED:
        wanted = _body(spec.text, title)
        if wanted is None:  # not in the plan's spec (render writes them all): left as it is
            continue
        current = _body(new, title)
        if current is None or _BOX.sub(r"\1 \2", current) != wanted:
            new = upsert_section(new, title, wanted)
    for key in ("title", "format"):
        value = spec.frontmatter.get(key)
        if value is not None and meta.get(key) != value:
            new = set_frontmatter_value(new, key, str(value))
    if new == old:
        return False
    atomic_write_text(path, new)
    return True


def _body(text: str, title: str) -> str | None:
    from agentrun.spec.parse import parse_spec

    try:
        spec = parse_spec(text, "<spec>")
    except SpecError:
        return None
    section = spec.section(title)
    if section is None or section.title.strip().lower() != title.lower():
        return None
    return section.body.strip()
