"""Markdown spec -> `Spec`. Every input gives a Spec or a SpecError, never another exception."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from markdown_it.token import Token

from agentrun.core.errors import SpecError
from agentrun.spec import frontmatter
from agentrun.spec.groups import extract
from agentrun.spec.markdown import (
    Doc,
    children,
    code_spans,
    norm_title,
    plain,
    split_lines_of,
)
from agentrun.spec.model import Criterion, Section, Spec
from agentrun.spec.refs import looks_like_path, unique

_RULE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_SEPARATORS = re.compile(r"[\s,;&]*(?:and|or)?[\s,;&]*", re.I)
_CHECKBOX = re.compile(r"^\s*\[([ xX])\]\s+")
_CREATE = re.compile(r"^(?:new\s+)?files?\s+to\s+(?:create|add)(?:\s*(/|or|and|&)\s*(?:modify|"
                     r"change|update|edit))?\b")
_MODIFY = re.compile(r"^(?:files?\s+to\s+(?:modify|change|update|edit))\b")
_LABEL = re.compile(r"^((?:new\s+)?files?\s+to\s+[a-z/& ]+?)\s*:\s*(.*)$", re.I)


def load_spec(path: Path | str) -> Spec:
    """Read and parse a spec file; unreadable, binary, non-UTF-8 or empty files are SpecErrors."""
    p = Path(path)
    shown = str(path)
    if not p.exists():
        raise SpecError(f"spec not found: {shown}",
                        "check the path, or list .specflow/specs/ to see the specs you have",
                        path=shown)
    if p.is_dir():
        raise SpecError(f"{shown} is a directory, not a spec file",
                        "pass the spec's markdown file, e.g. .specflow/specs/SPEC-123.md",
                        path=shown)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise SpecError(f"cannot read spec {shown}: {exc.strerror or exc}",
                        "check the file's permissions", path=shown) from exc
    nul = data.find(b"\0")
    if nul >= 0:
        raise SpecError(f"{shown} is a binary file (NUL byte at offset {nul}), not a markdown spec",
                        "pass the spec's markdown file", path=shown)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"{shown} is not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset "
                        f"{exc.start})", "save the spec as UTF-8 text", path=shown) from exc
    return parse_spec(text, p)


def parse_spec(text: str, path: Path | str = "<spec>") -> Spec:
    """Parse spec text. `path` names the spec in errors and gives the id when none is set."""
    p = Path(path)
    shown = str(path)
    if not text.strip().lstrip("\ufeff").strip():
        raise SpecError(f"spec is empty: {shown}",
                        "write the spec (frontmatter, ## Context, ## Task, ...) or pass another "
                        "file",
                        path=shown)
    block = frontmatter.locate_dashed(text, shown)
    if block is not None:
        doc = Doc(text, [block.span])  # YAML lines must not read as setext headings
    else:
        doc = Doc(text)
        block = frontmatter.locate_fenced(doc, shown)
    meta = frontmatter.load(block, shown) if block is not None else {}
    spec_id = str(meta["id"]).strip() if meta.get("id") not in (None, "") else p.stem
    spec_id = spec_id or p.stem
    h1 = next((h for h in doc.headings if h.level == 1), None)
    if h1 is not None and h1.text:
        title = h1.text
    elif meta.get("title") not in (None, ""):
        title = str(meta["title"])
    else:
        title = spec_id
    groups, declared, unread = extract(doc)
    create, modify = _files(doc)
    return Spec(
        path=p, id=spec_id, title=title, text=text, frontmatter=meta,
        frontmatter_style=block.style if block is not None else "none",
        sections=_sections(doc), acceptance_criteria=_criteria(doc),
        files_to_create=create, files_to_modify=modify, groups=groups, declared_waves=declared,
        unread_rows=unread,
        requirement_sections=_requirement_sections(doc),
    )


def _sections(doc: Doc) -> list[Section]:
    out = []
    for h in doc.headings:
        if h.level not in (2, 3):
            continue
        end = doc.section_end(h)[0]
        body = doc.lines[h.body_line:end]
        while body and not body[0].strip():
            body.pop(0)
        while body and (not body[-1].strip() or _RULE.match(body[-1])):
            body.pop()  # blank lines and `---` separators before the next heading
        out.append(Section(h.text, h.level, h.line, end, "\n".join(body)))
    return out


def _criteria(doc: Doc) -> list[Criterion]:
    heading = doc.find(("acceptance criteria",)) or next(
        (h for h in doc.headings if h.level > 2 and norm_title(h.text) == "acceptance criteria"),
        None)  # not `### Acceptance Criteria Status` of an Execution Summary
    if heading is None:
        return []
    start, end = doc.body_tokens(heading)
    found: list[tuple[Criterion, bool]] = []
    for item in doc.items(start, end):
        if item.depth != 0 or item.inline is None:
            continue
        text = " ".join(line.strip() for line in item.inline.content.split("\n")).strip()
        box = _CHECKBOX.match(text)
        if box:
            text = text[box.end():].strip()
        if text:
            found.append((Criterion(text, bool(box and box.group(1) != " "), item.line + 1),
                          box is not None))
    if any(boxed for _, boxed in found):
        return [c for c, boxed in found if boxed]
    return [c for c, _ in found]


def _requirement_sections(doc: Doc) -> int:
    heading = doc.find(("requirements",))
    if heading is None:
        return 0
    start, end = doc.body_tokens(heading)
    return sum(1 for h in doc.headings_within(start, end) if h.level == 3)


def _kind(title: str) -> str | None:
    """"create", "modify", "mixed" (Files to Create/Modify) or None for a heading or label."""
    t = norm_title(title)
    m = _CREATE.match(t)
    if m:
        return "mixed" if m.group(1) else "create"
    return "modify" if _MODIFY.match(t) else None


def _files(doc: Doc) -> tuple[list[str], list[str]]:
    found: list[tuple[int, str, str]] = []  # (line, kind, path), sorted into document order

    def add(line: int, kind: str, path: str, note: str = "") -> None:
        path = path.strip().strip("`").strip()
        if not looks_like_path(path):
            return
        if kind == "mixed":
            kind = "create" if re.search(r"\b(?:new|create[ds]?|add(?:ed)?)\b", note, re.I) \
                else "modify"
        found.append((line, kind, path))

    for h in doc.headings:
        kind = _kind(h.text) if h.level >= 2 else None
        if kind is not None:
            start, end = doc.body_tokens(h)
            _collect(doc, start, end, kind, add)
    for idx, inline in enumerate(doc.tokens):
        if inline.type != "inline" or idx == 0 or doc.tokens[idx - 1].type != "paragraph_open":
            continue
        first = plain(split_lines_of(children(inline))[0])
        m = _LABEL.match(first)
        kind = _kind(m.group(1)) if m else None
        if kind is None or m is None:
            continue
        line = inline.map[0] if inline.map else 0
        spans = [s for s in code_spans(children(inline)) if looks_like_path(s)]
        if spans or m.group(2).strip():
            for s in spans or re.split(r"[\s,;]+", m.group(2)):
                add(line, kind, s)
            continue
        nxt = idx + 2  # the block after this paragraph: a list or a table of files
        if nxt < len(doc.tokens) and doc.tokens[nxt].type in (
                "bullet_list_open", "ordered_list_open", "table_open"):
            _collect(doc, nxt, _block_end(doc, nxt), kind, add)
    found.sort(key=lambda f: f[0])
    create = [path for _, kind, path in found if kind == "create"]
    modify = [path for _, kind, path in found if kind == "modify"]
    return unique(create), unique(modify)


def _block_end(doc: Doc, index: int) -> int:
    level = doc.tokens[index].level
    for i in range(index + 1, len(doc.tokens)):
        if doc.tokens[i].level == level and doc.tokens[i].nesting == -1:
            return i + 1
    return len(doc.tokens)


_Add = Callable[[int, str, str, str], None]


def _collect(doc: Doc, start: int, end: int, kind: str, add: _Add) -> None:
    for table in doc.tables(start, end):
        headers = [norm_title(plain(children(c))) for c in table.header]
        col = next((i for i, h in enumerate(headers) if "file" in h or "path" in h), 0)
        note_col = next((i for i, h in enumerate(headers)
                         if h in ("action", "change", "changes", "type", "status", "operation",
                                  "op", "new?", "kind")), None)
        for line, cells in table.rows:
            if col >= len(cells):
                continue
            note = plain(children(cells[note_col])) if note_col is not None \
                and note_col < len(cells) else plain(children(cells[-1]))
            for path in _leading_paths(cells[col]):
                add(line, kind, path, note)
    for item in doc.items(start, end):
        if item.depth == 0 and item.inline is not None:
            for path in _leading_paths(item.inline):
                add(item.line, kind, path, plain(children(item.inline)))


def _leading_paths(inline: Token) -> list[str]:
    """The paths an item or cell starts with: `a.py`, `b.py` and `c.py` — but not paths named
    later in its description. Without a code span, its first word."""
    paths: list[str] = []
    for tok in children(inline):
        if tok.type == "code_inline" and looks_like_path(tok.content.strip()):
            paths.append(tok.content.strip())
        elif tok.type in ("softbreak", "hardbreak") or (
                tok.type == "text" and _SEPARATORS.fullmatch(tok.content)):
            continue
        elif paths or tok.type != "text" or tok.content.strip():
            break
    if paths:
        return paths
    words = plain(children(inline)).split()
    return [words[0].rstrip(":,;")] if words else []
