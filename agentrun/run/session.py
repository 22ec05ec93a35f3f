"""Around a run: the checks before it starts, the run lock, and the signal handlers.

Shared by a local run and by `agentrun aggregate`, which runs no workers but merges the same
way and so needs the same guarantees.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from agentrun import gitlock, workspace
from agentrun.core.errors import BadInput, CannotStart, NoSpace, no_space
from agentrun.core.fsutil import check_file_or_absent, check_folder_or_absent, check_link_inside
from agentrun.core.interrupts import RECEIVED
from agentrun.gitlock import clear_git_locks
from agentrun.project import find_project
from agentrun.report.execution_state import state_path
from agentrun.report.state_md import read_state_md
from agentrun.run.own_files import own_changes
from agentrun.spec.model import Spec

# the run's own files: changes to them never make the tree dirty
OWN_PATHS = (".specflow/runs/", ".specflow/execution/", ".specflow/STATE.md")


@dataclass
class Preflight:
    """What the checks before a run found: agentrun's own uncommitted files (own_files), to
    commit once the run lock is held, and what was set right (a stale git lock removed)."""

    own: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def preflight(root: Path, spec: Spec, *, allow_dirty: bool) -> Preflight:
    """Refuse to start (exit 3) when the repository is not in a state we can work in."""
    branch = workspace.current_branch(root)
    if branch is None:
        raise CannotStart("HEAD is detached; a run merges into a branch",
                          hint="check out the branch to merge into, e.g. `git switch main`")
    workspace.head_commit(root)  # CannotStart when there is no commit yet
    notes = clear_git_locks(root, branch)  # before any commit, merge or model call
    project = find_project(root)  # the checkout's, never one found next to the spec
    for path in (spec.path, project.state_md):
        check_link_inside(path, root)  # BadInput: a target outside the repository
    for path, what in ((project.state_md, "the project's state"),
                       (state_path(project.execution_dir, spec.id), "the run's checkpoint")):
        check_file_or_absent(path, what)  # BadInput: a folder where a file is written
    read_state_md(project.state_md)  # BadInput before any work when it cannot be rewritten
    check_writable([project.specflow, project.execution_dir, project.runs_dir,
                    spec.path.resolve().parent,
                    gitlock.git_common_dir(root) / "agentrun" / "runs"])
    own = own_changes(root, project, spec)
    dirty = [p for p in workspace.dirty_paths(root, ignore=OWN_PATHS) if p not in own]
    if dirty and not allow_dirty:
        shown = ", ".join(dirty[:5]) + (f" and {len(dirty) - 5} more" if len(dirty) > 5
                                        else "")
        raise CannotStart(f"uncommitted changes: {shown}",
                          hint="commit or stash them first, or pass --allow-dirty to run "
                               "anyway (changes to files the spec touches still refuse)")
    touched = set(spec.files_to_create) | set(spec.files_to_modify)
    touched |= {f for g in spec.groups for f in g.files}
    overlap = sorted(set(dirty) & touched)
    if overlap:
        raise CannotStart(f"uncommitted changes to files this spec touches: "
                          f"{', '.join(overlap)}",
                          hint="commit or stash them first; a merge could overwrite them")
    return Preflight(own, notes)


def check_writable(folders: list[Path]) -> None:
    """Refuse to start (exit 2) when a folder the run writes to cannot take a new file.

    A run that found out at its end could not record work it had already merged. A real
    file is created and removed, so read-only mounts count too, not just permission bits. A
    file where a folder (or one above it) should be is bad input (exit 2).
    """
    for folder in dict.fromkeys(folders):
        if not check_folder_or_absent(folder):
            continue  # made when it is needed
        try:
            fd, probe = tempfile.mkstemp(prefix=".agentrun-probe-", dir=folder)
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise BadInput(f"cannot write to {folder}: {exc.strerror or exc}",
                           hint=f"make it writable (e.g. `chmod u+w {folder}`) and run "
                                "again") from None


@contextlib.contextmanager
def run_lock(root: Path, run_id: str) -> Iterator[None]:
    lock = gitlock.RunLock(root, run_id)
    try:
        lock.acquire()
    except OSError as exc:  # its record could not be written: the disk is full
        if no_space(exc) is None:
            raise
        raise NoSpace(str(lock.path)) from None
    try:
        yield
    finally:
        lock.release()


@contextlib.contextmanager
def cancel_on_signals(cancel: threading.Event,
                      on_interrupt: Callable[[str], None]) -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP (the terminal closed) set `cancel` (once) and are reported
    by name, so that the run ends as interrupted and says so; the previous handlers come back
    afterwards. Off the main thread the caller handles signals."""
    def handle(signum: int, _frame: object) -> None:
        if cancel.is_set():
            return
        cancel.set()
        on_interrupt(signal.Signals(signum).name)

    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            previous[sig] = signal.signal(sig, handle)
        except ValueError:  # not the main thread
            break
    if previous and RECEIVED:  # taken before, and its exception lost: act on it now
        handle(signal.Signals[RECEIVED[0]], None)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
