"""JSON with positions: where each object starts and where each member's value sits, so that
an error names a line and a write-back replaces one value and keeps every other byte.

`json` gives values only; this reader gives the same values plus, for every object, its line
and the spans of its members' values (objects are keyed by `id()`, valid while the parsed
value is alive). `json` checks the text first, so the scan below can take it as valid; strings
and numbers are decoded by `json` too.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+', re.S)


@dataclass
class ObjectSpan:
    start: int  # offset of `{`
    end: int  # offset after `}`
    line: int  # 1-based line of `{`
    values: dict[str, tuple[int, int]] = field(default_factory=dict)  # member -> value span
    last_value_end: int = -1  # offset after the last member's value (-1: empty object)


class JsonSpanError(ValueError):
    def __init__(self, message: str, line: int) -> None:
        self.line = line
        super().__init__(f"{message} (line {line})")


@dataclass
class _Frame:
    value: Any
    start: int
    span: ObjectSpan | None
    key: str | None = None


def parse(text: str) -> tuple[Any, dict[int, ObjectSpan]]:
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        raise JsonSpanError(exc.msg, exc.lineno) from None
    spans: dict[int, ObjectSpan] = {}
    stack: list[_Frame] = []
    result: list[Any] = []
    line, counted = 1, 0

    def place(value: Any, start: int, end: int) -> None:
        if not stack:
            result.append(value)
            return
        parent = stack[-1]
        if parent.span is None:
            parent.value.append(value)
            return
        assert parent.key is not None
        parent.value[parent.key] = value
        parent.span.values[parent.key] = (start, end)
        parent.span.last_value_end = end
        parent.key = None

    for m in _TOKEN.finditer(text):
        token = m.group(0)
        first = token[0]
        if first in ",:":
            continue
        if first in "{[":
            value: Any = {} if first == "{" else []
            span = None
            if first == "{":
                line += text.count("\n", counted, m.start())
                counted = m.start()
                span = ObjectSpan(start=m.start(), end=-1, line=line)
                spans[id(value)] = span
            stack.append(_Frame(value, m.start(), span))
        elif first in "}]":
            frame = stack.pop()
            if frame.span is not None:
                frame.span.end = m.end()
            place(frame.value, frame.start, m.end())
        elif stack and stack[-1].span is not None and stack[-1].key is None:
            stack[-1].key = json.loads(token)  # a member name
        else:
            place(json.loads(token), m.start(), m.end())
    return result[0], spans
