"""The output layer: the only code that writes to stdout.

Three modes: `human` (Rich, live progress) when stderr is a TTY and `CI` is unset; `plain`
(timestamped lines) otherwise; `json` prints exactly one JSON document on stdout while progress
still goes to stderr.
"""

from __future__ import annotations

import json
import os
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
                                   force_terminal=None if self.mode == "human" else False)
        return self._stdout

    @property
    def stderr(self):
        """A Rich console on stderr (progress, warnings, errors)."""
        if self._stderr is None:
            from rich.console import Console

            self._stderr = Console(stderr=True, highlight=False, soft_wrap=True,
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
            sys.stderr.write(f"{stamp} {_strip_markup(message)}\n")
            sys.stderr.flush()

    def warn(self, message: str) -> None:
        if self.mode == "human":
            self.stderr.print(f"[yellow]warning:[/yellow] {message}", markup=True)
        else:
            sys.stderr.write(f"warning: {_strip_markup(message)}\n")

    def error(self, message: str, hint: str | None = None) -> None:
        if self.mode == "human":
            from rich.markup import escape

            self.stderr.print(f"[bold red]error:[/bold red] {escape(message)}")
            if hint:
                self.stderr.print(f"[dim]hint:[/dim] {escape(hint)}")
        else:
            sys.stderr.write(f"error: {message}\n")
            if hint:
                sys.stderr.write(f"hint: {hint}\n")
        sys.stderr.flush()


def _strip_markup(text: str) -> str:
    from rich.text import Text

    try:
        return Text.from_markup(text).plain
    except Exception:  # not valid markup: print it as it is
        return text
