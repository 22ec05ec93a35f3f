"""The output layer: the only code that writes to stdout.

Three modes: `human` (Rich, live progress) when stderr is a TTY and `CI` is unset; `plain`
(timestamped lines) otherwise; `json` prints exactly one JSON document on stdout while progress
still goes to stderr.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from typing import Any, Literal

Mode = Literal["human", "plain", "json"]


def detect_mode(json_flag: bool = False) -> Mode:
    if json_flag:
        return "json"
    if os.environ.get("CI") or not sys.stderr.isatty():
        return "plain"
    return "human"


class Output:
    def __init__(self, mode: Mode) -> None:
        self.mode = mode
        self._stdout = None
        self._stderr = None

    @property
    def stdout(self):
        """A Rich console on stdout (human/plain reports)."""
        if self._stdout is None:
            from rich.console import Console

            self._stdout = Console(highlight=False, soft_wrap=True,
                                   file=None if self.mode == "human" else LineGuard("stdout"),
                                   force_terminal=None if self.mode == "human" else False)
        return self._stdout

    @property
    def stderr(self):
        """A Rich console on stderr (progress, warnings, errors)."""
        if self._stderr is None:
            from rich.console import Console

            self._stderr = Console(stderr=True, highlight=False, soft_wrap=True,
                                   file=None if self.mode == "human" else LineGuard("stderr"),
                                   force_terminal=None if self.mode == "human" else False)
        return self._stderr

    def json(self, document: Any) -> None:
        sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False, default=str) + "\n")
        sys.stdout.flush()

    def progress(self, message: str) -> None:
        """A progress line on stderr: timestamped in plain/json mode."""
        if self.mode == "human":
            self.stderr.print(message)
        else:
            stamp = time.strftime("%H:%M:%S")
            sys.stderr.write(inert(f"{stamp} {_strip_markup(message)}") + "\n")
            sys.stderr.flush()

    def warn(self, message: str) -> None:
        if self.mode == "human":
            self.stderr.print(f"[yellow]warning:[/yellow] {message}", markup=True)
        else:
            sys.stderr.write(inert(f"warning: {_strip_markup(message)}") + "\n")

    def error(self, message: str, hint: str | None = None) -> None:
        if self.mode == "human":
            from rich.markup import escape

            self.stderr.print(f"[bold red]error:[/bold red] {escape(message)}")
            if hint:
                self.stderr.print(f"[dim]hint:[/dim] {escape(hint)}")
        else:
            sys.stderr.write(inert(f"error: {message}") + "\n")
            if hint:
                sys.stderr.write(inert(f"hint: {hint}") + "\n")
        sys.stderr.flush()


# what a CI runner reads as a command at the start of a line: `::add-mask::`, `::error::`,
# and the older `##[error]` form (runners ignore leading whitespace)
_COMMAND_START = re.compile(r"^(\s*)(::|##\[)", re.M)


def inert(text: str) -> str:
    """`text` with no line that a CI runner would take as a workflow command (model text —
    an error, a summary — reaches these lines; agentrun's own annotations do not go here)."""
    return _COMMAND_START.sub(lambda m: m.group(1) + m.group(2)[0] + " " + m.group(2)[1:],
                              text)


class LineGuard:
    """A text stream for Rich in plain mode: `inert` on every write, to whatever
    `sys.stdout`/`sys.stderr` is at that moment."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._at_start = True

    def write(self, text: str) -> int:
        stream = getattr(sys, self.name)
        safe = inert(text) if self._at_start else _after_first_line(text)
        if text:
            self._at_start = text.endswith("\n")
        return stream.write(safe)

    def flush(self) -> None:
        getattr(sys, self.name).flush()

    def isatty(self) -> bool:
        return False


def _after_first_line(text: str) -> str:
    """`inert` for a write that continues a line: its first line is not a line start."""
    head, sep, rest = text.partition("\n")
    return head + sep + inert(rest)


def _strip_markup(text: str) -> str:
    from rich.text import Text

    try:
        return Text.from_markup(text).plain
    except Exception:  # not valid markup: print it as it is
        return text
