"""Task groups of `## Implementation Tasks`, in the three shapes real specs use, and the waves a
spec declares. Declared waves are recorded as written; computing waves is planning's job, and
disagreements between the two are what its lint reports."""

from __future__ import annotations

import re
from dataclasses import dataclass

from markdown_it.token import Token

from agentrun.spec.group_defs import Found, GroupDef, merge
from agentrun.spec.markdown import (
    Doc,
    Heading,
    Table,
    children,
    code_spans,
    norm_title,
    plain,
    source_text,
    split_br,
    split_lines_of,
    split_semicolons,
)
from agentrun.spec.model import TaskGroup, UnreadRow
from agentrun.spec.refs import (
    dependency_refs,
    first_int,
    is_none,
    looks_like_path,
    parse_group_cell,
    unique,
    wave_refs,
)

IMPL_TITLES = ("implementation tasks", "implementation plan", "task groups")
PLAN_TITLES = ("execution plan", "wave plan", "execution waves", "waves")

_NUMBERED = re.compile(r"^\d+(?:\.\d+)*[.)]?\s+")
_CHECKBOX = re.compile(r"^\[[ xX]\]\s*")
_BULLET = re.compile(r"^(?:[-*+•]|\d+[.)])\s+")
_PAREN = re.compile(r"\(([^()]*)\)")
_DEP_WORD = re.compile(r"\b(?:depends\s+on|depends|dependencies|deps|requires|needs|after|"
                       r"blocked\s+by)\b\s*:?", re.I)
_NO_DEP = re.compile(r"(?:no\s+dep\w*|independent|none|parallel|standalone)", re.I)
_WAVE_WORD = re.compile(r"\bwave\s*0*(\d{1,6})(?!\d)", re.I)
_DEP_TAIL = re.compile(r"\s+[-–—,;|]\s*(?:depends\s+on|deps|dependencies|requires)\s*:?\s*(.*)$",
                       re.I)
_KEY = re.compile(r"^(?:(depends\s+on)\s*:?|(dependencies|dependency|deps|requires|prerequisites|"
                  r"blocked\s+by|wave|est\.?\s*context|estimated\s+context|context\s+estimate|"
                  r"est\.?|estimate|files?|artifacts?|segments?)\s*:)\s*(.*)$", re.I)
_WAVE_LINE = re.compile(r"^\s*(?:[-*+•]\s*|\d+[.)]\s*)?wave\s*0*(\d{1,6})(?!\d)\s*"
                        r"(?:\([^)]*\))?\s*(?::|=|\||->|=>|→|-|–|—)\s*(.+)$", re.I)
_FILE_SPLIT = re.compile(r"[\s,;]+")


def extract(doc: Doc) -> tuple[list[TaskGroup], dict[str, int], list[UnreadRow]]:
    """Task groups (merged by id, in order of first definition), declared waves, and the rows
    of group tables whose group id could not be read."""
    found = Found()
    tables_seen: set[int] = set()
    fences_seen: set[int] = set()
    impl = doc.find(IMPL_TITLES, levels=(2, 3))
    if impl is not None:
        start, end = doc.body_tokens(impl)
        for table in doc.tables(start, end):
            tables_seen.add(table.index)
            _read_table(table, found, allow_groups=True)
        _read_wave_fences(doc, start, end, found, fences_seen)
        _read_group_headings(doc, impl, start, end, found)
    for heading in doc.headings:
        if heading.level < 2 or not norm_title(heading.text).startswith(PLAN_TITLES):
            continue
        start, end = doc.body_tokens(heading)
        for table in doc.tables(start, end):
            if table.index not in tables_seen:
                tables_seen.add(table.index)
                _read_table(table, found, allow_groups=False)
        _read_wave_fences(doc, start, end, found, fences_seen)
        for inline in doc.paragraphs(start, end):
            for n, part in enumerate(split_lines_of(children(inline))):
                _read_wave_line(plain(part), inline.map[0] + n + 1 if inline.map else 0, found)
    return (*merge(found), found.unread)


