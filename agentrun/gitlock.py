"""File locks in the shared git dir: one run per project, and one worktree change at a time;
and git's own lock files, which a killed git process leaves behind.

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

from agentrun.core.errors import CannotStart
from agentrun.gitcli import git, run_git

RUN_LOCK_NAME = "agentrun-run.lock"
# git's lock files a run's commits and merges take (paths for `git rev-parse --git-path`);
# `{branch}` is the branch the run merges into
GIT_LOCKS = ("index.lock", "HEAD.lock", "refs/heads/{branch}.lock", "packed-refs.lock")
# a git operation in progress in the checkout: a run must not commit into the middle of it
IN_PROGRESS = {"MERGE_HEAD": "merge", "CHERRY_PICK_HEAD": "cherry-pick",
               "REVERT_HEAD": "revert"}
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


def boot_time() -> float | None:
    """When this machine started (seconds since the epoch), where the system says (Linux)."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            for line in stat:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def running_git(root: Path) -> list[int]:
    """Pids of the git processes working in the repository at `root` (their directory is in
    it or in its git dir; one whose directory cannot be read counts too), where the system
    lists them (Linux): who may hold a lock there."""
    places = {Path(root).resolve(), git_common_dir(root)}
    pids = []
    for entry in Path("/proc").glob("[0-9]*/comm") if Path("/proc").is_dir() else []:
        try:
            if entry.read_text(encoding="utf-8", errors="replace").strip() != "git":
                continue
            cwd = Path(os.readlink(entry.parent / "cwd"))
        except PermissionError:
            cwd = None
        except (OSError, ValueError):
            continue
        if cwd is None or any(cwd == p or p in cwd.parents for p in places):
            pids.append(int(entry.parent.name))
    return sorted(pids)


def clear_git_locks(root: Path, branch: str) -> list[str]:
    """Find git's lock files in the checkout at `root` and its branch's refs before a run
    commits or merges there; returns what was removed, in words.

    git writes `index.lock` (and `HEAD.lock`, a ref's `.lock`) while it changes them and
    deletes it when done; a git process that was killed leaves it, and every later commit or
    merge fails with "File exists". git does not record who holds a lock, so a lock counts as
    stale only when nothing running can own it: written before this machine last started (no
    process outlives a boot). That one is removed. Any other is refused (CannotStart, exit
    3) naming the file — a git command may be running (an editor's, a terminal's), and
    removing its lock would let two writers corrupt the index. A merge, cherry-pick or
    revert in progress is refused too: a run's commits would land in the middle of it.
    """
    names = [n.format(branch=branch) for n in GIT_LOCKS] + list(IN_PROGRESS)
    args = [a for n in names for a in ("--git-path", n)]
    paths = [Path(root) / p for p in git("rev-parse", *args, cwd=root).splitlines()]
    removed: list[str] = []
    booted = boot_time()
    for name, path in zip(names, paths, strict=True):
        if name in IN_PROGRESS:
            if path.exists():
                what = IN_PROGRESS[name]
                raise CannotStart(
                    f"a {what} is in progress in {root} ({path} exists); a run would commit "
                    "into the middle of it",
                    hint=f"finish it (`git commit`) or abandon it (`git {what} --abort`), then "
                         "run again")
            continue
        try:
            modified = path.lstat().st_mtime
        except FileNotFoundError:
            continue
        when = datetime.fromtimestamp(modified, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        if booted is not None and modified < booted:
            path.unlink(missing_ok=True)
            removed.append(f"removed the stale git lock {path} (written {when}, before this "
                           "machine last started: its git process is gone)")
            continue
        running = running_git(root)
        who = (f"git is running in this repository now (pid "
               f"{', '.join(map(str, running[:5]))}): wait for it" if running else
               "no git process is running in this repository now, so a killed one most "
               "likely left it")
        raise CannotStart(
            f"git's lock file {path} exists (written {when}): {who}; every commit and merge "
            "of the run would fail on it",
            hint=f"once no git command is running in this repository, remove it (`rm {path}`) "
                 "and run again")
    return removed
