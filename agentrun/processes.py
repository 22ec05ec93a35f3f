"""Telling a live process from a dead one whose pid was reused: its pid and start time.

A record that names a process (a worker, the process running a run) names it by both, as
`pid:start`; the process is alive while a process with that pid started at that time runs.
"""

from __future__ import annotations

import os
from pathlib import Path


def start_time(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot), to tell it from a later process
    that reuses its pid; None when there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()  # the name in parentheses may hold spaces
    return fields[19] if len(fields) > 19 else None


def token(pid: int | None = None) -> str | None:
    """`pid:start` of process `pid` (default: this one); None where it cannot be told."""
    pid = os.getpid() if pid is None else pid
    started = start_time(pid)
    return f"{pid}:{started}" if started else None


def alive(named: str) -> bool | None:
    """Whether the process a `token` names still runs; None when that cannot be told here
    (no /proc, or not a token)."""
    pid, _, started = named.partition(":")
    if not pid.isdigit() or not started or not Path("/proc/self/stat").exists():
        return None
    return start_time(int(pid)) == started
