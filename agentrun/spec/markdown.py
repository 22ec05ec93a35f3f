"""Markdown structure read from markdown-it tokens.

Specs quote markdown inside code fences (example task tables, `## Step` headings of agent
templates). Reading structure from a real tokenizer, never from regexes over raw lines, is what
keeps those quotes from being mistaken for the spec's own sections and tables.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from markdown_it import MarkdownIt
from markdown_it.token import Token

_MD = MarkdownIt("commonmark").enable("table")

# markdown-it's own notion of a line break (it normalises these before tokenising).
LINE_BREAK = re.compile(r"\r\n?|\n")
_BR = re.compile(r"^<br\s*/?>$", re.I)
_SPACES = re.compile(r"\s+")
_NUMBERING = re.compile(r"^(?:\d+(?:\.\d+)*[.)]?|[ivx]+[.)])\s+", re.I)


def split_lines(text: str) -> list[str]:
    """The text's lines without their endings, indexed the way markdown-it's `map` counts."""
    lines = LINE_BREAK.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def norm_title(text: str) -> str:
    """A heading or label reduced for matching: no formatting, numbering, case or colon."""
    text = re.sub(r"[*_`]", "", text).strip().lower()
    text = _NUMBERING.sub("", text)
    return _SPACES.sub(" ", text).rstrip(" :").strip()


@dataclass(frozen=True)
class Heading:
    level: int
    text: str  # the heading's inline source, as written
    line: int  # 0-based line of the heading
    body_line: int  # first line after the heading (setext headings span two lines)
    index: int  # token index of `heading_open`
    inline: Token


@dataclass
class Table:
    header: list[Token]  # one inline token per column
    rows: list[tuple[int, list[Token]]] = field(default_factory=list)  # (0-based line, cells)
    index: int = 0  # token index of `table_open`


@dataclass(frozen=True)
class ListItem:
    """A list item: its first paragraph (if any) and its nesting depth within the scanned range."""

    line: int
    depth: int
    inline: Token | None
    index: int


class Doc:
    """Tokens and top-level headings of one text; `masked` line ranges are tokenised as blank."""

    def __init__(self, text: str, masked: Iterable[range] = ()) -> None:
        self.lines = split_lines(text)
        source = list(self.lines)
        if source and source[0].startswith("\ufeff"):
            source[0] = source[0][1:]  # a byte-order mark would hide a first-line heading
        for span in masked:
            for i in span:
                if 0 <= i < len(source):
                    source[i] = ""
        self.tokens: list[Token] = _MD.parse("\n".join(source) + "\n")
        self.headings: list[Heading] = []
        for i, tok in enumerate(self.tokens):
            # level 0: headings nested in lists or blockquotes are not structure
            if tok.type == "heading_open" and tok.level == 0 and tok.map:
                inline = self.tokens[i + 1]
                self.headings.append(Heading(int(tok.tag[1]), inline.content.strip(),
                                             tok.map[0], tok.map[1], i, inline))
        self._position = {h.index: n for n, h in enumerate(self.headings)}

    def section_end(self, heading: Heading) -> tuple[int, int]:
        """(end line, end token index) of a heading's section: the next heading of the same or
        higher level, else the end of the text."""
        for nxt in self.headings[self._position[heading.index] + 1:]:
            if nxt.level <= heading.level:
                return nxt.line, nxt.index
        return len(self.lines), len(self.tokens)

    def body_tokens(self, heading: Heading) -> tuple[int, int]:
        """Token index range of a heading's section body."""
        return heading.index + 3, self.section_end(heading)[1]

    def find(self, wanted: Iterable[str], levels: Iterable[int] = (2,)) -> Heading | None:
        """The first heading of one of `levels` whose normalised title starts with a `wanted`."""
        keys = tuple(wanted)
        for level in levels:
            for h in self.headings:
                if h.level == level and norm_title(h.text).startswith(keys):
                    return h
        return None

    def headings_within(self, start: int, end: int) -> list[Heading]:
        return [h for h in self.headings if start <= h.index < end]

    def tables(self, start: int, end: int) -> Iterator[Table]:
        toks = self.tokens
        i = start
        while i < end:
            if toks[i].type != "table_open":
                i += 1
                continue
            table = Table(header=[], index=i)
            in_head = False
            line = 0
            cells: list[Token] = []
            i += 1
            while i < len(toks) and toks[i].type != "table_close":
                tok = toks[i]
                if tok.type == "thead_open":
                    in_head = True
                elif tok.type == "thead_close":
                    in_head = False
                elif tok.type == "tr_open":
                    cells = []
                    line = tok.map[0] if tok.map else line
                elif tok.type == "inline":
                    cells.append(tok)
                elif tok.type == "tr_close":
                    if in_head:
                        table.header = cells
                    else:
                        table.rows.append((line, cells))
                i += 1
            yield table

    def items(self, start: int, end: int) -> list[ListItem]:
        """List items in a token range, with depth 0 for the outermost lists of the range."""
        out: list[ListItem] = []
        depth = 0
        toks = self.tokens
        for i in range(start, min(end, len(toks))):
            tok = toks[i]
            if tok.type in ("bullet_list_open", "ordered_list_open"):
                depth += 1
            elif tok.type in ("bullet_list_close", "ordered_list_close"):
                depth = max(0, depth - 1)
            elif tok.type == "list_item_open" and tok.map:
                inline = None
                if (i + 2 < len(toks) and toks[i + 1].type == "paragraph_open"
                        and toks[i + 2].type == "inline"):
                    inline = toks[i + 2]
                out.append(ListItem(tok.map[0], max(0, depth - 1), inline, i))
        return out

    def paragraphs(self, start: int, end: int) -> Iterator[Token]:
        """Inline tokens of paragraphs (also those inside list items) in a token range."""
        toks = self.tokens
        for i in range(max(start, 1), min(end, len(toks))):
            if toks[i].type == "inline" and toks[i - 1].type == "paragraph_open":
                yield toks[i]

    def fences(self, start: int, end: int) -> Iterator[Token]:
        for tok in self.tokens[start:end]:
            if tok.type in ("fence", "code_block"):
                yield tok


