"""Error types and the exit codes they map to.

Every error a user can cause or meet carries a message, a hint that names the fix, and the
documented exit code. The CLI's single error boundary turns them into one friendly line each.
"""

from __future__ import annotations

import errno
import re

EXIT_OK = 0
EXIT_FAILED = 1  # the work ran but failed, was partial or blocked; audit found critical issues
EXIT_BAD_INPUT = 2  # usage, invalid spec, cycle
EXIT_CANNOT_START = 3  # no model configured, not a git repo, dirty tree, lock held, missing tool
EXIT_INTERRUPTED = 130


class AgentrunError(Exception):
    """Base of every error agentrun reports to a user."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class BadInput(AgentrunError):
    """The user gave us something we cannot use (exit 2)."""

    exit_code = EXIT_BAD_INPUT


class SpecError(BadInput):
    """A specification cannot be read or parsed (exit 2)."""

    def __init__(self, message: str, hint: str | None = None, *, path: str | None = None,
                 line: int | None = None) -> None:
        super().__init__(message, hint)
        self.path = path
        self.line = line


class PlanError(BadInput):
    """The task groups do not form a valid plan: a cycle or an unknown dependency (exit 2)."""


class CannotStart(AgentrunError):
    """The environment is not ready: no model, not a git repo, dirty tree, lock held (exit 3)."""

    exit_code = EXIT_CANNOT_START


# a write failed for want of space: a full disk, a quota, a file-size limit
NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
# how git (a separate process) words the same
_NO_SPACE_TEXTS = ("No space left on device", "Out of diskspace", "Disk quota exceeded",
                   "File too large")


class NoSpace(BadInput):
    """A file could not be written for want of space (exit 2, as for a checkout that cannot be
    written: the user must make room). Writes are atomic, so a file still holds its previous
    version, and a run can be resumed once space is free."""

    def __init__(self, path: str | None, needed: int | None = None, *,
                 detail: str | None = None) -> None:
        size = f" ({_size(needed)} needed)" if needed else ""
        where = f" to write {path}{size}" if path else f": {detail}" if detail else ""
        super().__init__(f"no space left on device{where}",
                         hint="free some space on that disk, then run again (a run continues "
                              "with `agentrun run SPEC --resume`)")
        self.path = path
        self.needed = needed


def no_space(exc: BaseException) -> NoSpace | None:
    """The NoSpace an error stands for, when it is a full disk: an OSError from a write not
    made through fsutil (events, the run lock), or a git command that could not write."""
    if isinstance(exc, NoSpace):
        return exc
    if isinstance(exc, OSError) and exc.errno in NO_SPACE_ERRNOS:
        return NoSpace(str(exc.filename) if exc.filename else None)
    if isinstance(exc, AgentrunError) and any(t in exc.message for t in _NO_SPACE_TEXTS):
        return NoSpace(None, detail=exc.message)
    return None


_IN_THE_WAY = {errno.EISDIR: "is a folder where agentrun writes a file",
               errno.ENOTDIR: "cannot be made: a part of its path is a file, not a folder",
               errno.EEXIST: "is in the way: it exists, and is not the folder agentrun makes"}


# the checkout (or a file in it) cannot be written: a read-only mount, missing permissions
_NOT_WRITABLE = {errno.EROFS: "the file system is read-only",
                 errno.EACCES: "permission denied", errno.EPERM: "not permitted"}
# how git (a separate process) words the same
_NOT_WRITABLE_TEXTS = ("Read-only file system", "Permission denied")
NOT_WRITABLE_HINT = ("make it writable (e.g. `chmod -R u+w` on the checkout, or remount it "
                     "read-write), or work in a writable clone")


NOT_WRITABLE_ERRNOS = frozenset(_NOT_WRITABLE)


def cannot_write(path: str, error_number: int) -> BadInput:
    """Bad input (exit 2): `path` cannot be written (read-only, no permission)."""
    why = _NOT_WRITABLE.get(error_number, "it cannot be written")
    return BadInput(f"cannot write {path}: {why}", hint=NOT_WRITABLE_HINT)


def path_error(exc: BaseException) -> BadInput | None:
    """Bad input (exit 2) an OSError stands for when a file or folder of the user's is in the
    way of one agentrun writes (a folder given as --junit, a file named like .specflow), or
    when the checkout cannot be written (read-only, or not the user's to change)."""
    if not isinstance(exc, OSError):
        return None
    path = exc.filename2 or exc.filename  # a rename's target is the path in question
    if not path:
        return None
    if exc.errno in _NOT_WRITABLE:
        return cannot_write(str(path), exc.errno)
    if exc.errno not in _IN_THE_WAY:
        return None
    return BadInput(f"{path} {_IN_THE_WAY[exc.errno]}",
                    hint="move what is in the way, or give another path")


def not_writable(git_error: AgentrunError) -> BadInput | None:
    """Bad input (exit 2) a failed git command stands for when it could not write the
    repository (a read-only checkout, missing permissions), naming the path git names."""
    found = re.search(r"'([^'\n]+)': (" + "|".join(_NOT_WRITABLE_TEXTS) + ")", git_error.message)
    if found is None:
        return BadInput(git_error.message, hint=NOT_WRITABLE_HINT) if any(
            t in git_error.message for t in _NOT_WRITABLE_TEXTS) else None
    why = "the file system is read-only" if found[2].startswith("Read") else "permission denied"
    command = git_error.message.split(" failed in ", 1)[0]
    return BadInput(f"cannot write {found[1]}: {why} ({command} failed)",
                    hint=NOT_WRITABLE_HINT)


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    return f"{n / 1024:.1f} KB" if n < 1024 ** 2 else f"{n / 1024 ** 2:.1f} MB"


class Interrupted(AgentrunError):
    """SIGINT/SIGTERM stopped the work; state was saved (exit 130)."""

    exit_code = EXIT_INTERRUPTED