# -- tables ---------------------------------------------------------------------------------

@dataclass
class _Columns:
    group: int | None = None
    groups: int | None = None
    wave: int | None = None
    tasks: int | None = None
    title: int | None = None
    deps: int | None = None
    est: int | None = None
    segment: int | None = None
    files: int | None = None


def _columns(table: Table) -> _Columns:
    cols = _Columns()

    def put(name: str, i: int) -> None:
        if getattr(cols, name) is None:
            setattr(cols, name, i)

    named_tasks = None  # a column called "Tasks" beats synonyms like "Step" or "Description"
    for i, cell in enumerate(table.header):
        h = norm_title(plain(children(cell))).rstrip("?")
        if h.startswith("task") and named_tasks is None and h not in ("task group", "task groups"):
            named_tasks = i
        if h.startswith("wave"):
            put("wave", i)
        elif h in ("groups", "task groups", "group ids", "parallel groups"):
            put("groups", i)
        elif h in ("group", "task group", "group id", "id", "#", "grp") or h.startswith("group"):
            put("group", i)
        elif "depend" in h or h in ("deps", "requires", "needs", "after", "blocked by",
                                    "prerequisites", "prereqs"):
            put("deps", i)
        elif h.startswith("seg") or h == "part":
            put("segment", i)
        elif ("context" in h and "cumulative" not in h) or h.startswith("est"):
            put("est", i)
        elif h.startswith("task") or h in ("description", "work", "deliverables", "scope",
                                           "what", "changes", "items", "steps", "step",
                                           "action", "actions"):
            put("tasks", i)
        elif h in ("title", "name", "focus", "summary", "goal", "purpose", "area", "component"):
            put("title", i)
        elif "file" in h or "artifact" in h or h == "paths":
            put("files", i)
    if named_tasks is not None:
        cols.tasks = named_tasks
    return cols


def _cell(cells: list[Token], index: int | None) -> list[Token]:
    if index is None or index >= len(cells):
        return []
    return children(cells[index])


def _read_table(table: Table, found: Found, allow_groups: bool) -> None:
    cols = _columns(table)
    listing = cols.groups if cols.groups is not None else cols.group
    if cols.wave is not None and listing is not None and cols.tasks is None \
            and cols.deps is None:
        for line, cells in table.rows:  # an execution plan: `Wave | Groups | Parallel?`
            found.declare(line + 1, wave_refs(plain(_cell(cells, listing))),
                          first_int(plain(_cell(cells, cols.wave))))
        return
    if cols.group is None and (cols.tasks is not None or cols.deps is not None) and any(
            parse_group_cell(plain(_cell(cells, 0))) for _, cells in table.rows):
        cols.group = 0
    if cols.group is None:
        return
    rows = [(line, cells, _read_row(cols, cells, line + 1)) for line, cells in table.rows]
    # a table of groups: its header says so, a row names a group, or it lists dependencies
    groups_table = allow_groups and (
        _names_groups(table, cols.group) or cols.deps is not None
        or any(row is not None for _, _, row in rows))
    last: GroupDef | None = None
    for line, cells, row in rows:
        if row is None:
            cell = plain(_cell(cells, cols.group)).strip()
            if last is not None and not cell:
                _continue_row(last, cols, cells)  # a row that only adds tasks to the one above
            elif groups_table and any(plain(children(c)).strip() for c in cells):
                found.unread.append(UnreadRow(line + 1, cell))  # its work must not vanish
            continue
        last = row
        row.source = f"table {table.index}"
        found.declare(row.line, [row.gid], row.wave)
        if allow_groups:
            found.defs.append(row)


def _names_groups(table: Table, column: int) -> bool:
    """Whether the header calls the column a group (not `#` or `id`, which a group's own
    small table of steps uses too)."""
    head = norm_title(plain(children(table.header[column]))) if column < len(table.header) \
        else ""
    return head.startswith(("group", "grp", "task group"))


