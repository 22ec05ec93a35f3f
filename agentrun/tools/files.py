"""File tools: read, write, edit, list and search files inside the worktree.

Every path goes through `paths.resolve_path` and every open through `paths.open_beneath`
(no symlink is followed, even one swapped in after the check; `.git` is never entered,
nothing under `.specflow` is written).
Output is capped so one call cannot flood the model's context, and a search runs in a child
process with a deadline so a runaway regular expression cannot hang the worker.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import subprocess
import sys
from dataclasses import asdict

from pydantic import Field

from agentrun.core.secrets import redact, secret_values
from agentrun.tools import fileio, paths, search
from agentrun.tools.base import (
    INVALID_ARGUMENTS,
    NOT_FOUND,
    TIMEOUT,
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
SEARCH_MAX_CHARS = 30_000  # all matching lines of one call together
SEARCH_MAX_FILE_BYTES = 5_000_000
SEARCH_TIMEOUT_S = 20.0  # wall time of one search_files call (see tools/search.py)


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
        real = paths.resolve_path(ctx.root, args.path, must_exist=True)
        data = fileio.read_bytes(ctx.root, real, args.path)
        shown = paths.display_path(ctx.root, real)
        if fileio.looks_binary(data[:fileio.SNIFF_BYTES]):
            return ToolResult.error(TOOL_ERROR, f"{shown} is a binary file ({len(data)} bytes);"
                                    " read_file shows text files only")
        text = data.decode("utf-8", errors="replace")
        lines = redact(text, secret_values(os.environ, ctx.policy.secret_suffixes)).splitlines()
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
        real = paths.resolve_path(ctx.root, args.path, for_write=True)
        data = args.content.encode("utf-8")
        limit = ctx.policy.max_write_bytes
        if len(data) > limit:
            return ToolResult.error(INVALID_ARGUMENTS, (
                f"content is {len(data)} bytes, over the write_file limit of {limit} bytes "
                "(`max_write_bytes` in .specflow/config.yaml): write a smaller file, or generate "
                "large data with run_command"), limit=limit, bytes=len(data))
        created = fileio.write_atomic(ctx.root, real, data)
        shown = paths.display_path(ctx.root, real)
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
        real = paths.resolve_path(ctx.root, args.path, must_exist=True, for_write=True)
        shown = paths.display_path(ctx.root, real)
        raw = fileio.read_bytes(ctx.root, real, args.path)
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
        fileio.write_atomic(ctx.root, real, updated.encode("utf-8"))
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
        real = paths.resolve_path(ctx.root, args.path or ".", must_exist=True)
        base = paths.display_path(ctx.root, real)
        base = "" if base == "." else base
        matches = fileio.glob_matcher(args.pattern)
        if not real.is_dir() or real.is_symlink():
            files = [base] if matches(base.rsplit("/", 1)[-1]) else []
        else:
            files = sorted(rel for _, _, rel in fileio.walk(ctx.root, real)
                           if matches(fileio.relative_to(rel, base)))
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
            re.compile(args.pattern)
        except re.error as exc:
            return ToolResult.error(INVALID_ARGUMENTS,
                                    f"pattern is not a valid regular expression: {exc}")
        real = paths.resolve_path(ctx.root, args.path or ".", must_exist=True)
        request = search.SearchRequest(
            root=str(ctx.root), path=str(real), pattern=args.pattern, glob=args.glob,
            max_matches=SEARCH_MAX_MATCHES, max_chars=SEARCH_MAX_CHARS,
            line_chars=SEARCH_LINE_CHARS, max_file_bytes=SEARCH_MAX_FILE_BYTES)
        try:
            done = subprocess.run([sys.executable, "-m", search.__name__],
                                  input=json.dumps(asdict(request)), capture_output=True,
                                  text=True, timeout=SEARCH_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            return ToolResult.error(TIMEOUT, (
                f"search_files stopped after {SEARCH_TIMEOUT_S:g} s without finishing: the "
                f"pattern {args.pattern!r} is too slow on these files (nested repetition such as "
                "`(a+)+` backtracks without end); simplify the pattern or narrow path or glob"))
        if done.returncode != 0:
            reason = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
            return ToolResult.error(TOOL_ERROR, f"search_files failed: {reason}")
        answer = search.Answer(**json.loads(done.stdout))
        if not answer.hits:
            return ToolResult(f"no matches for {args.pattern!r} in {answer.searched} files "
                              "searched", data={"count": 0, "files_searched": answer.searched})
        body = redact("\n".join(answer.hits),
                      secret_values(os.environ, ctx.policy.secret_suffixes))
        if answer.truncated:
            body += (f"\n[stopped after {len(answer.hits)} matches; narrow the pattern, path "
                     "or glob]")
        return ToolResult(body, data={"count": len(answer.hits),
                                      "files_searched": answer.searched,
                                      "truncated": answer.truncated})
