"""JSON with positions: where each object starts and where each member's value sits, so that
an error names a line and a write-back replaces one value and keeps every other byte.

`json` gives values only; this reader gives the same values plus, for every object, its line
and the spans of its members' values (objects are keyed by `id()`, valid while the parsed
value is alive).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_DECODER = json.JSONDecoder()


@dataclass
class ObjectSpan:
    start: int  # offset of `{`
    end: int  # offset after `}`
    line: int  # 1-based line of `{`
    values: dict[str, tuple[int, int]] = field(default_factory=dict)  # member -> value span
    last_value_end: int = -1  # offset after the last member's value (-1: empty object)


class JsonSpanError(ValueError):
    def __init__(self, message: str, pos: int, text: str) -> None:
        self.line = text.count("\n", 0, pos) + 1
        super().__init__(f"{message} (line {self.line})")


def parse(text: str) -> tuple[Any, dict[int, ObjectSpan]]:
    spans: dict[int, ObjectSpan] = {}
    pos = _WS.match(text, 0).end()  # type: ignore[union-attr]
    value, pos = _value(text, pos, spans)
    pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
    if pos != len(text):
        raise JsonSpanError("extra data after the JSON value", pos, text)
    return value, spans


def _value(text: str, pos: int, spans: dict[int, ObjectSpan]) -> tuple[Any, int]:
    if pos >= len(text):
        raise JsonSpanError("unexpected end of the file", pos, text)
    ch = text[pos]
    if ch == "{":
        return _object(text, pos, spans)
    if ch == "[":
        out: list[Any] = []
        pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
        if text.startswith("]", pos):
            return out, pos + 1
        while True:
            item, pos = _value(text, pos, spans)
            out.append(item)
            pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
            if text.startswith(",", pos):
                pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
            elif text.startswith("]", pos):
                return out, pos + 1
            else:
                raise JsonSpanError("expected ',' or ']'", pos, text)
    if ch == '"':
        try:
            return _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise JsonSpanError(exc.msg, exc.pos, text) from None
    for word, val in (("true", True), ("false", False), ("null", None)):
        if text.startswith(word, pos):
            return val, pos + len(word)
    m = _NUMBER.match(text, pos)
    if m:
        number = m.group(0)
        return (float(number) if any(c in number for c in ".eE") else int(number)), m.end()
    raise JsonSpanError("expected a JSON value", pos, text)


def _object(text: str, pos: int, spans: dict[int, ObjectSpan]) -> tuple[Any, int]:
    span = ObjectSpan(start=pos, end=pos, line=text.count("\n", 0, pos) + 1)
    out: dict[str, Any] = {}
    pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
    if text.startswith("}", pos):
        span.end = pos + 1
        spans[id(out)] = span
        return out, pos + 1
    while True:
        if not text.startswith('"', pos):
            raise JsonSpanError("expected a member name", pos, text)
        key, pos = _value(text, pos, spans)
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        if not text.startswith(":", pos):
            raise JsonSpanError("expected ':'", pos, text)
        pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
        start = pos
        value, pos = _value(text, pos, spans)
        out[key] = value
        span.values[key] = (start, pos)
        span.last_value_end = pos
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        if text.startswith(",", pos):
            pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
        elif text.startswith("}", pos):
            span.end = pos + 1
            spans[id(out)] = span
            return out, pos + 1
        else:
            raise JsonSpanError("expected ',' or '}'", pos, text)
