"""Telling a live process from a dead one whose pid was reused: its pid and start time; and
the temporary folders a process makes for itself, told from those a killed one left.

A record that names a process (a worker, the process running a run) names it by both, as
`pid:start`; the process is alive while a process with that pid started at that time runs.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from pathlib import Path
from typing import Literal, get_args

from agentrun.removal import remove_tree

# what a process keeps in the temporary folder: a private HOME for the commands it runs
# (tools/environment.py), a scratch index while it snapshots a worktree (agent/snapshots.py)
TempKind = Literal["home", "snapshot", "pool"]
_OWNED = re.compile(rf"agentrun-(?:{'|'.join(get_args(TempKind))})-(\d+)-[a-z0-9_]+")


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


def pid_alive(pid: int) -> bool:
    """Whether a process `pid` exists (another user's counts: it cannot be signalled)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def owned_temp_dir(kind: TempKind) -> Path:
    """A new folder in the temporary folder for this process alone. Its name,
    `agentrun-<kind>-<pid>-<random>`, carries the pid, so that one a killed process left can
    be told from one in use (`discard_stale_temp_dirs`)."""
    return Path(tempfile.mkdtemp(prefix=f"agentrun-{kind}-{os.getpid()}-"))


def discard_stale_temp_dirs() -> list[str]:
    """Remove the folders `owned_temp_dir` made for this user's processes that no longer
    exist (killed before they removed them); returns their paths. A folder whose process
    still runs, another user's, or any other name is left alone."""
    removed = []
    for path in Path(tempfile.gettempdir()).glob("agentrun-*"):
        match = _OWNED.fullmatch(path.name)
        try:
            mine = path.is_dir() and not path.is_symlink() and \
                path.lstat().st_uid == os.getuid()
        except OSError:
            continue
        if match is None or not mine or pid_alive(int(match.group(1))):
            continue
        with contextlib.suppress(OSError):  # what commands left there: any depth
            remove_tree(path)
        removed.append(str(path))
    return removed
