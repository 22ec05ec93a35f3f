"""File locks in the shared git dir: one run per project, and one worktree change at a time.

Both locks use fcntl.flock on a file in `<git-common-dir>`, which every worktree of the
repository shares. flock belongs to the open file, so the operating system drops it when the
holder exits or is killed: a crashed run never leaves a stale lock behind. The lock files are
never replaced or deleted (a rename would give a second process a fresh inode to lock), so
they are rewritten in place rather than through fsutil's atomic writes.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from agentrun.errors import CannotStart
from agentrun.gitcli import run_git

RUN_LOCK_NAME = "agentrun-run.lock"
WORKTREE_LOCK_NAME = "agentrun-worktree.lock"


_COMMON_DIRS: dict[str, Path] = {}  # directory -> its common git dir


def git_common_dir(root: Path) -> Path:
    """The git dir shared by all worktrees (`.git` of the main worktree), as an absolute path.

    Remembered per directory for as long as that git dir exists: the orchestrator takes the
    worktree lock several times per worker.
    """
    key = str(Path(root).absolute())
    known = _COMMON_DIRS.get(key)
    if known is not None and known.is_dir():
        return known
    proc = run_git("rev-parse", "--git-common-dir", cwd=root) if Path(root).is_dir() else None
    if proc is None or proc.returncode != 0:
        raise CannotStart(f"not a git repository: {root}",
                          hint="run agentrun inside a git repository (`git init` creates one)")
    found = (Path(root) / proc.stdout.strip()).resolve()
    _COMMON_DIRS[key] = found
    return found



def _open_lock_file(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)


@contextmanager
def worktree_lock(root: Path, timeout: float = 120.0) -> Iterator[None]:
    """Hold the lock that serialises `git worktree add/remove` across threads and processes.

    Concurrent `git worktree add` in one repository fails now and then on this machine. We
    poll instead of blocking forever so that a wedged holder turns into an error, not a hang.
    """
    path = git_common_dir(root) / WORKTREE_LOCK_NAME
    fd = _open_lock_file(path)
    try:
        deadline = time.monotonic() + timeout
        delay = 0.005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise CannotStart(
                        f"timed out after {timeout:.0f}s waiting for the worktree lock {path}",
                        hint="another agentrun process is stuck creating or removing a "
                             "worktree; stop it and try again",
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.1)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


class RunLock:
    """One agentrun run per project at a time.

    The holder writes its pid, run id and start time into the lock file so that a second run
    can say who is in the way. Use as a context manager or call acquire()/release().
    """

    def __init__(self, root: Path, run_id: str) -> None:
        self.path = git_common_dir(root) / RUN_LOCK_NAME
        self.run_id = run_id
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock or raise CannotStart naming the run that holds it."""
        if self._fd is not None:
            return
        fd = _open_lock_file(self.path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _describe_holder(fd)
            os.close(fd)
            raise CannotStart(
                f"another agentrun run is in progress ({holder})",
                hint="wait for it to finish or stop it; the lock is released as soon as that "
                     f"process exits (lock file: {self.path})",
            ) from None
        record = {"pid": os.getpid(), "run_id": self.run_id,
                  "started": datetime.now(UTC).isoformat(timespec="seconds")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Drop the lock; empty the file first so nobody later reads a finished run as holder."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def _describe_holder(fd: int) -> str:
    """'pid N, run R, started T' from the lock file, tolerating a holder that is mid-write."""
    try:
        data = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
    except (OSError, ValueError):
        data = {}
    if not isinstance(data, dict) or not data:
        return "holder not yet recorded"
    return (f"pid {data.get('pid', '?')}, run {data.get('run_id', '?')}, "
            f"started {data.get('started', '?')}")
