"""`write_file` writes at most `max_write_bytes` (config) per call, and says the limit."""

from __future__ import annotations

from pathlib import Path

from clirun import agentrun
from runkit import make_project, scripted, spec_text, submit

from agentrun.tools.base import INVALID_ARGUMENTS, CommandPolicy, ToolContext
from agentrun.tools.registry import Toolset

ONE = [("G1", [], "src/a.py")]


def test_write_file_refuses_content_over_the_limit(tmp_path: Path):
    tools = Toolset(ToolContext(root=tmp_path, policy=CommandPolicy(max_write_bytes=10)))
    over = tools.call("write_file", {"path": "big.txt", "content": "x" * 11})
    assert over.error_kind == INVALID_ARGUMENTS
    assert "11 bytes, over the write_file limit of 10 bytes" in over.content
    assert "max_write_bytes" in over.content and not (tmp_path / "big.txt").exists()
    assert not tools.call("write_file", {"path": "ok.txt", "content": "x" * 10}).is_error


def test_the_configured_limit_reaches_the_worker(tmp_path: Path):
    script = {"groups": {"G1": [
        {"tool_calls": [{"name": "write_file", "arguments": {
            "path": "src/big.txt", "content": "y" * 500}}]},
        {"tool_calls": [{"name": "write_file", "arguments": {
            "path": "src/a.py", "content": "A = 1\n"}}]},
        submit("complete", "done", ["every file exists"])]}}
    root = make_project(tmp_path / "p", "SPEC-44", spec_text("SPEC-44", ONE), script,
                        files={".specflow/config.yaml": "max_write_bytes: 100\n"})
    proc = agentrun("run", "SPEC-44", *scripted(), cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert (root / "src/a.py").exists() and not (root / "src/big.txt").exists()
    transcripts = "".join(p.read_text() for p in root.rglob("transcript.jsonl"))
    assert "500 bytes, over the write_file limit of 100 bytes" in transcripts


def test_a_bad_limit_is_refused_naming_the_key(tmp_path: Path):
    root = make_project(tmp_path / "p", "SPEC-45", spec_text("SPEC-45", ONE), {"groups": {}},
                        files={".specflow/config.yaml": "max_write_bytes: 0\n"})
    proc = agentrun("run", "SPEC-45", *scripted(), cwd=root)
    assert proc.returncode == 2 and "max_write_bytes" in proc.stderr
    assert "Traceback" not in proc.stderr