def _read_row(cols: _Columns, cells: list[Token], line: int) -> GroupDef | None:
    parsed = parse_group_cell(plain(_cell(cells, cols.group)))
    if parsed is None:
        return None
    gid, segment, rest = parsed
    seg_text = plain(_cell(cells, cols.segment))
    if seg_text and not is_none(seg_text):
        segment = _segment_label(seg_text)
    est = plain(_cell(cells, cols.est))
    row = GroupDef(gid, line, segment=segment, est=None if is_none(est) else est)
    row.title = source_text(_cell(cells, cols.title)) or rest
    if cols.wave is not None:
        row.wave = first_int(plain(_cell(cells, cols.wave)))
    _continue_row(row, cols, cells)
    if not row.title and row.tasks:
        row.title = row.tasks[0]
    return row


def _continue_row(row: GroupDef, cols: _Columns, cells: list[Token]) -> None:
    row.tasks.extend(_cell_tasks(_cell(cells, cols.tasks)))
    files: list[str] = []
    for cell in cells:
        files.extend(code_spans(children(cell)))
    files.extend(_listed_files(_cell(cells, cols.files)))
    row.files.extend(f for f in files if looks_like_path(f))
    row.deps = unique(row.deps + dependency_refs(plain(_cell(cells, cols.deps))))


def _cell_tasks(tokens: list[Token]) -> list[str]:
    """A Tasks cell's items: `<br>`-separated, else `;`-separated, formatting stripped."""
    out: list[str] = []
    for part in split_br(tokens):
        for piece in split_semicolons(part):
            text = _clean_task(source_text(piece))
            if text:
                out.append(text)
    return out


def _listed_files(tokens: list[Token]) -> list[str]:
    """A Files cell's paths as written (`__init__.py` is not emphasis there)."""
    return [f.strip("`").strip() for f in _FILE_SPLIT.split(source_text(tokens)) if f.strip("`")]


def _clean_task(text: str) -> str:
    text = _BULLET.sub("", text.strip())
    return _CHECKBOX.sub("", text).strip()


def _segment_label(text: str) -> str:
    n = first_int(text)
    if n is not None and re.fullmatch(r"(?:s|seg|segment)?\s*0*\d+", text.strip(), re.I):
        return f"S{n}"
    return text


# -- one heading per group ------------------------------------------------------------------

def _read_group_headings(doc: Doc, impl: Heading, start: int, end: int, found: Found) -> None:
    inside = [h for h in doc.headings_within(start, end) if h.level > impl.level]
    wave: tuple[int, int] | None = None  # (heading level, wave number) of an enclosing `Wave N`
    for pos, heading in enumerate(inside):
        if wave is not None and heading.level <= wave[0]:
            wave = None
        text = _NUMBERED.sub("", plain(children(heading.inline)))
        wave_head = _WAVE_WORD.match(text)
        if wave_head:
            wave = (heading.level, int(wave_head.group(1)))
            found.declare(heading.line + 1, wave_refs(text[wave_head.end():]), wave[1])
            continue
        parsed = parse_group_cell(text)
        if parsed is None:
            continue
        body_end = end
        for nxt in inside[pos + 1:]:
            if nxt.level <= heading.level or parse_group_cell(plain(children(nxt.inline))):
                body_end = nxt.index
                break
        group = _heading_def(doc, heading, parsed, body_end)
        if group.wave is None and wave is not None:
            group.wave = wave[1]
        found.declare(group.line, [group.gid], group.wave)
        found.defs.append(group)


