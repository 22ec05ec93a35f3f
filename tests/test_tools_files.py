"""read_file, write_file, edit_file, list_files and search_files on real files."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from agentrun.tools import fileio, files
from agentrun.tools.base import (
    INVALID_ARGUMENTS,
    NOT_FOUND,
    PATH_DENIED,
    TIMEOUT,
    TOOL_ERROR,
    ToolContext,
)
from agentrun.tools.registry import Toolset


@pytest.fixture
def root(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    (work / "src" / "pkg").mkdir(parents=True)
    (work / "src" / "pkg" / "mod.py").write_text("def foo():\n    return 1\n\n\nfoo()\n")
    (work / "src" / "main.py").write_text("import pkg\nprint('main')\n")
    (work / "README.md").write_text("# Title\nSome text about foo.\n")
    (work / ".git").mkdir()
    (work / ".git" / "HEAD").write_text("ref: refs/heads/main\nfoo\n")
    return work


@pytest.fixture
def tools(root: Path) -> Toolset:
    return Toolset(ToolContext(root=root))


# ------------------------------------------------------------------------------- read_file

def test_read_numbers_lines(tools):
    result = tools.call("read_file", {"path": "src/pkg/mod.py"})
    assert not result.is_error
    assert result.content.splitlines()[:2] == ["     1\tdef foo():", "     2\t    return 1"]
    assert result.data["total_lines"] == 5 and not result.data["truncated"]


def test_read_offset_and_limit(tools):
    result = tools.call("read_file", {"path": "src/pkg/mod.py", "offset": 2, "limit": 2})
    lines = result.content.splitlines()
    assert lines[0] == "     2\t    return 1"
    assert lines[1] == "     3\t"
    assert "showing lines 2-3 of 5" in lines[2] and "offset=4" in lines[2]


def test_read_pages_long_files(root, tools):
    (root / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 2501)))
    first = tools.call("read_file", {"path": "long.txt"})
    assert first.data["end_line"] == files.READ_DEFAULT_LIMIT
    assert "offset=2001 to continue" in first.content
    rest = tools.call("read_file", {"path": "long.txt", "offset": 2001})
    assert rest.content.splitlines()[-1] == "  2500\tline 2500"
    assert not rest.data["truncated"]


def test_read_caps_characters_and_long_lines(root, tools):
    (root / "wide.txt").write_text(("x" * 5000 + "\n") * 100)
    result = tools.call("read_file", {"path": "wide.txt"})
    assert len(result.content) <= files.READ_MAX_CHARS + 200
    assert "[line cut at 2000 chars]" in result.content
    assert result.data["truncated"] and "to continue" in result.content


def test_read_offset_past_end(tools):
    result = tools.call("read_file", {"path": "src/main.py", "offset": 10})
    assert result.error_kind == INVALID_ARGUMENTS and "has 2 lines" in result.content


def test_read_binary_file_is_an_error(root, tools):
    (root / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    result = tools.call("read_file", {"path": "img.png"})
    assert result.is_error and result.error_kind == TOOL_ERROR and "binary" in result.content


def test_read_empty_missing_directory(root, tools):
    (root / "empty.txt").write_text("")
    assert "is empty" in tools.call("read_file", {"path": "empty.txt"}).content
    assert tools.call("read_file", {"path": "nope.txt"}).error_kind == NOT_FOUND
    directory = tools.call("read_file", {"path": "src"})
    assert directory.is_error and "list_files" in directory.content


def test_read_fifo_does_not_block(root, tools):
    os.mkfifo(root / "pipe")
    result = tools.call("read_file", {"path": "pipe"})
    assert result.is_error and "not a regular file" in result.content


def test_read_refuses_huge_files(root, tools, monkeypatch):
    monkeypatch.setattr(fileio, "READ_MAX_FILE_BYTES", 10)
    result = tools.call("read_file", {"path": "src/pkg/mod.py"})
    assert result.error_kind == TOOL_ERROR and "too large" in result.content


def test_read_and_search_redact_secret_values(root, tools, monkeypatch):
    monkeypatch.setenv("DEPLOY_TOKEN", "tok-9f8e7d6c5b")
    (root / "config.env").write_text("DEPLOY_TOKEN=tok-9f8e7d6c5b\n")
    read = tools.call("read_file", {"path": "config.env"})
    assert "tok-9f8e7d6c5b" not in read.content and "DEPLOY_TOKEN=[REDACTED]" in read.content
    found = tools.call("search_files", {"pattern": "DEPLOY"})
    assert "tok-9f8e7d6c5b" not in found.content and "[REDACTED]" in found.content


def test_read_outside_is_denied(tools):
    assert tools.call("read_file", {"path": "../secret"}).error_kind == PATH_DENIED
    assert tools.call("read_file", {"path": "/etc/hostname"}).error_kind == PATH_DENIED


def test_read_invalid_arguments(tools):
    result = tools.call("read_file", {"path": "src/main.py", "offset": 0, "extra": 1})
    assert result.error_kind == INVALID_ARGUMENTS
    assert "offset" in result.content and "extra: unexpected argument" in result.content
    assert "read_file(path, offset?, limit?)" in result.content


# ------------------------------------------------------------------------------ write_file

def test_write_creates_with_parents_then_overwrites(root, tools):
    created = tools.call("write_file", {"path": "new/deep/f.txt", "content": "héllo\n"})
    assert not created.is_error
    assert created.content == "created new/deep/f.txt (7 bytes)"
    assert created.data == {"path": "new/deep/f.txt", "bytes": 7, "created": True}
    again = tools.call("write_file", {"path": "new/deep/f.txt", "content": "bye"})
    assert again.content == "overwrote new/deep/f.txt (3 bytes)" and not again.data["created"]
    assert (root / "new" / "deep" / "f.txt").read_bytes() == b"bye"
    assert [p.name for p in (root / "new" / "deep").iterdir()] == ["f.txt"]  # no temp left


def test_write_keeps_content_bytes_and_mode(root, tools):
    script = root / "run.sh"
    script.write_text("old")
    script.chmod(0o755)
    tools.call("write_file", {"path": "run.sh", "content": "#!/bin/sh\r\necho hi\r\n"})
    assert script.read_bytes() == b"#!/bin/sh\r\necho hi\r\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o755


def test_write_through_inside_symlink_updates_target(root, tools):
    (root / "alias.py").symlink_to(root / "src" / "main.py")
    result = tools.call("write_file", {"path": "alias.py", "content": "x = 1\n"})
    assert result.content.startswith("overwrote src/main.py")
    assert (root / "alias.py").is_symlink()
    assert (root / "src" / "main.py").read_text() == "x = 1\n"


def test_write_errors(root, tools):
    assert tools.call("write_file", {"path": "src", "content": "x"}).error_kind == TOOL_ERROR
    root_itself = tools.call("write_file", {"path": ".", "content": "x"})
    assert root_itself.error_kind == TOOL_ERROR and "directory" in root_itself.content
    assert tools.call("write_file", {"path": "../x", "content": "x"}).error_kind == PATH_DENIED
    assert not (root.parent / "x").exists()
    missing = tools.call("write_file", {"path": "a.txt"})
    assert missing.error_kind == INVALID_ARGUMENTS and "content: missing" in missing.content


# ------------------------------------------------------------------------------- edit_file

def test_edit_replaces_unique_match(root, tools):
    result = tools.call("edit_file", {"path": "src/pkg/mod.py", "old": "return 1",
                                      "new": "return 2"})
    assert not result.is_error and "line 2" in result.content
    assert (root / "src" / "pkg" / "mod.py").read_text() == \
        "def foo():\n    return 2\n\n\nfoo()\n"


def test_edit_no_match_shows_closest_lines(root, tools):
    result = tools.call("edit_file", {"path": "src/pkg/mod.py", "old": "def fooo():\n  pass",
                                      "new": "x"})
    assert result.error_kind == NOT_FOUND
    assert "     1\tdef foo():" in result.content
    assert (root / "src" / "pkg" / "mod.py").read_text().startswith("def foo():")


def test_edit_whitespace_mismatch_hint(tools):
    result = tools.call("edit_file", {"path": "src/pkg/mod.py",
                                      "old": "def foo():\n  return 1", "new": "x"})
    assert result.error_kind == NOT_FOUND and "whitespace" in result.content


def test_edit_multiple_matches_refused(root, tools):
    result = tools.call("edit_file", {"path": "src/pkg/mod.py", "old": "foo()", "new": "bar()"})
    assert result.error_kind == INVALID_ARGUMENTS
    assert "2 times" in result.content and "lines 1, 5" in result.content
    assert "more surrounding context" in result.content
    assert "bar" not in (root / "src" / "pkg" / "mod.py").read_text()


def test_edit_crlf_file_with_lf_old_text(root, tools):
    (root / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    result = tools.call("edit_file", {"path": "win.txt", "old": "one\ntwo", "new": "1\n2"})
    assert not result.is_error
    assert (root / "win.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"


def test_edit_argument_errors(tools):
    same = tools.call("edit_file", {"path": "src/main.py", "old": "x", "new": "x"})
    assert same.error_kind == INVALID_ARGUMENTS
    empty = tools.call("edit_file", {"path": "src/main.py", "old": "", "new": "x"})
    assert empty.error_kind == INVALID_ARGUMENTS and "old" in empty.content
    missing = tools.call("edit_file", {"path": "nope.py", "old": "a", "new": "b"})
    assert missing.error_kind == NOT_FOUND


def test_edit_binary_file_refused(root, tools):
    (root / "blob.bin").write_bytes(b"\xff\xfe\x00abc")
    result = tools.call("edit_file", {"path": "blob.bin", "old": "abc", "new": "x"})
    assert result.error_kind == TOOL_ERROR and "UTF-8" in result.content


# ------------------------------------------------------------------------------ list_files

def test_list_sorted_and_skips_git(tools):
    result = tools.call("list_files", {})
    assert result.content.splitlines() == ["README.md", "src/main.py", "src/pkg/mod.py"]
    assert result.data["count"] == 3


def test_list_patterns(tools):
    assert tools.call("list_files", {"pattern": "*.py"}).data["files"] == \
        ["src/main.py", "src/pkg/mod.py"]
    assert tools.call("list_files", {"pattern": "src/*.py"}).data["files"] == ["src/main.py"]
    assert tools.call("list_files", {"pattern": "**/mod.py"}).data["files"] == ["src/pkg/mod.py"]
    assert tools.call("list_files", {"pattern": "*.{md,txt}"}).data["files"] == ["README.md"]
    sub = tools.call("list_files", {"path": "src", "pattern": "pkg/*.py"})
    assert sub.data["files"] == ["src/pkg/mod.py"]
    none = tools.call("list_files", {"pattern": "*.rs"})
    assert not none.is_error and "no files matching" in none.content


def test_list_caps_entries(root, tools, monkeypatch):
    monkeypatch.setattr(files, "LIST_MAX_ENTRIES", 2)
    result = tools.call("list_files", {})
    assert result.content.splitlines()[:2] == ["README.md", "src/main.py"]
    assert "1 more files not shown" in result.content and result.data["truncated"]


def test_list_does_not_follow_symlinked_dirs(tmp_path, root, tools):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "leak.txt").write_text("x")
    (root / "ext").symlink_to(outside, target_is_directory=True)
    listed = tools.call("list_files", {}).data["files"]
    assert "ext/leak.txt" not in listed
    assert tools.call("list_files", {"path": "ext"}).error_kind == PATH_DENIED


def test_list_errors(tools):
    assert tools.call("list_files", {"path": "nope"}).error_kind == NOT_FOUND
    assert tools.call("list_files", {"path": ".."}).error_kind == PATH_DENIED


def test_glob_regex():
    rx = fileio.glob_regex
    assert rx("*.py").match("a.py") and not rx("*.py").match("a/b.py")
    assert rx("**/*.py").match("a.py") and rx("**/*.py").match("a/b/c.py")
    assert rx("test_?.py").match("test_1.py") and not rx("test_?.py").match("test_12.py")
    assert rx("[!a]*.txt").match("b.txt") and not rx("[!a]*.txt").match("a.txt")
    assert rx("*.{ts,tsx}").match("x.tsx") and not rx("*.{ts,tsx}").match("x.js")


# ---------------------------------------------------------------------------- search_files

def test_search_reports_path_line_text(tools):
    result = tools.call("search_files", {"pattern": r"foo\b"})
    assert result.content.splitlines() == [
        "README.md:2: Some text about foo.",
        "src/pkg/mod.py:1: def foo():",
        "src/pkg/mod.py:5: foo()",
    ]  # .git/HEAD also contains foo but is skipped


def test_search_glob_and_path(tools):
    assert tools.call("search_files", {"pattern": "foo", "glob": "*.md"}).data["count"] == 1
    single = tools.call("search_files", {"pattern": "print", "path": "src/main.py"})
    assert single.content == "src/main.py:2: print('main')"
    sub = tools.call("search_files", {"pattern": "import", "path": "src"})
    assert sub.content == "src/main.py:1: import pkg"


def test_search_skips_binaries_and_outside_symlinks(tmp_path, root, tools):
    (root / "bin.dat").write_bytes(b"foo\x00\x01\x02")
    outside = tmp_path / "outside.txt"
    outside.write_text("foo secret\n")
    (root / "link.txt").symlink_to(outside)
    hits = tools.call("search_files", {"pattern": "foo"}).content
    assert "bin.dat" not in hits and "secret" not in hits


def test_search_no_match_and_bad_regex(tools):
    none = tools.call("search_files", {"pattern": "zzz"})
    assert not none.is_error and "no matches" in none.content
    bad = tools.call("search_files", {"pattern": "(unclosed"})
    assert bad.error_kind == INVALID_ARGUMENTS and "regular expression" in bad.content


def test_search_caps_matches(root, tools, monkeypatch):
    monkeypatch.setattr(files, "SEARCH_MAX_MATCHES", 3)
    (root / "many.txt").write_text("hit\n" * 10)
    result = tools.call("search_files", {"pattern": "hit"})
    assert result.data["count"] == 3 and "stopped after 3 matches" in result.content


def test_listing_and_search_never_enter_git_in_any_case(root, tools):
    (root / "sub" / ".GIT").mkdir(parents=True)
    (root / "sub" / ".GIT" / "config").write_text("foo token\n")
    listed = tools.call("list_files", {})
    assert not any(".git" in f.casefold() for f in listed.data["files"])
    assert "sub/.GIT" not in tools.call("search_files", {"pattern": "token"}).content
    for call in (("list_files", {"path": "sub/.GIT"}),
                 ("search_files", {"pattern": "foo", "path": ".git"}),
                 ("read_file", {"path": "sub/.GIT/config"})):
        result = tools.call(*call)
        assert result.is_error and "inside .git" in result.content, call


def test_search_stops_a_runaway_pattern_at_its_deadline(root, tools, monkeypatch):
    monkeypatch.setattr(files, "SEARCH_TIMEOUT_S", 1.0)
    (root / "big.txt").write_text(("a" * 40 + "!\n") * 50)
    started = time.monotonic()
    result = tools.call("search_files", {"pattern": r"(a+)+$"})
    assert time.monotonic() - started < 10
    assert result.error_kind == TIMEOUT and "stopped after 1 s" in result.content
    assert "simplify the pattern" in result.content


def test_search_caps_output_characters(root, tools, monkeypatch):
    monkeypatch.setattr(files, "SEARCH_MAX_CHARS", 1000)
    (root / "wide.txt").write_text(("hit " + "x" * 200 + "\n") * 50)
    result = tools.call("search_files", {"pattern": "hit"})
    assert result.data["truncated"] and len(result.content) < 1200
    assert result.data["count"] == 4 and "stopped after 4 matches" in result.content
