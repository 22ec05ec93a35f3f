"""Removing a folder whose contents a worker made (a worktree, a private home).

A worker is untrusted, and so is the shape of what it leaves: a tree thousands of levels deep
(`shutil.rmtree` recurses and fails with RecursionError; its paths exceed PATH_MAX), folders
it made unreadable or unwritable, symlinks pointing anywhere. `remove_tree` walks such a tree
with a stack of its own, one folder open at a time, by descriptor (no path is ever longer than
one name), never following a symlink, and gives a folder the worker locked back to its owner
before emptying it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_tree(path: Path) -> None:
    """Delete `path` and everything under it (nothing if it is gone; a symlink or a file is
    unlinked, never followed). OSError when something cannot be removed."""
    path = Path(path)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(mode):
        path.unlink()
        return
    parent = os.open(path.parent, _DIR_FLAGS & ~os.O_NOFOLLOW)
    try:
        _empty_and_remove(parent, path.name)
    finally:
        os.close(parent)


def _empty_and_remove(top_parent: int, top: str) -> None:
    """Remove folder `top` of the folder open as `top_parent`, depth first without recursion:
    the stack holds each level's name, identity and the subfolders still to visit; the way
    back up is `..`, checked to be the folder it came from."""
    fd = _open_dir(top_parent, top)
    stack: list[tuple[str, tuple[int, int], list[str]]] = []  # below the current folder
    name, pending = top, _clear(fd)
    while True:
        if pending:
            child = pending.pop()
            try:
                child_fd = _open_dir(fd, child)
            except FileNotFoundError:
                continue
            stack.append((name, _identity(fd), pending))
            os.close(fd)
            fd, name, pending = child_fd, child, _clear(child_fd)
            continue
        if not stack:
            os.close(fd)
            _rmdir(top_parent, top)
            return
        up = os.open("..", _DIR_FLAGS, dir_fd=fd)
        os.close(fd)
        fd = up
        done, (parent_name, identity, pending) = name, stack.pop()
        if _identity(fd) != identity:
            os.close(fd)
            raise OSError(f"a folder moved while it was being removed: {done}")
        _rmdir(fd, done)
        name = parent_name


def _open_dir(parent: int, name: str) -> int:
    """Open subfolder `name`; one its owner may not read or enter is made theirs again."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except PermissionError:
        os.chmod(name, 0o700, dir_fd=parent)  # a folder (lstat said so), not a link
        return os.open(name, _DIR_FLAGS, dir_fd=parent)


def _clear(fd: int) -> list[str]:
    """Unlink everything in the open folder but its subfolders, which are returned."""
    with contextlib.suppress(OSError):  # made writable for the unlinks; a failure shows there
        if stat.S_IMODE(os.fstat(fd).st_mode) & 0o700 != 0o700:
            os.fchmod(fd, 0o700)
    folders: list[str] = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.name)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.name, dir_fd=fd)
    return folders


def _rmdir(parent: int, name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.rmdir(name, dir_fd=parent)


def _identity(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino
