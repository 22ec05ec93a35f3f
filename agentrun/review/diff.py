"""The change a reviewer judges: every path a run changed, as text, whole or not at all.

Everything under review is a worker's, so nothing in it may hide part of the change from the
reviewer: the diff is built with `--text --no-textconv --no-ext-diff`, so a `binary` or `-diff`
attribute, a textconv filter or an external diff driver cannot turn a file into "Binary files
differ" or into other text; and every changed path is in it, `.specflow/` and paths no worker
should have touched included (they are findings in themselves). Only agentrun's own records of
the run (the spec's summary, STATE.md, the execution state) are left out, and only when no
merge brought a change to them.

A diff too long for one request is split over several (`PART_CHARS` each, at file, then hunk,
then line boundaries, each piece under its file's header); one that needs more than
`MAX_PARTS`, or that holds a file larger than `MAX_FILE_BYTES`, is `incomplete`: the review
fails rather than judge a change it was not shown. It is never cut short.

Memory stays bounded whatever a worker wrote: blob sizes are read before any content, a file
above the limit is never diffed, and git's output is read in chunks up to the budget.
"""

from __future__ import annotations

import codecs
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from agentrun.gitcli import GitError, git_command, run_git, split_z

PART_CHARS = 60_000  # characters of diff in one reviewer request
MAX_PARTS = 8  # requests one review may take
MAX_FILE_BYTES = 8 * 1024 * 1024  # a changed file above this is not diffed
STAT_CHARS = 20_000  # of `git diff --stat`; the diff itself is never cut
_CHUNK = 64 * 1024
_TEXT = ("--text", "--no-textconv", "--no-ext-diff", "--no-color", "--no-renames")


@dataclass
class ReviewDiff:
    """The change from `base` to `head`, as the reviewer is shown it."""

    parts: list[str] = field(default_factory=list)  # empty when there is no change
    stat: str = ""
    left_out: list[str] = field(default_factory=list)  # agentrun's records, unchanged by merges
    incomplete: str | None = None  # why it cannot be shown whole (then `parts` is empty)

    @property
    def text(self) -> str:
        return "".join(self.parts)


def review_diff(root: Path, base: str, head: str, records: Iterable[str] = (), *,
                part_chars: int = PART_CHARS, max_parts: int = MAX_PARTS,
                max_file_bytes: int = MAX_FILE_BYTES) -> ReviewDiff:
    """The diff `base..head` of the repository at `root`, in parts of at most `part_chars`.

    `records` are agentrun's own files of the run (repository paths; a folder ends with `/`):
    each is left out unless a merge between `base` and `head` changed it (or, for a folder,
    anything in it)."""
    merged = _changed_by_merges(root, base, head)
    left_out = sorted(r for r in set(records)
                      if not any(_covers(r, path) for path in merged))
    changes = [c for c in _raw(root, base, head)
               if not any(_covers(r, c.path) for r in left_out)]
    pathspec = ["--", ".", *(f":(exclude,literal){r.rstrip('/')}" for r in left_out)]
    out = ReviewDiff(left_out=left_out)
    if not changes:
        return out
    big = _too_big(root, changes, max_file_bytes)
    if big:
        path, size = big
        out.incomplete = (f"`{path}` is {size:,} bytes, above the {max_file_bytes:,} a review "
                          "diffs: the change cannot be shown whole")
        return out
    budget = part_chars * max_parts
    text = _read_capped(root, ["diff", *_TEXT, "-p", base, head, *pathspec], budget)
    if text is None:
        out.incomplete = (f"the diff is longer than {budget:,} characters ({max_parts} "
                          f"requests of {part_chars:,}): the change cannot be shown whole")
        return out
    parts = split_diff(text, part_chars)
    if len(parts) > max_parts:
        out.incomplete = (f"the diff needs {len(parts)} requests of {part_chars:,} "
                          f"characters, more than the {max_parts} a review may take")
        return out
    out.parts = parts
    stat = _read_capped(root, ["diff", *_TEXT, "--stat=120", base, head, *pathspec],
                        STAT_CHARS)
    out.stat = (stat.rstrip() if stat is not None else
                f"({len(changes)} files changed; the list is longer than {STAT_CHARS:,} "
                "characters: the diff below has every one)")
    return out


# -- what changed ------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Change:
    path: str
    blobs: tuple[str, ...]  # the old and new blob ids that exist


def _raw(root: Path, base: str, head: str) -> list[_Change]:
    """The changed paths and their blobs, from the trees alone (no content is read)."""
    proc = run_git("diff", "--raw", "-z", "--no-abbrev", *_TEXT, base, head, cwd=root)
    if proc.returncode != 0:
        raise GitError(["diff", "--raw", base, head], proc.returncode, proc.stderr, root)
    items = split_z(proc.stdout)
    changes = []
    for meta, path in zip(items[0::2], items[1::2], strict=False):
        fields = meta.lstrip(":").split()
        modes, blobs = fields[0:2], fields[2:4]
        kept = tuple(b for m, b in zip(modes, blobs, strict=False)
                     if set(b) != {"0"} and not m.startswith("160"))  # gitlinks hold no blob
        changes.append(_Change(path, kept))
    return changes


