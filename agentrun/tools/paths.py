"""Path confinement for worker file tools: every path a tool touches stays inside the worktree
and out of git's own files.

`resolve_path` checks a path once; `open_beneath` then opens it component by component with
`O_NOFOLLOW` relative to a directory fd held open from the root, so a symlink swapped in after
the check cannot redirect the open outside the root. A `.git` component (in any case) is
refused outright: a worktree's `.git` file points git at its repository, and a checkout's
`.git/config` may hold credentials, so a worker neither reads nor writes either. A write
under a `.specflow` folder (in any case, at any depth, by name or through a symlink) is refused
too: specs, run records and agentrun's configuration are the orchestrator's to write, and the
merge refuses a branch that changes them (`run.policy`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import stat
from pathlib import Path


class PathDenied(Exception):
    """A path leaves the worktree (by `..`, an absolute path or a symlink) or enters `.git`."""


DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_HINT = "paths must stay inside the worktree (use a path relative to its root)"
GIT_DIR_NAME = ".git"
CONTROL_DIR_NAME = ".specflow"


def is_git_name(name: str) -> bool:
    """Whether a path component names git's own files (`.git`, `.GIT`, ...)."""
    return name.casefold() == GIT_DIR_NAME


def is_control_name(name: str) -> bool:
    """Whether a path component names agentrun's folder (`.specflow`, `.SpecFlow`, ...)."""
    return name.casefold() == CONTROL_DIR_NAME


def within(path: str, root: str) -> bool:
    """Whether the real path `path` is `root` or lies under it."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def resolve_path(root: Path | str, path: str, *, must_exist: bool = False,
                 for_write: bool = False) -> Path:
    """The real absolute path of `path` (relative to `root`, or absolute inside it).

    Raises `PathDenied` when the path escapes the root lexically (`..`), is absolute outside
    it, reaches outside through a symlink at any component, or — `for_write` — lies under a
    `.specflow` folder by its name or its real path; `FileNotFoundError` when `must_exist`
    and nothing is there.
    """
    if "\0" in path:
        raise PathDenied(f"{path!r}: a path cannot contain a NUL byte")
    if path.startswith("~"):
        raise PathDenied(f"{path!r} points into a home directory, outside the worktree; {_HINT}")
    root_real = os.path.realpath(root)
    if os.path.isabs(path):
        candidate = path
    else:
        norm = posixpath.normpath(path) if path else "."
        if norm == ".." or norm.startswith("../"):
            raise PathDenied(f"{path!r} uses '..' to leave the worktree; {_HINT}")
        candidate = os.path.join(root_real, norm)
    real = os.path.realpath(candidate)
    if not within(real, root_real):
        how = "is outside the worktree" if os.path.isabs(path) else "resolves outside the worktree"
        via = " through a symlink" if not os.path.isabs(path) else ""
        raise PathDenied(f"{path!r} {how}{via}; {_HINT}")
    rel = os.path.relpath(real, root_real).split(os.sep)
    if any(is_git_name(part) for part in [*path.replace("\\", "/").split("/"), *rel]):
        raise PathDenied(f"{path!r} is inside .git, git's own files, which no tool reads or "
                         "writes; work on the project's files (git itself is the "
                         "orchestrator's)")
    if for_write and any(is_control_name(part)
                         for part in [*path.replace("\\", "/").split("/"), *rel]):
        raise PathDenied(f"{path!r} is under .specflow, agentrun's own files (specs, run "
                         "records, configuration), which only the orchestrator writes; a "
                         "change there would not be merged. Work on the project's files")
    if must_exist and not os.path.lexists(real):
        raise FileNotFoundError(f"{path!r} does not exist")
    return Path(real)


def display_path(root: Path | str, real: Path | str) -> str:
    """`real` relative to the root with `/` separators (`.` for the root itself)."""
    rel = os.path.relpath(real, os.path.realpath(root))
    return rel.replace(os.sep, "/")


def _parts_beneath(root_real: str, target: Path | str) -> list[str]:
    target = os.fspath(target)
    if not os.path.isabs(target):
        target = os.path.join(root_real, target)
    rel = os.path.relpath(os.path.normpath(target), root_real)
    if rel == ".." or rel.startswith(".." + os.sep) or os.path.isabs(rel):
        raise PathDenied(f"{target!r} is outside the worktree; {_HINT}")
    parts = [] if rel == "." else rel.split(os.sep)
    if any(is_git_name(part) for part in parts):
        raise PathDenied(f"{target!r} is inside .git, git's own files; {_HINT}")
    return parts


def _denied_symlink(name: str) -> PathDenied:
    return PathDenied(f"{name!r} is a symlink that appeared while the path was in use; "
                      "refusing to follow it")


def _step(dir_fd: int, name: str, make_parents: bool) -> int:
    """Open the sub-directory `name` of `dir_fd` without following a symlink."""
    for _ in range(2):
        try:
            return os.open(name, DIR_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            if not make_parents:
                raise
            with contextlib.suppress(FileExistsError):  # created concurrently: open it next pass
                os.mkdir(name, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_symlink(dir_fd, name):
                raise _denied_symlink(name) from exc
            raise
    return os.open(name, DIR_FLAGS, dir_fd=dir_fd)


def _is_symlink(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def open_parent_beneath(root: Path | str, target: Path | str, *,
                        make_parents: bool = False) -> tuple[int, str]:
    """Open the directory that holds `target` by walking down from the root without following
    symlinks; return `(dir_fd, final_name)`. The caller closes the fd."""
    root_real = os.path.realpath(root)
    parts = _parts_beneath(root_real, target)
    if not parts:
        raise PathDenied("the worktree root itself has no parent inside the worktree")
    dir_fd = os.open(root_real, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            child = _step(dir_fd, part, make_parents)
            os.close(dir_fd)
            dir_fd = child
    except BaseException:
        os.close(dir_fd)
        raise
    return dir_fd, parts[-1]


def open_beneath(root: Path | str, target: Path | str, flags: int = os.O_RDONLY,
                 mode: int = 0o666, *, make_parents: bool = False) -> int:
    """Open `target` (inside `root`) with `O_NOFOLLOW` on every component; return the fd.

    Sound against a symlink swapped in after `resolve_path` checked the path: the open fails
    with `PathDenied` instead of following it.
    """
    root_real = os.path.realpath(root)
    if not _parts_beneath(root_real, target):
        return os.open(root_real, flags | os.O_CLOEXEC)
    dir_fd, name = open_parent_beneath(root, target, make_parents=make_parents)
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_symlink(dir_fd, name):
            raise _denied_symlink(name) from exc
        raise
    finally:
        os.close(dir_fd)


def open_dir_beneath(root: Path | str, target: Path | str) -> int:
    """A directory fd for `target` inside `root`, opened without following symlinks."""
    return open_beneath(root, target, os.O_RDONLY | os.O_DIRECTORY)
