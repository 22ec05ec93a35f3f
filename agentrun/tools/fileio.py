"""Reading, writing and walking files beneath a worktree root for the file tools, without
following a symlink anywhere and without entering `.git` (in any case)."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from agentrun.tools import paths

READ_MAX_FILE_BYTES = 20_000_000  # read_file/edit_file load the whole file
SNIFF_BYTES = 8192
READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK  # a FIFO must not block the open



def read_bytes(root: Path, real: Path, name: str) -> bytes:
    """The bytes of the regular file `real`, opened without following symlinks."""
    fd = paths.open_beneath(root, real, READ_FLAGS)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(f"{name!r} is a directory; use list_files to see inside it")
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{name!r} is not a regular file")
        size = st.st_size
        if size > READ_MAX_FILE_BYTES:
            raise OSError(f"{name!r} is too large ({size} bytes); inspect it with run_command "
                          "(e.g. `head`, `sed -n`, `grep`)")
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def looks_binary(head: bytes) -> bool:
    if b"\0" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start < len(head) - 3  # a character cut at the end of the sample is fine
    return False


def write_atomic(root: Path, real: Path, data: bytes) -> bool:
    """Replace `real` with `data` via a temp file and rename in the same directory.

    Returns whether the file was created. The rename replaces the directory entry itself, so
    neither a symlink nor a hard link at the destination can redirect the write.
    """
    if os.path.realpath(real) == os.path.realpath(root):
        raise IsADirectoryError("the worktree root is a directory")
    dir_fd, name = paths.open_parent_beneath(root, real, make_parents=True)
    try:
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if st is not None and stat.S_ISLNK(st.st_mode):
            raise paths.PathDenied(f"{name!r} is a symlink; refusing to write through it")
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(f"{name!r} is a directory")
        tmp = f".{name[:100]}.{secrets.token_hex(4)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o666, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                if st is not None:
                    os.fchmod(fh.fileno(), stat.S_IMODE(st.st_mode))
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise
        return st is None
    finally:
        os.close(dir_fd)


def walk(root: Path, start: Path) -> Iterator[tuple[int, str, str]]:
    """Yield `(dir_fd, name, relpath)` for every non-directory under `start`, depth first in
    name order, skipping `.git` and never following a symlink. `dir_fd` is valid only until
    the next item is requested."""
    top = paths.open_dir_beneath(root, start)
    base = paths.display_path(root, start)
    stack = [(top, "" if base == "." else base, iter(_entries(top)))]
    try:
        while stack:
            fd, rel, entries = stack[-1]
            item = next(entries, None)
            if item is None:
                stack.pop()
                os.close(fd)
                continue
            name, is_dir = item
            if paths.is_git_name(name):
                continue
            path = f"{rel}/{name}" if rel else name
            if is_dir:
                try:
                    child = os.open(name, paths.DIR_FLAGS, dir_fd=fd)
                except OSError:
                    continue  # replaced by a symlink or unreadable: skip it
                stack.append((child, path, iter(_entries(child))))
            else:
                yield fd, name, path
    finally:
        for fd, _, _ in stack:
            os.close(fd)


def _entries(dir_fd: int) -> list[tuple[str, bool]]:
    with os.scandir(dir_fd) as it:
        return sorted((e.name, e.is_dir(follow_symlinks=False)) for e in it)


def glob_regex(pattern: str) -> re.Pattern[str]:
    """Compile a glob: `*` and `?` stay within one path segment, `**` crosses segments,
    `[abc]`/`[!abc]` are classes and `{a,b}` alternatives."""
    i, out, depth = 0, [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 2 if pattern[i + 1:i + 2] in ("!", "]") else i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1:end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body.replace(chr(92), chr(92) * 2)}]")
                i = end
        elif c == "{":
            out.append("(?:")
            depth += 1
        elif c == "}" and depth:
            out.append(")")
            depth -= 1
        elif c == "," and depth:
            out.append("|")
        else:
            out.append(re.escape(c))
        i += 1
    out.extend(")" * depth)
    return re.compile("".join(out) + r"\Z")


def glob_matcher(pattern: str | None) -> Callable[[str], bool]:
    """A predicate on a path relative to the listed directory: a pattern without `/` matches
    the file name at any depth, one with `/` matches the whole relative path."""
    if not pattern:
        return lambda rel: True
    pattern = pattern.removeprefix("./")
    regex = glob_regex(pattern)
    if "/" in pattern:
        return lambda rel: regex.match(rel) is not None
    return lambda rel: regex.match(rel.rsplit("/", 1)[-1]) is not None


def relative_to(rel: str, base: str) -> str:
    return rel[len(base) + 1:] if base and rel.startswith(base + "/") else rel