def _too_big(root: Path, changes: list[_Change], limit: int) -> tuple[str, int] | None:
    """The first changed file with a blob above `limit` bytes, and its size."""
    blobs = {b: c.path for c in changes for b in c.blobs}
    if not blobs:
        return None
    proc = run_git("cat-file", "--batch-check=%(objectname) %(objectsize)", cwd=root,
                   stdin="".join(f"{b}\n" for b in blobs))
    for line in proc.stdout.splitlines():
        name, _, size = line.partition(" ")
        if size.isdigit() and int(size) > limit:
            return blobs.get(name, name), int(size)
    return None


def _covers(record: str, path: str) -> bool:
    return path == record or (record.endswith("/") and path.startswith(record))


def _changed_by_merges(root: Path, base: str, head: str) -> set[str]:
    """Paths a merge on the first-parent line `base..head` changed against its first parent
    (what workers' branches brought in; agentrun's own commits are not merges)."""
    proc = run_git("log", "--first-parent", "--merges", "--diff-merges=first-parent",
                   "--name-only", "-z", "--format=", "--no-renames", f"{base}..{head}",
                   cwd=root)
    return {p.strip("\n") for p in split_z(proc.stdout)} - {""}


def _read_capped(root: Path, args: list[str], budget: int) -> str | None:
    """git's output as text, or None once it passes `budget` characters (git is stopped then:
    nothing beyond the budget is ever held). Bytes that are not UTF-8 are replaced, NULs shown
    as `\\x00`."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pieces: list[str] = []
    size = 0
    argv, env = git_command(*args, cwd=root)
    with subprocess.Popen(argv, cwd=root, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, stdin=subprocess.DEVNULL) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        while chunk := proc.stdout.read(_CHUNK):
            piece = decoder.decode(chunk).replace("\x00", "\\x00")
            size += len(piece)
            if size > budget:
                proc.kill()
                return None
            pieces.append(piece)
        pieces.append(decoder.decode(b"", final=True))
        error = proc.stderr.read(_CHUNK).decode("utf-8", "replace")
    if proc.returncode != 0:
        raise GitError(args, proc.returncode, error, root)
    return "".join(pieces)


# -- parts ---------------------------------------------------------------------------------------

def split_diff(text: str, limit: int) -> list[str]:
    """`text` in pieces of at most `limit` characters, cut between files where it can, else
    between hunks, else between lines (a longer line is cut within); a piece that continues a
    file starts with that file's header again."""
    parts: list[str] = []
    current = ""
    for header, body in _files(text):
        whole = header + body
        if len(current) + len(whole) <= limit:
            current += whole
            continue
        if current:
            parts.append(current)
            current = ""
        if len(whole) <= limit:
            current = whole
            continue
        *full, current = _pieces(header, body, limit)  # the last piece has room for more
        parts += full
    if current:
        parts.append(current)
    return parts


def _files(text: str) -> list[tuple[str, str]]:
    """(header, hunks) of each file in a `git diff -p` text."""
    files: list[list[str]] = []
    for line in text.splitlines(keepends=True):
        if line.startswith("diff --git ") or not files:
            files.append([line, ""])
        elif not files[-1][1] and not line.startswith("@@"):
            files[-1][0] += line
        else:
            files[-1][1] += line
    return [(h, b) for h, b in files]


def _pieces(header: str, body: str, limit: int) -> list[str]:
    """One file's diff too long for a part: its hunks (a longer hunk by lines, a longer line
    by characters) packed into pieces that each start with the file's header."""
    room = max(limit - len(header) - 40, limit // 2)
    units: list[str] = []
    for hunk in _hunks(body):
        if len(hunk) <= room:
            units.append(hunk)
            continue
        for line in hunk.splitlines(keepends=True):
            units += [line[i:i + room] for i in range(0, len(line), room)]
    pieces, current = [], ""
    for unit in units:
        if current and len(current) + len(unit) > room:
            pieces.append(current)
            current = ""
        current += unit
    if current:
        pieces.append(current)
    total = len(pieces)
    return [f"{header}(this file's diff, piece {n} of {total})\n{p}"
            for n, p in enumerate(pieces, start=1)]


def _hunks(body: str) -> list[str]:
    hunks: list[str] = []
    for line in body.splitlines(keepends=True):
        if line.startswith("@@") or not hunks:
            hunks.append(line)
        else:
            hunks[-1] += line
    return hunks
