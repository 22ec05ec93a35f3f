"""STATE.md: the project's position, execution status and warnings.

The orchestrator is the single writer. Only three sections are touched — Current Position,
Execution Status, Warnings — plus the Status cell of the spec's Queue row, which follows Current
Position; every other byte of the file stays as it was.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from agentrun.core.errors import BadInput
from agentrun.core.fsutil import atomic_write_text, read_text_exact
from agentrun.report.escape import inline

TEMPLATE = """# SpecFlow State

## Current Position

- **Active Specification:** none
- **Status:** idle
- **Next Step:** write a spec in .specflow/specs/ and run `agentrun audit`

## Execution Status

| Spec | Run | Mode | Progress | Updated |
|------|-----|------|----------|---------|

## Warnings

| Date | Specification | Warning |
|------|---------------|---------|
"""

EXECUTION_HEADER = ["Spec", "Run", "Mode", "Progress", "Updated"]
WARNINGS_HEADER = ["Date", "Specification", "Warning"]
MAX_WARNINGS = 10  # rows kept in the Warnings table: the most recent distinct warnings


@dataclass
class StateUpdate:
    spec_id: str
    status: str | None = None  # Current Position status (running, review, failed, ...)
    next_step: str | None = None
    run_id: str | None = None
    mode: str | None = None
    progress: str | None = None  # "Wave 2/3 (67%)", "Complete", "Failed (Wave 2)"
    warnings: list[str] = field(default_factory=list)
    when: str = ""  # "2026-11-21 23:10"


def apply_update(text: str, update: StateUpdate) -> str:
    """Return STATE.md text with the update applied; untouched sections keep every byte."""
    nl = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines(keepends=True)
    position = {"Active Specification": update.spec_id}
    if update.status:
        position["Status"] = update.status
    if update.next_step:
        position["Next Step"] = update.next_step
    lines = _update_position(lines, position, nl)
    if update.status:
        lines = _update_queue_status(lines, update.spec_id, update.status)
    if update.progress:
        row = {"spec": update.spec_id, "run": update.run_id or "", "mode": update.mode or "",
               "progress": update.progress, "updated": update.when}
        lines = _upsert_row(lines, "Execution Status", EXECUTION_HEADER, row, key=update.spec_id,
                            nl=nl)
    for warning in update.warnings:
        row = {"updated": update.when, "spec": update.spec_id, "warning": warning}
        lines = _upsert_row(lines, "Warnings", WARNINGS_HEADER, row, key=None, nl=nl)
    if update.warnings:
        lines = _prune_warnings(lines)
    return "".join(lines)


def _table_rows(lines: list[str], section: str) -> list[int] | None:
    """The line numbers of the table in `section` (header, separator, rows), or None when
    the section has no table with a row."""
    bounds = _section_bounds(lines, section)
    if bounds is None:
        return None
    table = [i for i in range(bounds[0] + 1, bounds[1]) if lines[i].lstrip().startswith("|")]
    return table if len(table) >= 3 else None


def _prune_warnings(lines: list[str]) -> list[str]:
    """One row per distinct warning (the same text for the same spec), the latest one, and
    only the `MAX_WARNINGS` most recent: repeated runs must not grow the table without end."""
    table = _table_rows(lines, "Warnings")
    if table is None:
        return lines
    dated = {n for n, col in enumerate(_cells(lines[table[0]])) if _column_key(col) == "updated"}
    seen: set[tuple[str, ...]] = set()
    keep: list[int] = []
    for i in reversed(table[2:]):  # newest rows are at the bottom
        key = tuple(c for n, c in enumerate(_cells(lines[i])) if n not in dated)
        if key not in seen and len(keep) < MAX_WARNINGS:
            seen.add(key)
            keep.append(i)
    drop = set(table[2:]) - set(keep)
    return [line for i, line in enumerate(lines) if i not in drop]


def read_state_md(path: Path) -> str:
    """STATE.md's text ("" when absent); a file that is not UTF-8 is bad input, since a run
    that rewrites it must not guess at bytes that are not its own."""
    if not path.is_file():
        return ""
    try:
        return read_text_exact(path)
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path} is not UTF-8 text (byte {exc.start} cannot be decoded)",
                       hint="save it as UTF-8 (e.g. `iconv -f latin1 -t utf-8`), or remove it "
                            "and let the next run recreate it") from None


def update_state_file(path: Path, update: StateUpdate) -> None:
    """Apply an update to STATE.md on disk, creating it from the template if absent."""
    text = read_state_md(path) if path.exists() else TEMPLATE
    new = apply_update(text, update)
    if new != text or not path.exists():
        atomic_write_text(path, new)


def _section_bounds(lines: list[str], title: str) -> tuple[int, int] | None:
    """(heading index, end index) of `## title`, ignoring headings inside code fences."""
    start = None
    fence = False
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            fence = not fence
            continue
        if fence or not re.match(r"^##\s", line):
            continue
        if start is not None:
            return start, i
        if line[2:].strip().lower() == title.lower():
            start = i
    return (start, len(lines)) if start is not None else None


def _append_section(lines: list[str], title: str, body: list[str], nl: str) -> list[str]:
    out = list(lines)
    if out and not out[-1].endswith(("\n", "\r")):
        out[-1] += nl
    if out and out[-1].strip():
        out.append(nl)
    return out + [f"## {title}{nl}", nl, *body]


def _update_position(lines: list[str], values: dict[str, str], nl: str) -> list[str]:
    bounds = _section_bounds(lines, "Current Position")
    if bounds is None:
        body = [f"- **{k}:** {v}{nl}" for k, v in values.items()]
        return _insert_first_section(lines, "Current Position", body, nl)
    start, end = bounds
    out = list(lines)
    remaining = dict(values)
    for i in range(start + 1, end):
        for key in list(remaining):
            pattern = rf"^(\s*[-*]\s*\*\*{re.escape(key)}:?\*\*:?\s*)(.*?)(\r?\n)?$"
            match = re.match(pattern, out[i], re.I)
            if match:
                out[i] = f"{match.group(1)}{remaining.pop(key)}{match.group(3) or ''}"
    if remaining:
        last = max((i for i in range(start + 1, end) if out[i].strip()), default=start)
        if last == start:
            new = [nl] + [f"- **{k}:** {v}{nl}" for k, v in remaining.items()]
        else:
            new = [f"- **{k}:** {v}{nl}" for k, v in remaining.items()]
            if not out[last].endswith(("\n", "\r")):
                out[last] += nl
        out[last + 1:last + 1] = new
    return out


def _update_queue_status(lines: list[str], spec_id: str, status: str) -> list[str]:
    """Set the Status cell of the spec's Queue row, if there is one; a spec not queued gets no
    row (the Queue is the user's list), and the rest of the row keeps its bytes."""
    table = _table_rows(lines, "Queue")
    if table is None:
        return lines
    header = [c.strip().lower() for c in _PIPE.split(lines[table[0]].strip().strip("|"))]
    id_col = next((n for n, c in enumerate(header) if c in ("id", "spec", "spec id")), None)
    if id_col is None or "status" not in header:
        return lines
    status_col = header.index("status") + 1  # + 1: the segment before the leading pipe
    out = list(lines)
    for i in table[2:]:
        parts = _PIPE.split(out[i])
        if len(parts) > status_col and parts[id_col + 1].strip() == spec_id:
            old = parts[status_col]
            parts[status_col] = old.replace(old.strip(), inline(status, html=False), 1) \
                if old.strip() else f" {inline(status, html=False)} "
            out[i] = "|".join(parts)
    return out


_PIPE = re.compile(r"(?<!\\)\|")


def _insert_first_section(lines: list[str], title: str, body: list[str], nl: str) -> list[str]:
    """Insert a section before the first `##` heading (after the title), or at the end."""
    for i, line in enumerate(lines):
        if re.match(r"^##\s", line):
            return lines[:i] + [f"## {title}{nl}", nl, *body, nl] + lines[i:]
    return _append_section(lines, title, body, nl)


# Which value goes in a column, by words in the column's header (users' tables differ).
_COLUMN_WORDS = (("spec", ("spec", "specification", "id")), ("run", ("run",)),
                 ("mode", ("mode",)), ("progress", ("progress", "status", "state")),
                 ("updated", ("updated", "date", "time", "when")),
                 ("warning", ("warning", "reason", "message", "note", "issue")))


def _column_key(name: str) -> str | None:
    words = re.findall(r"[a-z]+", name.lower())
    for key, names in _COLUMN_WORDS:
        if any(w in names for w in words):
            return key
    return None


def _row_for(header: list[str], values: dict[str, str]) -> list[str]:
    return [values.get(_column_key(col) or "", "") for col in header]


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _format_row(cells: list[str]) -> str:
    return "| " + " | ".join(inline(c, html=False) for c in cells) + " |"


def _upsert_row(lines: list[str], title: str, header: list[str], values: dict[str, str],
                key: str | None, nl: str) -> list[str]:
    """Replace the row whose first cell is `key` (or append) in the section's table.

    Values are placed by the table's own header names, so a user's table with other columns
    (or another order) keeps its shape.
    """
    bounds = _section_bounds(lines, title)
    table_head = [_format_row(header) + nl, "|" + "|".join("-" * (len(h) + 2) for h in header)
                  + "|" + nl]
    row = _row_for(header, values)
    if bounds is None:
        return _append_section(lines, title, [*table_head, _format_row(row) + nl], nl)
    start, end = bounds
    out = list(lines)
    table = [i for i in range(start + 1, end) if out[i].lstrip().startswith("|")]
    if not table:
        insert_at = start + 1
        while insert_at < end and not out[insert_at].strip():
            insert_at += 1
        block = [nl, *table_head, _format_row(row) + nl]
        if insert_at < end:
            block.append(nl)
        out[start + 1:insert_at] = block
        return out
    cells = _row_for(_cells(out[table[0]]), values)
    if key is not None:
        for i in table[2:]:
            if _cells(out[i])[0] == key:
                out[i] = _format_row(cells) + (nl if out[i].endswith(("\n", "\r")) else "")
                return out
    last = table[-1]
    if not out[last].endswith(("\n", "\r")):
        out[last] += nl
    out.insert(last + 1, _format_row(cells) + nl)
    return out