def children(inline: Token | None) -> list[Token]:
    return list(inline.children or []) if inline is not None else []


def plain(tokens: Iterable[Token]) -> str:
    """Inline tokens as plain text: formatting markers dropped, code spans kept as their text."""
    out: list[str] = []
    for tok in tokens:
        if tok.type in ("text", "code_inline"):
            out.append(tok.content)
        elif tok.type in ("softbreak", "hardbreak", "html_inline"):
            out.append(" ")
        elif tok.type == "image":
            out.append(plain(tok.children or []))
    return _SPACES.sub(" ", "".join(out)).strip()


_EMPHASIS = {"strong_open", "strong_close", "em_open", "em_close", "s_open", "s_close"}


def source_text(tokens: Iterable[Token]) -> str:
    """Inline tokens back as the markdown their author wrote: code spans with their
    backticks, emphasis markers, links with their targets. Task text reaches workers and
    commit messages like this, because `plain` would turn `calc/__init__.py` (read as
    emphasis) into `calc/init.py`."""
    out: list[str] = []
    links: list[str] = []  # the targets of the links being written
    for tok in tokens:
        kind = tok.type
        if kind == "text":
            out.append(tok.content)
        elif kind == "code_inline":
            out.append(f"{tok.markup}{tok.content}{tok.markup}")
        elif kind in _EMPHASIS:
            out.append(tok.markup)
        elif kind == "link_open":
            autolink = tok.markup == "autolink"
            links.append("" if autolink else f"]({tok.attrGet('href') or ''})")
            out.append("" if autolink else "[")
        elif kind == "link_close":
            out.append(links.pop() if links else "")
        elif kind in ("softbreak", "hardbreak"):
            out.append(" ")
        elif kind == "html_inline":
            out.append(tok.content)
        elif kind == "image":
            out.append(f"![{source_text(tok.children or [])}]({tok.attrGet('src') or ''})")
    return _SPACES.sub(" ", "".join(out)).strip()


def code_spans(tokens: Iterable[Token]) -> list[str]:
    return [tok.content.strip() for tok in tokens if tok.type == "code_inline"]


def split_br(tokens: Iterable[Token]) -> list[list[Token]]:
    """Split inline tokens at `<br>` tags (how table cells hold several items)."""
    parts: list[list[Token]] = [[]]
    for tok in tokens:
        if tok.type == "html_inline" and _BR.match(tok.content.strip()):
            parts.append([])
        else:
            parts[-1].append(tok)
    return parts


def split_lines_of(tokens: Iterable[Token]) -> list[list[Token]]:
    """Split inline tokens at line breaks (a paragraph of `**Key:** value` lines)."""
    parts: list[list[Token]] = [[]]
    for tok in tokens:
        if tok.type in ("softbreak", "hardbreak"):
            parts.append([])
        else:
            parts[-1].append(tok)
    return parts


def split_semicolons(tokens: Iterable[Token]) -> list[list[Token]]:
    """Split inline tokens at `;` in text (never inside a code span)."""
    parts: list[list[Token]] = [[]]
    for tok in tokens:
        if tok.type != "text" or ";" not in tok.content:
            parts[-1].append(tok)
            continue
        pieces = tok.content.split(";")
        for n, piece in enumerate(pieces):
            if n:
                parts.append([])
            if piece:
                parts[-1].append(Token("text", "", 0, content=piece))
    return parts
