"""The matching half of `search_files`, run as a child process (`python -m agentrun.tools.search`).

Python's `re` cannot be interrupted: a catastrophic pattern such as `(a+)+$` on a long line
backtracks for hours while holding the GIL, so neither a thread nor a per-line time check could
stop it. A child process can be killed at a deadline, which bounds the search's time without
refusing legitimate patterns by guesswork. The child walks and opens files with the same
confinement as the other file tools (`fileio.walk`, `paths.open_beneath`), reads one JSON
request on stdin and writes one JSON answer on stdout.
"""

from __future__ import annotations

import functools
import json
import os
import re
import stat
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from agentrun.tools import fileio, paths


@dataclass
class SearchRequest:
    root: str
    path: str  # the resolved path to search (a file or a directory)
    pattern: str
    glob: str | None
    max_matches: int
    max_chars: int  # of all matching lines together
    line_chars: int
    max_file_bytes: int


@dataclass
class Answer:
    hits: list[str] = field(default_factory=list)
    searched: int = 0
    truncated: bool = False  # a cap on matches or characters was reached
    size: int = 0  # characters of `hits` so far

    def add(self, hit: str, req: SearchRequest) -> bool:
        """Record a hit; return True once a cap is reached and the search must stop."""
        if self.hits and self.size + len(hit) + 1 > req.max_chars:
            self.truncated = True
            return True
        self.hits.append(hit)
        self.size += len(hit) + 1
        self.truncated = len(self.hits) >= req.max_matches
        return self.truncated


def search(req: SearchRequest) -> Answer:
    root, real = Path(req.root), Path(req.path)
    regex = re.compile(req.pattern)
    base = paths.display_path(root, real)
    base = "" if base == "." else base
    matches = fileio.glob_matcher(req.glob)
    answer = Answer()
    if real.is_dir() and not real.is_symlink():
        for fd, name, rel in fileio.walk(root, real):
            if not matches(fileio.relative_to(rel, base)):
                continue
            answer.searched += 1
            opener = functools.partial(os.open, name, fileio.READ_FLAGS | os.O_NOFOLLOW,
                                       dir_fd=fd)
            if _search_file(opener, rel, regex, req, answer):
                break
    else:
        answer.searched = 1
        _search_file(lambda: paths.open_beneath(root, real, fileio.READ_FLAGS), base, regex,
                     req, answer)
    return answer


def _search_file(opener: Callable[[], int], rel: str, regex: re.Pattern[str], req: SearchRequest,
                 answer: Answer) -> bool:
    """Add the matches of one file; return True once a cap is reached.
    Unreadable, special, huge and binary files are skipped silently."""
    try:
        fd = opener()
    except OSError:
        return False
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_size > req.max_file_bytes:
        os.close(fd)
        return False
    with os.fdopen(fd, "rb") as fh:
        data = fh.read()
    if fileio.looks_binary(data[:fileio.SNIFF_BYTES]):
        return False
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if regex.search(line):
            text = line if len(line) <= req.line_chars else line[:req.line_chars] + " ..."
            if answer.add(f"{rel}:{number}: {text}", req):
                return True
    return False


def main() -> None:
    answer = search(SearchRequest(**json.load(sys.stdin)))
    json.dump(asdict(answer), sys.stdout)


if __name__ == "__main__":
    main()