def _heading_def(doc: Doc, heading: Heading, parsed: tuple[str, str | None, str],
                 body_end: int) -> GroupDef:
    gid, segment, rest = parsed
    written = parse_group_cell(_NUMBERED.sub("", source_text(children(heading.inline))))
    if written is not None and written[0] == gid:  # the title as written, `code` and all
        rest = written[2]
    group = GroupDef(gid, heading.line + 1, segment=segment, source="heading")
    group.title = _title_notes(rest, group)
    start = heading.index + 3
    for inline in doc.paragraphs(start, body_end):
        for part in split_lines_of(children(inline)):
            _read_key_line(plain(part), group)
    for item in doc.items(start, body_end):
        if item.depth == 0 and item.inline is not None:
            first = split_lines_of(children(item.inline))[0]
            if not _KEY.match(plain(first)):
                task = _clean_task(source_text(children(item.inline)))
                if task:
                    group.tasks.append(task)
    for table in doc.tables(start, body_end):
        cols = _columns(table)
        column = cols.tasks if cols.tasks is not None else cols.title
        if column is None:  # the first column that is neither a counter nor a file
            column = next((i for i, c in enumerate(table.header)
                           if i != cols.files and norm_title(plain(children(c)))
                           not in ("#", "id", "no", "no.", "n", "order")), 0)
        for _, cells in table.rows:
            group.tasks.extend(_cell_tasks(_cell(cells, column)))
            group.files.extend(f for f in _listed_files(_cell(cells, cols.files))
                               if looks_like_path(f))
    if not group.tasks:
        for inline in doc.paragraphs(start, body_end):
            parts = split_lines_of(children(inline))
            text = " ".join(source_text(p) for p in parts
                            if plain(p) and not _KEY.match(plain(p)))
            if text:
                group.tasks.append(text)
    spans = code_spans(children(heading.inline))
    for tok in doc.tokens[start:body_end]:
        if tok.type == "inline":
            spans.extend(code_spans(children(tok)))
    group.files.extend(f for f in spans if looks_like_path(f))
    if not group.title and group.tasks:
        group.title = group.tasks[0]
    return group


def _title_notes(rest: str, group: GroupDef) -> str:
    """Take `(depends on G1)`, `(Wave 2)`, `(no dependencies)` and `— depends on G1` out of
    a group heading's title into the group."""

    def note(m: re.Match[str]) -> str:
        inner = m.group(1)
        hit = False
        w = _WAVE_WORD.search(inner)
        if w:
            group.wave = int(w.group(1))
            hit = True
        d = _DEP_WORD.search(inner)
        if d:
            group.deps.extend(dependency_refs(inner[d.end():]))
            hit = True
        elif _NO_DEP.fullmatch(inner.strip()):
            hit = True
        return " " if hit else m.group(0)

    title = _PAREN.sub(note, rest)
    tail = _DEP_TAIL.search(title)
    if tail:
        group.deps.extend(dependency_refs(tail.group(1)))
        title = title[:tail.start()]
    return re.sub(r"\s+", " ", title).strip(" -–—:")


def _read_key_line(text: str, group: GroupDef) -> None:
    m = _KEY.match(text)
    if m is None:
        return
    key = (m.group(1) or m.group(2)).lower()
    value = m.group(3).strip()
    if key.startswith(("depend", "deps", "requires", "prereq", "blocked")):
        group.deps.extend(dependency_refs(value))
    elif key == "wave":
        wave = first_int(value)
        group.wave = wave if wave is not None else group.wave
    elif key.startswith(("est", "context")):
        group.est = group.est or (None if is_none(value) else value)
    elif key.startswith(("file", "artifact")):
        group.files.extend(f for f in _FILE_SPLIT.split(value.replace("`", " "))
                           if looks_like_path(f))


# -- declared waves -------------------------------------------------------------------------

def _read_wave_fences(doc: Doc, start: int, end: int, found: Found, seen: set[int]) -> None:
    """`Wave 1: [G1, G2]` lines of fenced blocks: the one kind of fence read on purpose."""
    for tok in doc.fences(start, end):
        if id(tok) in seen or not tok.map:
            continue
        seen.add(id(tok))
        first = tok.map[0] + (2 if tok.type == "fence" else 1)
        for n, line in enumerate(tok.content.split("\n")):
            _read_wave_line(line.replace("*", "").replace("`", ""), first + n, found)


def _read_wave_line(text: str, line: int, found: Found) -> None:
    m = _WAVE_LINE.match(text)
    if m:
        items = m.group(2)
        if "[" in items and "]" in items:
            items = items[items.index("[") + 1:items.rindex("]")]
        found.declare(line, wave_refs(items), int(m.group(1)))
