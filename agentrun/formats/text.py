"""Reading checklist plans (spec-kit and Kiro `tasks.md`): checkbox items with their own
lines, the headings around them, the files a task names, and ticking a checkbox in place.

Structure comes from markdown-it's tokens, as for native specs: a `- [ ] T001` quoted in a
code fence or an HTML comment is an example, not a task. Text comes from the raw lines, so a
task reaches its worker exactly as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from agentrun.spec.markdown import Doc, Heading
from agentrun.spec.refs import looks_like_path

_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d+[.)])\s+\[([ xX])\](\*?)[ \t]*(.*)$")
_SPAN = re.compile(r"(`+)(.+?)\1")
_QUOTES = "`'\",;:!?*"
_PAIRS = (("(", ")"), ("[", "]"), ("{", "}"), ("<", ">"))
# `Node.js` and `Vue.js` name technologies, not files
_TECH = re.compile(r"^[A-Z][A-Za-z0-9]*\.js$")


@dataclass
class CheckboxItem:
    """A checkbox list item: `- [ ] head` and the lines that belong to it."""

    line: int  # 0-based line of the item
    checked: bool
    box: int  # column of the character between the brackets
    optional: bool  # `- [ ]*` (Kiro: deferrable)
    head: str  # the text after the checkbox on its first line
    body: list[str] = field(default_factory=list)  # its further lines, dedented, as written
    depth: int = 0  # how many checkbox items it is nested in
    parent: int | None = None  # index of the checkbox item it is nested in


@dataclass
class Checklist:
    doc: Doc
    items: list[CheckboxItem]

    @property
    def headings(self) -> list[Heading]:
        return self.doc.headings


def checklist(text: str) -> Checklist:
    """Every checkbox item of `text`, in order, with the lines that are its own (up to the
    first checkbox item nested in it)."""
    doc = Doc(text)
    lines = doc.lines
    found: list[tuple[int, int, re.Match[str]]] = []  # (start, end, match) of checkbox items
    for tok in doc.tokens:
        if tok.type != "list_item_open" or not tok.map:
            continue
        start, end = tok.map
        m = _ITEM.match(lines[start]) if start < len(lines) else None
        if m:
            found.append((start, end, m))
    items: list[CheckboxItem] = []
    open_: list[tuple[int, int]] = []  # (end line, index) of the items we are inside
    for n, (start, end, m) in enumerate(found):
        while open_ and start >= open_[-1][0]:
            open_.pop()
        own_end = end
        for nxt_start, _nxt_end, _ in found[n + 1:]:
            if nxt_start >= end:
                break
            own_end = nxt_start
            break
        body = _dedent(lines[start + 1:own_end])
        items.append(CheckboxItem(line=start, checked=m.group(2) != " ", box=m.start(2),
                          optional=bool(m.group(3)), head=m.group(4).rstrip(), body=body,
                          depth=len(open_), parent=open_[-1][1] if open_ else None))
        open_.append((end, n))
    return Checklist(doc, items)


def _dedent(lines: list[str]) -> list[str]:
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    while lines and not lines[0].strip():
        lines = lines[1:]
    indents = [len(x) - len(x.lstrip()) for x in lines if x.strip()]
    cut = min(indents) if indents else 0
    return [x[cut:].rstrip() if x.strip() else "" for x in lines]


def heading_of(doc: Doc, line: int) -> list[Heading]:
    """The headings a line sits under, outermost first."""
    chain: list[Heading] = []
    for h in doc.headings:
        if h.line >= line:
            break
        while chain and chain[-1].level >= h.level:
            chain.pop()
        chain.append(h)
    return chain


def paths_in(text: str) -> list[str]:
    """The files and folders a task names: `code spans` that look like paths, and bare words
    that do (`src/models/user.py`, `README.md`, `docs/`)."""
    found: list[str] = []
    for m in _SPAN.finditer(text):
        span = m.group(2).strip()
        if looks_like_path(span) and "://" not in span:
            found.append(span)
    bare = _SPAN.sub(" ", text)
    for word in bare.split():
        word = _trim(word)
        if not word or "://" in word or word.startswith(("@", "#", "$", "/", "~")) \
                or _TECH.match(word):
            continue  # a URL, a reference, an API route or a path outside the repository
        if _bare_path(word):
            found.append(word)
    out: list[str] = []
    for path in found:
        if path not in out:
            out.append(path)
    return out


def _bare_path(word: str) -> bool:
    """A path written without backticks: a file name with a known extension (`main.ts`,
    `src/models/user.py`) or a folder ending in `/` (`docs/`). Prose like `reading/writing`,
    `Node.js` or `.exe` is not one."""
    if not looks_like_path(word) or word.startswith(".") or not any(c.isalpha() for c in word):
        return False
    if word.endswith("/"):
        return True
    last = word.rsplit("/", 1)[-1]
    if "." not in last.strip(".") or _TECH.match(last):
        return False
    return looks_like_path(last)


def _trim(word: str) -> str:
    """A word without the punctuation around it; brackets only when unpaired (`[id]` in
    `src/app/[id]/route.ts` stays)."""
    while True:
        before = word
        word = word.strip(_QUOTES).rstrip(".")
        for left, right in _PAIRS:
            if word.startswith(left) and word.count(left) > word.count(right):
                word = word[1:]
            if word.endswith(right) and word.count(right) > word.count(left):
                word = word[:-1]
            if word.startswith(left) and word.endswith(right):
                word = word[1:-1]
        if word == before:
            return word


def tick_lines(text: str, lines: list[int], boxes: list[int], mark: str) -> str:
    """`text` with the checkbox at (line, column) set to `mark`; every other byte as it was."""
    if not lines:
        return text
    parts = re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z", text)
    for line, box in zip(lines, boxes, strict=True):
        row = parts[line]
        if box < len(row) and row[box] in " xX":
            parts[line] = row[:box] + mark + row[box + 1:]
    return "".join(parts)
