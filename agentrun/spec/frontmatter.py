"""Finding and reading a spec's frontmatter in the three places users put it.

`---` YAML at the top; the same block after a leading `# Title` line or `> blockquote`; or a
fenced ```` ```yaml ```` block before the first `##` heading. Finding the block is line-based and
does not need valid YAML, so the writer can edit a block the reader would reject.
"""

from __future__ import annotations

import base64
import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

import yaml

from agentrun.core.errors import SpecError
from agentrun.spec.markdown import Doc, split_lines
from agentrun.spec.model import FrontmatterStyle
from agentrun.yamlload import safe_load

KNOWN_KEYS = ("id", "type", "status", "priority", "complexity", "created", "parent",
              "depends_on", "todo", "title")

_KEY_LINE = re.compile(r"^[A-Za-z0-9_\"'][\w .\-\"']*:(?:\s|$)")
_KNOWN_LINE = re.compile(rf"^(?:{'|'.join(KNOWN_KEYS)})\s*:", re.I)
_H1 = re.compile(r"^ {0,3}#(?:[ \t]|$)")
_QUOTE = re.compile(r"^ {0,3}>")
_DEEPER_HEADING = re.compile(r"^ {0,3}#{2,6}(?:[ \t]|$)")
_HINT = "fix the YAML between the frontmatter delimiters (one `key: value` per line)"


@dataclass(frozen=True)
class Block:
    """Where the frontmatter is. Lines are 0-based; `content_end` is exclusive and is also the
    line of the closing delimiter (`---` or the closing fence)."""

    style: FrontmatterStyle  # "leading" | "after_heading" | "fenced"
    open_line: int
    content_start: int
    content_end: int
    yaml_text: str

    @property
    def span(self) -> range:
        """Lines taken up by the block, delimiters included."""
        return range(self.open_line, self.content_end + 1)


def _is_delim(line: str) -> bool:
    return line.rstrip() == "---"


def _first_content(lines: list[str], start: int, end: int) -> str:
    for line in lines[start:end]:
        s = line.strip()
        if s and not s.startswith("#"):
            return line
    return ""


def _dash_block(lines: list[str], open_line: int, style: FrontmatterStyle,
                path: str) -> Block | None:
    close = None
    for i in range(open_line + 1, len(lines)):
        if _is_delim(lines[i]):
            close = i
            break
        if _DEEPER_HEADING.match(lines[i]):
            break
    key_like = bool(_KEY_LINE.match(_first_content(lines, open_line + 1, close or len(lines))))
    if close is None:
        if key_like:
            raise SpecError(f"{path}:{open_line + 1}: frontmatter opened with `---` is never "
                            "closed", "add a `---` line after the last frontmatter key",
                            path=path, line=open_line + 1)
        return None  # a thematic break, not frontmatter
    if style == "after_heading" and not key_like:
        return None
    text = "\n".join(lines[open_line + 1:close])
    return Block(style, open_line, open_line + 1, close, text)


def locate(text: str, path: str = "<spec>") -> Block | None:
    """The frontmatter block of `text`, or None. Raises SpecError for an unclosed block."""
    return locate_dashed(text, path) or locate_fenced(Doc(text), path)


def locate_dashed(text: str, path: str = "<spec>") -> Block | None:
    """A `---` block at the top, or after a leading `# Title` line and/or `> blockquote`."""
    lines = split_lines(text)
    if lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]
    i = 0
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i < len(lines) and _is_delim(lines[i]):
        return _dash_block(lines, i, "leading", path)
    seen_prefix = seen_h1 = False
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            pass
        elif _H1.match(line) and not seen_h1:
            seen_h1 = seen_prefix = True
        elif _QUOTE.match(line):
            seen_prefix = True
        else:
            break
        i += 1
    if seen_prefix and i < len(lines) and _is_delim(lines[i]):
        return _dash_block(lines, i, "after_heading", path)
    return None


def locate_fenced(doc: Doc, path: str = "<spec>") -> Block | None:
    """A fenced ```` ```yaml ```` block with spec keys before the first `##` heading."""
    for tok in doc.tokens:
        if tok.type == "heading_open" and tok.level == 0 and tok.tag != "h1":
            return None
        if tok.type != "fence" or tok.level != 0 or not tok.map:
            continue
        info = tok.info.strip().split(maxsplit=1)
        if not info or info[0].lower() not in ("yaml", "yml"):
            continue
        body = tok.content.split("\n")
        if not _KEY_LINE.match(_first_content(body, 0, len(body))):
            continue
        if not any(_KNOWN_LINE.match(line) for line in body):
            continue  # an example config, not the spec's metadata
        start = tok.map[0] + 1
        end = start + tok.content.count("\n")
        if end >= tok.map[1]:
            raise SpecError(f"{path}:{tok.map[0] + 1}: fenced frontmatter is never closed",
                            "add the closing ``` line after the last frontmatter key",
                            path=path, line=tok.map[0] + 1)
        return Block("fenced", tok.map[0], start, end, tok.content)
    return None


def load(block: Block, path: str = "<spec>") -> dict[str, Any]:
    """The block's YAML as a JSON-serialisable mapping. Raises SpecError naming the line."""
    try:
        data = safe_load(block.yaml_text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = block.content_start + (mark.line if mark else 0) + 1
        problem = " ".join(str(p) for p in (exc.context, exc.problem) if p)
        raise SpecError(f"{path}:{line}: invalid YAML in frontmatter: {problem}", _HINT,
                        path=path, line=line) from exc
    except (yaml.YAMLError, ValueError, TypeError, OverflowError, RecursionError) as exc:
        # e.g. `created: 2026-13-45` matches YAML's timestamp pattern but is no date
        line = block.content_start + 1
        raise SpecError(f"{path}:{line}: invalid YAML in frontmatter: {exc}", _HINT,
                        path=path, line=line) from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        line = block.open_line + 1
        raise SpecError(f"{path}:{line}: frontmatter is not a mapping of keys "
                        f"(it is a YAML {type(data).__name__})",
                        "write the frontmatter as `key: value` lines, e.g. `status: draft`",
                        path=path, line=line)
    try:
        result: dict[str, Any] = _plain(data, set())
    except _RecursiveAlias as exc:
        line = block.content_start + 1
        raise SpecError(f"{path}:{line}: {exc}", "replace the `*alias` that refers to its own "
                        "parent with a plain value", path=path, line=line) from exc
    return result


class _RecursiveAlias(ValueError):
    pass


def _plain(value: Any, active: set[int], done: dict[int, Any] | None = None) -> Any:
    """Dates to ISO strings, sets to lists, bytes to base64, keys to strings: JSON-ready.
    Shared aliases are converted once (`done`), so `&a`/`*a` chains cannot blow up."""
    done = {} if done is None else done
    if isinstance(value, dt.date | dt.datetime | dt.time):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if not isinstance(value, dict | list | set | tuple):
        return value
    key = id(value)
    if key in done:
        return done[key]
    if key in active:
        raise _RecursiveAlias("frontmatter contains a recursive YAML alias")
    active.add(key)
    try:
        if isinstance(value, dict):
            result: Any = {k if isinstance(k, str) else str(_plain(k, active, done)):
                           _plain(v, active, done) for k, v in value.items()}
        else:
            items = sorted(value, key=repr) if isinstance(value, set) else value
            result = [_plain(v, active, done) for v in items]
    finally:
        active.discard(key)
    done[key] = result
    return result
