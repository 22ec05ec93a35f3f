"""File tools: read, write, edit, list and search files inside the worktree.

Every path goes through `policy.resolve_path` and every open through `policy.open_beneath`
(no symlink is followed, even one swapped in after the check). Output is capped so one call
cannot flood the model's context.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import os
import re
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

from pydantic import Field

from agentrun.tools import policy
from agentrun.tools.base import (
    INVALID_ARGUMENTS,
    NOT_FOUND,
    TOOL_ERROR,
    ToolContext,
    ToolResult,
)
from agentrun.tools.tooldef import ArgsTool, ToolArgs

READ_DEFAULT_LIMIT = 2000  # lines per read_file call
READ_MAX_CHARS = 60_000
LINE_MAX_CHARS = 2000
LIST_MAX_ENTRIES = 1000
SEARCH_MAX_MATCHES = 200
SEARCH_LINE_CHARS = 300
SEARCH_MAX_FILE_BYTES = 5_000_000
READ_MAX_FILE_BYTES = 20_000_000  # read_file/edit_file load the whole file
_SNIFF_BYTES = 8192
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK  # a FIFO must not block the open
_SKIP_NAMES = {".git"}


# ------------------------------------------------------------------------------ shared helpers

def _read_bytes(root: Path, real: Path, name: str) -> bytes:
    """The bytes of the regular file `real`, opened without following symlinks."""
    fd = policy.open_beneath(root, real, _READ_FLAGS)
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


def _looks_binary(head: bytes) -> bool:
    if b"\0" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start < len(head) - 3  # a character cut at the end of the sample is fine
    return False


def _write_atomic(root: Path, real: Path, data: bytes) -> bool:
    """Replace `real` with `data` via a temp file and rename in the same directory.

    Returns whether the file was created. The rename replaces the directory entry itself, so
    neither a symlink nor a hard link at the destination can redirect the write.
    """
    if os.path.realpath(real) == os.path.realpath(root):
        raise IsADirectoryError("the worktree root is a directory")
    dir_fd, name = policy.open_parent_beneath(root, real, make_parents=True)
    try:
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if st is not None and stat.S_ISLNK(st.st_mode):
            raise policy.PathDenied(f"{name!r} is a symlink; refusing to write through it")
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


def _walk(root: Path, start: Path) -> Iterator[tuple[int, str, str]]:
    """Yield `(dir_fd, name, relpath)` for every non-directory under `start`, depth first in
    name order, skipping `.git` and never following a symlink. `dir_fd` is valid only until
    the next item is requested."""
    top = policy.open_dir_beneath(root, start)
    base = policy.display_path(root, start)
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
            if name in _SKIP_NAMES:
                continue
            path = f"{rel}/{name}" if rel else name
            if is_dir:
                try:
                    child = os.open(name, policy.DIR_FLAGS, dir_fd=fd)
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


def _glob_matcher(pattern: str | None):
    """A predicate on a path relative to the listed directory: a pattern without `/` matches
    the file name at any depth, one with `/` matches the whole relative path."""
    if not pattern:
        return lambda rel: True
    pattern = pattern.removeprefix("./")
    regex = glob_regex(pattern)
    if "/" in pattern:
        return lambda rel: regex.match(rel) is not None
    return lambda rel: regex.match(rel.rsplit("/", 1)[-1]) is not None


def _relative_to(rel: str, base: str) -> str:
    return rel[len(base) + 1:] if base and rel.startswith(base + "/") else rel


# ----------------------------------------------------------------------------------- read_file

class ReadFile(ArgsTool):
    name = "read_file"
    description = (
        "Read a text file in the worktree. Returns numbered lines (like `cat -n`). Long files "
        f"are returned {READ_DEFAULT_LIMIT} lines at a time: pass offset/limit to page.")

    class Args(ToolArgs):
        path: str = Field(description="File path relative to the worktree root.")
        offset: int | None = Field(None, ge=1,
                                   description="First line to return (1-based). Default 1.")
        limit: int | None = Field(None, ge=1, description=(
            f"Maximum number of lines to return. Default {READ_DEFAULT_LIMIT}."))

    def execute(self, ctx: ToolContext, args: ReadFile.Args) -> ToolResult:
        real = policy.resolve_path(ctx.root, args.path, must_exist=True)
        data = _read_bytes(ctx.root, real, args.path)
        shown = policy.display_path(ctx.root, real)
        if _looks_binary(data[:_SNIFF_BYTES]):
            return ToolResult.error(TOOL_ERROR, f"{shown} is a binary file ({len(data)} bytes);"
                                    " read_file shows text files only")
        text = data.decode("utf-8", errors="replace")
        lines = policy.redact(text, policy.secret_values(ctx.policy)).splitlines()
        total = len(lines)
        if total == 0:
            return ToolResult(f"{shown} is empty", data={"path": shown, "total_lines": 0})
        start = args.offset or 1
        if start > total:
            return ToolResult.error(INVALID_ARGUMENTS,
                                    f"offset {start} is past the end: {shown} has {total} lines")
        limit = args.limit or READ_DEFAULT_LIMIT
        out: list[str] = []
        size = 0
        for number in range(start, min(total, start + limit - 1) + 1):
            text = lines[number - 1]
            if len(text) > LINE_MAX_CHARS:
                text = text[:LINE_MAX_CHARS] + f" ... [line cut at {LINE_MAX_CHARS} chars]"
            row = f"{number:>6}\t{text}"
            if out and size + len(row) + 1 > READ_MAX_CHARS:
                break
            out.append(row)
            size += len(row) + 1
        end = start + len(out) - 1
        if end < total:
            out.append(f"[showing lines {start}-{end} of {total}; "
                       f"call read_file with offset={end + 1} to continue]")
        return ToolResult("\n".join(out), data={"path": shown, "start_line": start,
                                                "end_line": end, "total_lines": total,
                                                "truncated": end < total})


# ---------------------------------------------------------------------------------- write_file

class WriteFile(ArgsTool):
    name = "write_file"
    description = ("Create or overwrite a file in the worktree with the given content. Parent "
                   "directories are created. Prefer edit_file for changing part of a file.")

    class Args(ToolArgs):
        path: str = Field(description="File path relative to the worktree root.")
        content: str = Field(description="The complete new content of the file.")

    def execute(self, ctx: ToolContext, args: WriteFile.Args) -> ToolResult:
        real = policy.resolve_path(ctx.root, args.path)
        data = args.content.encode("utf-8")
        created = _write_atomic(ctx.root, real, data)
        shown = policy.display_path(ctx.root, real)
        verb = "created" if created else "overwrote"
        return ToolResult(f"{verb} {shown} ({len(data)} bytes)",
                          data={"path": shown, "bytes": len(data), "created": created})


# ----------------------------------------------------------------------------------- edit_file

class EditFile(ArgsTool):
    name = "edit_file"
    description = (
        "Replace one exact occurrence of `old` with `new` in a file. `old` must match the file "
        "exactly (whitespace and indentation included) and occur exactly once: include enough "
        "surrounding lines to make it unique. Read the file first.")

    class Args(ToolArgs):
        path: str = Field(description="File path relative to the worktree root.")
        old: str = Field(min_length=1, description="The exact text to replace (must be unique).")
        new: str = Field(description="The replacement text.")

    def execute(self, ctx: ToolContext, args: EditFile.Args) -> ToolResult:
        if args.old == args.new:
            return ToolResult.error(INVALID_ARGUMENTS, "old and new are identical: nothing to do")
        real = policy.resolve_path(ctx.root, args.path, must_exist=True)
        shown = policy.display_path(ctx.root, real)
        raw = _read_bytes(ctx.root, real, args.path)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return ToolResult.error(TOOL_ERROR, f"{shown} is not a UTF-8 text file")
        old, new = args.old, args.new
        count = text.count(old)
        if count == 0 and "\r\n" in text and "\r" not in old:
            crlf_old = old.replace("\n", "\r\n")
            if text.count(crlf_old):
                old, new = crlf_old, new.replace("\r\n", "\n").replace("\n", "\r\n")
                count = text.count(old)
        if count == 0:
            return ToolResult.error(NOT_FOUND, f"old text not found in {shown}."
                                    + _closest_hint(text, args.old))
        if count > 1:
            lines = _match_lines(text, old)
            return ToolResult.error(
                INVALID_ARGUMENTS,
                f"old text occurs {count} times in {shown} (at lines "
                f"{', '.join(map(str, lines[:10]))}{', ...' if len(lines) > 10 else ''}); "
                "include more surrounding context in old so it matches exactly once")
        at = text.index(old)
        updated = text[:at] + new + text[at + len(old):]
        _write_atomic(ctx.root, real, updated.encode("utf-8"))
        line = text.count("\n", 0, at) + 1
        return ToolResult(f"edited {shown}: replaced 1 occurrence at line {line}",
                          data={"path": shown, "line": line})


def _match_lines(text: str, old: str) -> list[int]:
    found, start = [], 0
    while (at := text.find(old, start)) != -1:
        found.append(text.count("\n", 0, at) + 1)
        start = at + 1
    return found


def _closest_hint(text: str, old: str) -> str:
    """Point the model at what it probably meant: a whitespace-only difference, or the lines
    most similar to the first line of `old`."""
    squash = " ".join
    if squash(old.split()) and squash(old.split()) in squash(text.split()):
        return (" The text exists with different whitespace or indentation: copy it exactly "
                "from read_file output (without the line-number prefix).")
    lines = text.splitlines()
    probe = next((ln.strip() for ln in old.splitlines() if ln.strip()), "")
    if not probe or not lines:
        return ""
    scored = sorted(((difflib.SequenceMatcher(None, probe, ln.strip()).ratio(), i)
                     for i, ln in enumerate(lines) if ln.strip()), reverse=True)[:3]
    best = [(score, i) for score, i in scored if score >= 0.5]
    if not best:
        return " No similar lines found: read the file again and copy the text exactly."
    rows = [f"{i + 1:>6}\t{lines[i][:SEARCH_LINE_CHARS]}"
            for _, i in sorted(best, key=lambda b: b[1])]
    return (" Closest lines to the first line of old:\n" + "\n".join(rows)
            + "\nCopy the text exactly as in the file (without the line-number prefix).")


# ---------------------------------------------------------------------------------- list_files

class ListFiles(ArgsTool):
    name = "list_files"
    description = (
        "List files under a directory of the worktree (recursively, sorted, .git skipped). "
        "`pattern` is a glob: without `/` it matches file names at any depth (`*.py`); with "
        "`/` it matches the path relative to `path` (`src/**/test_*.py`).")

    class Args(ToolArgs):
        path: str | None = Field(None, description="Directory to list, relative to the worktree "
                                 "root. Default: the root.")
        pattern: str | None = Field(None, description="Glob filter, e.g. `*.py` or `docs/**/*.md`.")

    def execute(self, ctx: ToolContext, args: ListFiles.Args) -> ToolResult:
        real = policy.resolve_path(ctx.root, args.path or ".", must_exist=True)
        base = policy.display_path(ctx.root, real)
        base = "" if base == "." else base
        matches = _glob_matcher(args.pattern)
        if not real.is_dir() or real.is_symlink():
            files = [base] if matches(base.rsplit("/", 1)[-1]) else []
        else:
            files = sorted(rel for _, _, rel in _walk(ctx.root, real)
                           if matches(_relative_to(rel, base)))
        total = len(files)
        shown = files[:LIST_MAX_ENTRIES]
        where = base or "the worktree"
        if not shown:
            what = f" matching {args.pattern!r}" if args.pattern else ""
            return ToolResult(f"no files{what} under {where}", data={"count": 0, "files": []})
        body = "\n".join(shown)
        if total > len(shown):
            body += (f"\n[{total - len(shown)} more files not shown; narrow the path or "
                     "pattern]")
        return ToolResult(body, data={"count": total, "files": shown,
                                      "truncated": total > len(shown)})


# -------------------------------------------------------------------------------- search_files

class SearchFiles(ArgsTool):
    name = "search_files"
    description = (
        "Search text files in the worktree for a Python regular expression; returns "
        "`path:line: text` for each matching line (.git and binary files skipped).")

    class Args(ToolArgs):
        pattern: str = Field(min_length=1, description="Python regular expression to search for.")
        path: str | None = Field(None, description="File or directory to search, relative to "
                                 "the worktree root. Default: the root.")
        glob: str | None = Field(None, description="Only search files matching this glob, "
                                 "e.g. `*.py`.")

    def execute(self, ctx: ToolContext, args: SearchFiles.Args) -> ToolResult:
        try:
            regex = re.compile(args.pattern)
        except re.error as exc:
            return ToolResult.error(INVALID_ARGUMENTS,
                                    f"pattern is not a valid regular expression: {exc}")
        real = policy.resolve_path(ctx.root, args.path or ".", must_exist=True)
        base = policy.display_path(ctx.root, real)
        base = "" if base == "." else base
        matches = _glob_matcher(args.glob)
        hits: list[str] = []
        searched = 0
        truncated = False
        if real.is_dir() and not real.is_symlink():
            candidates = ((fd, name, rel) for fd, name, rel in _walk(ctx.root, real)
                          if matches(_relative_to(rel, base)))
            for fd, name, rel in candidates:
                searched += 1
                opener = functools.partial(os.open, name, _READ_FLAGS | os.O_NOFOLLOW,
                                           dir_fd=fd)
                if _search_file(opener, rel, regex, hits):
                    truncated = True
                    break
        else:
            searched = 1
            truncated = _search_file(lambda: policy.open_beneath(ctx.root, real, _READ_FLAGS),
                                     base, regex, hits)
        if not hits:
            return ToolResult(f"no matches for {args.pattern!r} in {searched} files searched",
                              data={"count": 0, "files_searched": searched})
        body = policy.redact("\n".join(hits), policy.secret_values(ctx.policy))
        if truncated:
            body += (f"\n[stopped after {SEARCH_MAX_MATCHES} matches; narrow the pattern, path "
                     "or glob]")
        return ToolResult(body, data={"count": len(hits), "files_searched": searched,
                                      "truncated": truncated})


def _search_file(opener, rel: str, regex: re.Pattern[str], hits: list[str]) -> bool:
    """Append matches of one file to `hits`; return True once the match cap is reached.
    Unreadable, special, huge and binary files are skipped silently."""
    try:
        fd = opener()
    except OSError:
        return False
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_size > SEARCH_MAX_FILE_BYTES:
        os.close(fd)
        return False
    with os.fdopen(fd, "rb") as fh:
        data = fh.read()
    if _looks_binary(data[:_SNIFF_BYTES]):
        return False
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if regex.search(line):
            text = line if len(line) <= SEARCH_LINE_CHARS else line[:SEARCH_LINE_CHARS] + " ..."
            hits.append(f"{rel}:{number}: {text}")
            if len(hits) >= SEARCH_MAX_MATCHES:
                return True
    return False
