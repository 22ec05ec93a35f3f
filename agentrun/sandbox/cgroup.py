"""A process cap that holds for root: each sandboxed command in a cgroup of its own.

The jail's process limit is RLIMIT_NPROC (`jail.limited`), which counts a user's processes
and which the kernel does not apply to root — the user agentrun often runs as in a container
or on a CI runner. A cgroup's `pids.max` counts the processes and threads in the cgroup,
whoever owns them. Where this process can make a child cgroup with the pids controller
(cgroup v1: the pids hierarchy; cgroup v2: its own cgroup, a delegated subtree), every
command bubblewrap runs joins a fresh one before bwrap starts, so nothing it forks escapes
it, and the cgroup is removed when the command is gone. Where none can be made, the rlimit is
all there is; for root a run says so once (`process_cap_note`).

Memory stays a per-process rlimit: `sandbox: limits: memory_mb` is what each process may
allocate, and a cgroup's limit would be one total for the whole command (a test runner's
workers together), another setting.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from agentrun.processes import pid_alive

PREFIX = "agentrun-"  # a command's cgroup: agentrun-<pid of the process that made it>-<n>
# bwrap itself and the init of its PID namespace, which the cgroup counts beside the command
BWRAP_PROCESSES = 2
REMOVE_WAIT_S = 2.0  # for the kernel to let go of a killed command's last processes
_numbers = itertools.count(1)


@dataclass(frozen=True)
class CgroupParent:
    """A folder in which this process can make cgroups with a `pids.max` of their own."""

    path: Path
    version: int  # 1 or 2


def mounts(mountinfo: str) -> list[tuple[str, Path, str, set[str]]]:
    """The cgroup file systems of a `/proc/self/mountinfo`: (root inside the hierarchy,
    mount point, "cgroup" or "cgroup2", super options)."""
    found = []
    for line in mountinfo.splitlines():
        fields, _, tail = line.partition(" - ")
        parts, rest = fields.split(), tail.split()
        if len(parts) >= 5 and len(rest) >= 3 and rest[0] in ("cgroup", "cgroup2"):
            found.append((parts[3], Path(parts[4]), rest[0], set(rest[2].split(","))))
    return found


def candidates(mountinfo: str, own: str) -> list[CgroupParent]:
    """Where this process's own cgroup lies in each hierarchy that has the pids controller
    (`own`: the text of `/proc/self/cgroup`), v1's first."""
    mine: dict[str, str] = {}  # controllers ("" for v2) -> path
    for line in own.splitlines():
        _, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        mine[controllers] = path
    v1 = next((path for names, path in mine.items() if "pids" in names.split(",")), None)
    found: list[CgroupParent] = []
    for root, point, fstype, options in mounts(mountinfo):
        at = v1 if fstype == "cgroup" and "pids" in options else (
            mine.get("") if fstype == "cgroup2" else None)
        if at is None or not (at + "/").startswith(root.rstrip("/") + "/"):
            continue  # the mount shows another part of the hierarchy
        where = CgroupParent(point / at[len(root.rstrip("/")):].strip("/"),
                             1 if fstype == "cgroup" else 2)
        if where not in found:
            found.append(where)
    return sorted(found, key=lambda c: c.version)


def usable(where: CgroupParent) -> bool:
    """Whether a command can be capped under `where`: a cgroup made there has a `pids.max`
    (the kernel makes it; a plain folder would not) that takes a value, and a process can
    join it. For v2 the pids controller is enabled for the children of this process's own
    cgroup, which is what a delegated subtree is for."""
    try:
        if where.version == 2:
            control = where.path / "cgroup.subtree_control"
            if "pids" not in control.read_text().split():
                control.write_text("+pids")
        with command_cgroup(where, 8) as join:
            if not join:
                return False
            proc = subprocess.run([*join, "/bin/true"], capture_output=True, timeout=10,
                                  check=False)
            return proc.returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@functools.cache
def cgroup_parent() -> CgroupParent | None:
    """Where this machine lets agentrun cap a command's processes (looked at once a process);
    None where it does not. Empty cgroups that dead agentrun processes left are removed."""
    try:
        mountinfo = Path("/proc/self/mountinfo").read_text()
        own = Path("/proc/self/cgroup").read_text()
    except OSError:
        return None
    for where in candidates(mountinfo, own):
        if os.access(where.path, os.W_OK) and usable(where):
            sweep(where)
            return where
    return None


@contextlib.contextmanager
def command_cgroup(where: CgroupParent | None, processes: int) -> Iterator[list[str]]:
    """A fresh cgroup under `where` that holds at most `processes` processes and threads of
    a command besides bwrap's own, for the duration of the block; yields the argv prefix that
    makes the command join it before it starts ([] when no cgroup could be made: the command
    runs under its rlimit alone). On the way out whatever is left in it is killed and the
    cgroup removed."""
    if where is None or processes <= 0:
        yield []
        return
    path = where.path / f"{PREFIX}{os.getpid()}-{next(_numbers)}"
    try:
        path.mkdir()
    except OSError:
        yield []
        return
    try:
        limit = path / "pids.max"
        if not limit.exists():  # not a cgroup
            yield []
            return
        limit.write_text(str(processes + BWRAP_PROCESSES))
        yield ["/bin/sh", "-c", 'echo $$ > "$1" || exit 126; shift; exec "$@"',
               "agentrun-cgroup", str(path / "cgroup.procs")]
    finally:
        remove(path)


def remove(path: Path) -> bool:
    """Kill what is left in the cgroup at `path` and remove it (the kernel refuses while a
    process is in it, for a moment after the last one was killed)."""
    deadline = time.monotonic() + REMOVE_WAIT_S
    delay = 0.001
    while True:
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            pass
        if time.monotonic() >= deadline:
            return False
        _kill_members(path)
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _kill_members(path: Path) -> None:
    try:
        pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def sweep(where: CgroupParent) -> None:
    """Remove the empty cgroups of agentrun processes that are gone (killed while a command
    ran); a cgroup with a process still in it stays."""
    try:
        entries = list(where.path.iterdir())
    except OSError:
        return
    for entry in entries:
        owner = entry.name[len(PREFIX):].split("-")[0]
        if not entry.name.startswith(PREFIX) or not owner.isdigit() or pid_alive(int(owner)):
            continue
        with contextlib.suppress(OSError):
            entry.rmdir()


def process_cap_note(processes: int) -> str | None:
    """What a run says once when its sandbox's process limit cannot hold: agentrun runs as
    root, which RLIMIT_NPROC exempts, and no cgroup can be made here."""
    if processes <= 0 or os.geteuid() != 0 or cgroup_parent() is not None:
        return None
    return (f"the sandbox's process limit ({processes}) is not enforced: agentrun runs as "
            "root, which the kernel exempts from RLIMIT_NPROC, and no cgroup with the pids "
            "controller is writable here (give agentrun a delegated cgroup, or run it as "
            "another user)")
