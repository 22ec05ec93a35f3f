"""After a run: the plan's own file says which of its tasks landed, in its own notation.

spec-kit and Kiro tick the task's checkbox (`[X]` as spec-kit's implement command writes it,
`[x]` as Kiro does), and a Kiro task with sub-tasks once all of them are ticked; GSD ticks the
plan's line in `.planning/ROADMAP.md`; Taskmaster sets `"status": "done"` on the task and its
sub-tasks. Only the groups that landed are marked. The file is read again right before the
write (a person may have edited it meanwhile), tasks are found by id, every other byte stays,
and the write is atomic.
"""

from __future__ import annotations

import re
from pathlib import Path

from agentrun.core.fsutil import atomic_write_text, read_text_exact
from agentrun.formats import gsd, kiro, speckit
from agentrun.formats.jsonspan import JsonSpanError, ObjectSpan, parse
from agentrun.formats.text import CheckboxItem, checklist, tick_lines
from agentrun.spec.model import Spec


def write_back(spec: Spec, root: Path, landed: list[str]) -> list[Path]:
    """Mark the tasks of the `landed` groups done in the plan's files; the files changed."""
    source = spec.source
    if source is None or not landed:
        return []
    ids = [sid for g in spec.groups if g.id in landed for sid in g.source_ids]
    if not ids:
        return []
    if source.format == "gsd":
        plans = [root / f for f in source.files if gsd.PLAN_FILE.match(Path(f).name)]
        roadmap = gsd.roadmap_path(plans[0]) if plans else None
        targets = [(roadmap, lambda t: _roadmap(t, ids))] if roadmap else []
    else:
        path = root / source.path
        edit = {"speckit": lambda t: _checklist(t, ids, speckit.TASK, "X", {}),
                "kiro": lambda t: _checklist(t, ids, kiro.NUMBERED, "x", source.containers),
                "taskmaster": lambda t: _taskmaster(t, ids)}[source.format]
        targets = [(path, edit)]
    changed: list[Path] = []
    for path, edit in targets:
        try:
            text = read_text_exact(path)
        except (OSError, UnicodeDecodeError):
            continue  # the plan is gone or unreadable now: nothing to mark
        new = edit(text)
        if new != text:
            atomic_write_text(path, new)
            changed.append(path)
    return changed


def _checklist(text: str, ids: list[str], pattern: re.Pattern[str], mark: str,
               containers: dict[str, list[str]]) -> str:
    items = checklist(text).items
    by_id: dict[str, CheckboxItem] = {}
    for item in items:
        m = pattern.match(item.head)
        if m:
            by_id.setdefault(m.group(1), item)
    done = {tid for tid, item in by_id.items() if item.checked} | set(ids)
    wanted = set(ids) | {parent for parent, children in containers.items()
                         if children and all(c in done for c in children)}
    hits = [by_id[t] for t in wanted if t in by_id and not by_id[t].checked]
    hits.sort(key=lambda i: i.line)
    return tick_lines(text, [i.line for i in hits], [i.box for i in hits], mark)


def _roadmap(text: str, ids: list[str]) -> str:
    plans = {i for i in ids if "#" not in i}
    lines: list[int] = []
    boxes: list[int] = []
    for n, line in enumerate(re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z", text)):
        for plan in plans:
            m = re.match(gsd.ROADMAP_LINE.format(id=re.escape(plan)), line)
            if m and m.group(1) == " ":
                lines.append(n)
                boxes.append(m.start(1))
    return tick_lines(text, lines, boxes, "x")


def _taskmaster(text: str, ids: list[str]) -> str:
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    try:
        data, spans = parse(text[len(bom):])
    except JsonSpanError:
        return text
    from agentrun.formats.taskmaster import tag_lists

    tags = tag_lists(data)
    many = len(tags) > 1
    wanted = set(ids)
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement) in the body
    body = text[len(bom):]
    for tag, holder in tags:
        prefix = f"{tag}:" if many else ""
        for task in holder["tasks"]:
            if not isinstance(task, dict):
                continue
            tid = f"{prefix}{task.get('id')}"
            objects = [(tid, task)] + [(f"{tid}.{s.get('id')}", s) for s in
                                       task.get("subtasks") or [] if isinstance(s, dict)]
            for sid, obj in objects:
                if sid in wanted and obj.get("status") != "done":
                    edits.append(_status_edit(body, spans[id(obj)]))
    for start, end, replacement in sorted(edits, reverse=True):
        body = body[:start] + replacement + body[end:]
    return bom + body


def _status_edit(body: str, span: ObjectSpan) -> tuple[int, int, str]:
    if "status" in span.values:
        start, end = span.values["status"]
        return start, end, '"done"'
    if span.last_value_end < 0:  # an empty object
        return span.start + 1, span.end - 1, '"status": "done"'
    line_start = body.rfind("\n", 0, span.last_value_end) + 1
    line = body[line_start:]
    indent = line[:len(line) - len(line.lstrip(" \t"))]
    return span.last_value_end, span.last_value_end, f',\n{indent}"status": "done"'
