"""The output layer: the only code that writes to stdout.

Three modes: `human` (Rich, live progress) when stderr is a TTY and `CI` is unset; `plain`
(timestamped lines) otherwise; `json` prints exactly one JSON document on stdout while progress
still goes to stderr.

`--events -` gives stderr to the event stream, which must carry JSON lines only: the log
(progress, warnings, errors) then goes to stdout before the report, or, with `--json`, nowhere
(the JSON document holds the warnings and the error, the event stream the progress).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from typing import IO, TYPE_CHECKING, Any, Literal, Protocol, cast

if TYPE_CHECKING:
    from rich.console import Console

OutputMode = Literal["human", "plain", "json"]


def detect_mode(json_flag: bool = False) -> OutputMode:
    if json_flag:
        return "json"
    if os.environ.get("CI") or not sys.stderr.isatty():
        return "plain"
    return "human"


def events_on_stderr(args: list[str]) -> bool:
    """Whether a command line asks for the event stream on stderr (`--events -`)."""
    return "--events=-" in args or any(a == "--events" and b == "-"
                                       for a, b in zip(args, args[1:], strict=False))


class Output:
    def __init__(self, mode: OutputMode, *, events_on_stderr: bool = False) -> None:
        self.events_on_stderr = events_on_stderr
        # the stream the log goes to (None: dropped); a live table would draw on stderr
        self.log_name: str | None = "stderr"
        if events_on_stderr:
            mode = "plain" if mode == "human" else mode
            self.log_name = None if mode == "json" else "stdout"
        self.mode = mode
        self._stdout: Console | None = None
        self._stderr: Console | None = None

    @property
    def log(self) -> TextSink:
        """The log's stream: stderr, or what `--events -` left for it."""
        return getattr(sys, self.log_name) if self.log_name else _DROPPED

    @property
    def interactive(self) -> bool:
        """Whether a question may be asked (on stderr, in a terminal; never while stderr
        carries the event stream)."""
        return sys.stdin.isatty() and not os.environ.get("CI") and not self.events_on_stderr

    @property
    def stdout(self) -> Console:
        """A Rich console on stdout (human/plain reports)."""
        if self._stdout is None:
            from rich.console import Console

            plain = _for_rich(LineGuard("stdout"))
            self._stdout = Console(highlight=False, soft_wrap=True,
                                   file=None if self.mode == "human" else plain,
                                   force_terminal=None if self.mode == "human" else False)
        return self._stdout

    @property
    def stderr(self) -> Console:
        """A Rich console for the log (progress, warnings, errors): on stderr, or where
        `--events -` left the log."""
        if self._stderr is None:
            from rich.console import Console

            plain = LineGuard(self.log_name) if self.log_name else _DROPPED
            self._stderr = Console(stderr=True, highlight=False, soft_wrap=True,
                                   file=None if self.mode == "human" else _for_rich(plain),
                                   force_terminal=None if self.mode == "human" else False)
        return self._stderr

    def json(self, document: Any) -> None:
        sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False, default=str) + "\n")
        sys.stdout.flush()

    def progress(self, message: str) -> None:
        """A progress line for the log: timestamped in plain/json mode."""
        if self.mode == "human":
            self.stderr.print(message)
        else:
            stamp = time.strftime("%H:%M:%S")
            self.log.write(inert(f"{stamp} {_strip_markup(message)}") + "\n")
            self.log.flush()

    def warn(self, message: str) -> None:
        """A warning, its text as it is: a hint such as `pip install 'x[otel]'` keeps its
        brackets (they are not markup)."""
        if self.mode == "human":
            from rich.markup import escape

            self.stderr.print(f"[yellow]warning:[/yellow] {escape(message)}", markup=True)
        else:
            self.log.write(inert(f"warning: {message}") + "\n")

    def error(self, message: str, hint: str | None = None) -> None:
        if self.mode == "human":
            from rich.markup import escape

            self.stderr.print(f"[bold red]error:[/bold red] {escape(message)}")
            if hint:
                self.stderr.print(f"[dim]hint:[/dim] {escape(hint)}")
        else:
            self.log.write(inert(f"error: {message}") + "\n")
            if hint:
                self.log.write(inert(f"hint: {hint}") + "\n")
        self.log.flush()


# what a CI runner reads as a command at the start of a line: `::add-mask::`, `::error::`,
# and the older `##[error]` form (runners ignore leading whitespace)
_COMMAND_START = re.compile(r"^(\s*)(::|##\[)", re.M)


def inert(text: str) -> str:
    """`text` with no line that a CI runner would take as a workflow command (model text —
    an error, a summary — reaches these lines; agentrun's own annotations do not go here)."""
    return _COMMAND_START.sub(lambda m: m.group(1) + m.group(2)[0] + " " + m.group(2)[1:],
                              text)


class TextSink(Protocol):
    """What the log writes to: a text stream's `write` and `flush`."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


def _for_rich(sink: TextSink) -> IO[str]:
    """`sink` as Rich's `file`: Rich's Console only writes, flushes and asks `isatty` (which
    both sinks here answer), the rest of `IO[str]` it never calls."""
    return cast("IO[str]", sink)


class _Dropped:
    """A stream that keeps nothing: the log when stdout and stderr are both taken."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


_DROPPED = _Dropped()


class LineGuard:
    """A text stream for Rich in plain mode: `inert` on every write, to whatever
    `sys.stdout`/`sys.stderr` is at that moment."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._at_start = True

    def write(self, text: str) -> int:
        stream: IO[str] = getattr(sys, self.name)
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
