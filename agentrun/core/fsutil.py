"""File helpers: atomic writes (a state file is either the old version or the new one, never
half), exact reads, and paths shown relative to a project.

A user's file may be a symlink (a spec kept elsewhere in the repository, a shared STATE.md):
writes go to the link's target, so the link stays a link and the real file gets the update.
"""

from __future__ import annotations

import errno
import glob
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from agentrun.core.errors import (
    NO_SPACE_ERRNOS,
    NOT_WRITABLE_ERRNOS,
    BadInput,
    NoSpace,
    cannot_write,
)


def write_target(path: Path) -> Path:
    """The file a write to `path` must replace: the end of its symlink chain, else `path`."""
    path = Path(path)
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def check_link_inside(path: Path, root: Path) -> None:
    """Refuse (exit 2) a symlink whose target lies outside `root`: agentrun rewrites the
    target, and a file outside the repository is not its to change nor git's to record."""
    path = Path(path)
    if not path.is_symlink():
        return
    target = write_target(path)
    try:
        target.relative_to(Path(os.path.realpath(root)))
    except ValueError:
        link = os.path.normpath(os.path.join(relpath(path.parent, root), path.name))
        raise BadInput(f"{link} is a symlink to {target}, outside the "
                       "repository; agentrun would rewrite that file",
                       hint="point the link inside the repository, or replace it with a copy "
                            "of the file") from None


def check_file_or_absent(path: Path, what: str, hint: str | None = None) -> None:
    """Refuse (exit 2) a path agentrun writes `what` to when something other than a file is
    there (a folder, a socket): the write would fail once the work is done."""
    target = write_target(Path(path))
    if target.exists() and not target.is_file():
        kind = "a folder" if target.is_dir() else "not a regular file"
        _in_the_way(path, f"is {kind}; agentrun writes {what} there", hint)


def check_folder_or_absent(folder: Path) -> bool:
    """Refuse (exit 2) a file where agentrun keeps `folder`, or where a folder above it
    should be; True when the folder exists (else it is made when it is needed)."""
    there = next(p for p in (folder, *folder.parents) if p.exists() or p.is_symlink())
    if not there.is_dir():
        _in_the_way(there, "is a file; agentrun keeps a folder there")
    return there == folder


def _in_the_way(path: Path, what: str, hint: str | None = None) -> None:
    shown = relpath(path)
    raise BadInput(f"{shown} {what}", hint=hint or f"move it out of the way (e.g. `mv {shown} "
                                                    f"{shown}.old`) and run again")


def read_text_exact(path: Path) -> str:
    """A UTF-8 file's text with no newline translation: CRLF and a BOM stay as they are."""
    return Path(path).read_bytes().decode("utf-8")


class TooLarge(ValueError):
    """A file is larger than its reader takes."""


def read_capped(path: Path, limit: int) -> bytes:
    """A file's bytes, if it has at most `limit` of them; else `TooLarge`. For files another
    process wrote (a worker's result, a file of a worker's branch): reading one whole could
    take the orchestrator's memory."""
    with open(path, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(f"{relpath(path)} is larger than {limit:,} bytes")
    return data


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` (or a symlink's target) via a temp file beside it and an atomic
    rename. A full disk is NoSpace (exit 2) naming the file; the old version stays intact."""
    link = Path(path)
    path = write_target(link)
    repo = _repo_of(link.parent) if path != link else None
    if repo is not None:
        check_link_inside(link, repo)
    try:
        _replace(path, data)
    except OSError as exc:
        if exc.errno in NO_SPACE_ERRNOS:
            raise NoSpace(relpath(link), len(data)) from None
        if exc.errno in NOT_WRITABLE_ERRNOS:  # a read-only checkout: name the file, not a temp
            raise cannot_write(relpath(link), exc.errno) from None
        raise


def _replace(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def remove_stale_temps(path: Path) -> list[Path]:
    """Delete the temp files `atomic_write_bytes` left beside `path` (or its link's target)
    when its process was killed before the rename; returns them. Only for the holder of the
    lock that guards every write to `path`: another writer's temp file looks the same."""
    target = write_target(Path(path))
    pattern = re.compile(rf"\.{re.escape(target.name)}\.[a-z0-9_]{{8}}\.tmp")
    stale = [p for p in target.parent.glob(f".{glob.escape(target.name)}.*.tmp")
             if pattern.fullmatch(p.name) and p.is_file() and not p.is_symlink()]
    for temp in stale:
        temp.unlink(missing_ok=True)
    return stale


def _repo_of(folder: Path) -> Path | None:
    """The git work tree holding `folder`, if any."""
    folder = Path(os.path.realpath(folder))
    return next((c for c in (folder, *folder.parents) if (c / ".git").exists()), None)


def atomic_write_text(path: Path, text: str) -> None:
    """Write text as UTF-8 without newline translation (bytes in the file are exactly `text`)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def reserve(path: Path, size: int) -> None:
    """Allocate `size` bytes at `path` (NoSpace when they are not there), to be deleted when
    space is needed most: a full disk must still let a run record that it stopped."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            os.posix_fallocate(fd, 0, size)
        finally:
            os.close(fd)
    except OSError as exc:
        Path(path).unlink(missing_ok=True)
        if exc.errno in NO_SPACE_ERRNOS:
            raise NoSpace(relpath(path), size) from None
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):  # no fallocate here: no reserve
            raise


def relpath(path: Path | str, root: Path | None = None) -> str:
    """`path` relative to `root` (default: the current directory), or as given when outside."""
    try:
        return str(Path(path).resolve().relative_to(Path(root or Path.cwd()).resolve()))
    except (ValueError, OSError):
        return str(path)
