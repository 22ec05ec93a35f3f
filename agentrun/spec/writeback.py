"""Lossless edits of a spec's text: the frontmatter `status`, a whole `##` section (Execution
Summary), an entry appended to a section (Audit History). Every byte outside the edited part
is kept, including CRLF line endings and whether the file ends with a newline.

Structure comes from the same tokens the parser reads, so a `## Heading` quoted inside a code
fence is never taken for the end of a section.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from agentrun.core.errors import EXIT_FAILED, AgentrunError, SpecError
from agentrun.core.fsutil import atomic_write_text
from agentrun.spec import frontmatter
from agentrun.spec.markdown import Doc, Heading, norm_title, plain, split_lines
from agentrun.yamlload import safe_load

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_KEY_NAME = re.compile(r"^[A-Za-z_][\w.-]*$")
# what YAML's reader refuses, plus characters it reads as line breaks or a byte-order mark
_YAML_UNSAFE = re.compile("[^\x20-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
                          "|[\u2028\u2029\ufeff]")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_COMMENT = re.compile(r"\s+#.*$")
_PLAIN_UNSAFE = re.compile(r"^[\s\[\]{}&*!|>'\"%@`,?#-]|:\s|\s#|:$|[\r\n\t]|\s$")


def _lines(text: str) -> list[str]:
    """Lines with their endings, split where markdown-it splits them."""
    return _LINE.findall(text)


def _eol(text: str) -> str:
    crlf = text.count("\r\n")
    lf = text.count("\n") - crlf
    cr = text.count("\r") - crlf
    if crlf >= max(lf, cr) and crlf:
        return "\r\n"
    return "\r" if cr > lf else "\n"


def _ends_with_newline(text: str) -> bool:
    return not text or text.endswith(("\n", "\r"))


def _bare(line: str) -> str:
    return line.rstrip("\r\n")


# -- frontmatter ----------------------------------------------------------------------------

def set_frontmatter_value(text: str, key: str, value: str) -> str:
    """Set `key: value` in the frontmatter, wherever it sits (leading, after the title, fenced).

    Replaces the value on the key's line (and an indented block value under it); else inserts
    the key at the end of the block; else adds a leading `---` block. Raises SpecError when the
    frontmatter is never closed, since no edit could be placed safely.
    """
    if not _KEY_NAME.match(key):
        raise ValueError(f"not a frontmatter key: {key!r}")
    value = str(value)
    lines = _lines(text)
    eol = _eol(text)
    block = frontmatter.locate(text)
    if block is None:
        head = f"---{eol}{key}: {_scalar(value, '')}{eol}---{eol}"
        if not text:
            return head
        bom = "\ufeff" if text.startswith("\ufeff") else ""
        rest = text[len(bom):]
        first = split_lines(rest)[:1]
        separator = eol if first and first[0].strip() else ""
        return bom + head + separator + rest
    content = [_bare(line) for line in lines[block.content_start:block.content_end]]
    indents = [len(c) - len(c.lstrip()) for c in content if c.strip() and
               not c.lstrip().startswith("#")]
    base = min(indents) if indents else 0
    pattern = re.compile(rf"^ {{{base}}}{re.escape(key)}(\s*):([ \t]*)(.*)$")
    for offset, line in enumerate(content):
        m = pattern.match(line)
        if m is None:
            continue
        i = block.content_start + offset
        old = m.group(3)
        comment = _COMMENT.search(old) if old[:1] not in ("'", '"') else None
        ending = lines[i][len(_bare(lines[i])):]
        lines[i] = (f"{' ' * base}{key}{m.group(1)}:{m.group(2) or ' '}{_scalar(value, old)}"
                    f"{comment.group(0) if comment else ''}{ending}")
        j = i + 1  # drop the old value's continuation lines (`key:\n  - a\n  - b`)
        while j < block.content_end and _continues(_bare(lines[j]), base, old):
            j += 1
        del lines[i + 1:j]
        return "".join(lines)
    at = block.content_start
    for offset, line in enumerate(content):
        if line.strip():
            at = block.content_start + offset + 1
    lines.insert(at, f"{' ' * base}{key}: {_scalar(value, '')}{eol}")
    return "".join(lines)


def _continues(line: str, base: int, old_value: str) -> bool:
    if not line.strip():
        return False
    indent = len(line) - len(line.lstrip())
    if indent > base:
        return True
    return not old_value.strip() and line[base:].startswith("- ")


def _scalar(value: str, old: str) -> str:
    """`value` as a YAML scalar, quoted only when it must be or when the old value was."""
    quote = old.strip()[:1]
    if quote not in ("'", '"') and _plain_ok(value):
        return value
    if quote == "'" and not _YAML_UNSAFE.search(value):
        return "'" + value.replace("'", "''") + "'"
    return _double_quoted(value)


def _double_quoted(value: str) -> str:
    """A YAML double-quoted scalar; characters YAML forbids or reads as breaks are escaped."""
    out = ['"']
    for ch in value:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif _YAML_UNSAFE.match(ch):
            code = ord(ch)
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _plain_ok(value: str) -> bool:
    if not value or _PLAIN_UNSAFE.search(value) or _YAML_UNSAFE.search(value):
        return False
    try:
        loaded: object = safe_load(value)
    except yaml.YAMLError:
        return False
    return loaded == value


# -- sections -------------------------------------------------------------------------------

def _doc(text: str) -> Doc:
    """Tokens of `text` with `---` frontmatter masked (its last key line and closing `---`
    would otherwise read as a setext `##` heading)."""
    try:
        block = frontmatter.locate_dashed(text)
    except SpecError:
        block = None
    return Doc(text, [block.span]) if block is not None else Doc(text)


def _same(heading: Heading, title: str) -> bool:
    return heading.level == 2 and norm_title(heading.text) == norm_title(title)


def _find(doc: Doc, title: str) -> tuple[Heading, int, int] | None:
    """(heading, end of its content, end of its section). Trailing blank lines and `---`
    separators belong to neither: they stay in front of the next heading."""
    heading = next((h for h in doc.headings if _same(h, title)), None)
    if heading is None:
        return None
    end = doc.section_end(heading)[0]
    rules = {tok.map[0] for tok in doc.tokens
             if tok.type == "hr" and tok.level == 0 and tok.map}
    content_end = end
    while content_end > heading.body_line and (
            not doc.lines[content_end - 1].strip() or content_end - 1 in rules):
        content_end -= 1
    return heading, content_end, end


def _body(body: str, eol: str) -> list[str]:
    rows = split_lines(body)
    while rows and not rows[0].strip():
        rows.pop(0)
    while rows and not rows[-1].strip():
        rows.pop()
    return [row + eol for row in rows]


def _terminate(lines: list[str], index: int, eol: str) -> None:
    if 0 <= index < len(lines) and lines[index] == _bare(lines[index]):
        lines[index] += eol


def _splice(text: str, title: str, new: list[str], replace: bool) -> str:
    lines = _lines(text)
    eol = _eol(text)
    found = _find(_doc(text), title)
    if found is None:
        return _append_section(text, lines, eol, title, new)
    heading, content_end, end = found
    start = heading.body_line if replace else content_end
    piece = [eol, *new] if new else []
    # a `---` right after the content, or the next heading right after it
    separate = bool(lines[content_end].strip()) if content_end < end else end < len(lines)
    if piece and separate:
        piece.append(eol)  # keep a blank line before the next heading or `---`
    if piece and end == len(lines) and content_end == end and not _ends_with_newline(text):
        piece[-1] = _bare(piece[-1])
    _terminate(lines, start - 1, eol)
    lines[start:content_end if replace else start] = piece
    return "".join(lines)


def _append_section(text: str, lines: list[str], eol: str, title: str,
                    body: list[str]) -> str:
    while lines and not lines[-1].strip():
        lines.pop()
    out = list(lines)
    if out:
        _terminate(out, len(out) - 1, eol)
        out.append(eol)
    out.append(f"## {title}{eol}")
    if body:
        out.extend([eol, *body])
    if not _ends_with_newline(text):
        out[-1] = _bare(out[-1])
    return "".join(out)


def upsert_section(text: str, title: str, body: str) -> str:
    """Replace the body of the `## title` section, or append the section at the end."""
    return _splice(text, title, _body(body, _eol(text)), replace=True)


def append_to_section(text: str, title: str, block: str) -> str:
    """Append `block` after the content of the `## title` section (before any trailing `---`
    and the next `##` heading), creating the section at the end if it is absent."""
    return _splice(text, title, _body(block, _eol(text)), replace=False)


_BOX = re.compile(r"^([ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+\[)([ xX])(\])")


def set_checkboxes(text: str, checks: dict[int, bool]) -> str:
    """Tick (`[x]`) or clear (`[ ]`) the task-list box of the item starting on each given line
    (1-based, as `Criterion.line`), every other byte unchanged; a line without a box stays as
    it is."""
    lines = _lines(text)
    for number, checked in checks.items():
        index = number - 1
        match = _BOX.match(lines[index]) if 0 <= index < len(lines) else None
        if match is None or (match.group(2) != " ") == checked:
            continue
        lines[index] = match.group(1) + ("x" if checked else " ") + lines[index][match.end(2):]
    return "".join(lines)


def next_audit_version(text: str) -> int:
    """1 + the highest `### Audit vN` under `## Audit History` (1 when there is none)."""
    return next_version(text, "Audit History", "audit")


def next_version(text: str, section: str, word: str) -> int:
    """1 + the highest `### <Word> vN` under `## <section>` (1 when there is none)."""
    doc = _doc(text)
    heading = next((h for h in doc.headings if _same(h, section)), None)
    if heading is None:
        return 1
    pattern = re.compile(rf"\b{re.escape(word)}\s+v(\d{{1,6}})(?!\d)", re.I)
    start, end = doc.body_tokens(heading)
    versions = [int(m.group(1)) for h in doc.headings_within(start, end) if h.level >= 3
                for m in [pattern.search(plain(h.inline.children or []))] if m]
    return max(versions, default=0) + 1


class SpecChanged(AgentrunError):
    """The spec file changed on disk while it was being worked on; nothing was written."""

    exit_code = EXIT_FAILED


def replace_if_unchanged(path: Path, read: str, new: str, activity: str) -> None:
    """Write `new` to `path` (atomically) only if the file still holds the text `read`, so a
    person's edit made while an agent audited or reviewed the spec is never overwritten."""
    try:
        current = path.read_bytes()
    except OSError as exc:
        raise SpecChanged(f"cannot read {path} again before writing: {exc}",
                          hint=f"check the file, then {activity} again") from None
    if current != read.encode("utf-8"):
        raise SpecChanged(f"{path} changed while it was being {activity}ed; nothing was "
                          "written", hint=f"{activity} it again")
    atomic_write_text(path, new)
