"""Asking a person a yes/no question, only when one can answer (stdin is a terminal)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext

# What has to stand still while a person reads a question: a live display redrawing the
# terminal would paint over it (the CLI installs its display here for the length of a run).
_hold: Callable[[], AbstractContextManager[object]] = nullcontext


@contextlib.contextmanager
def screen_held_by(hold: Callable[[], AbstractContextManager[object]]) -> Iterator[None]:
    """While in this block, every question is asked inside `hold()`."""
    global _hold
    previous, _hold = _hold, hold
    try:
        yield
    finally:
        _hold = previous


def ask_yes_no(question: str) -> bool:
    """Prompt on stderr and read stdin; without a terminal the answer is no, at once."""
    if not sys.stdin or not sys.stdin.isatty():
        return False
    with _hold():
        try:
            sys.stderr.write(f"{question} [y/N] ")
            sys.stderr.flush()
            answer = sys.stdin.readline()
        except (OSError, EOFError, KeyboardInterrupt):
            return False
    return answer.strip().lower() in ("y", "yes")
