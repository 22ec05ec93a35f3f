"""Asking a person a yes/no question, only when one can answer (stdin is a terminal)."""

from __future__ import annotations

import sys


def ask_yes_no(question: str) -> bool:
    """Prompt on stderr and read stdin; without a terminal the answer is no, at once."""
    if not sys.stdin or not sys.stdin.isatty():
        return False
    try:
        sys.stderr.write(f"{question} [y/N] ")
        sys.stderr.flush()
        answer = sys.stdin.readline()
    except (OSError, EOFError, KeyboardInterrupt):
        return False
    return answer.strip().lower() in ("y", "yes")
