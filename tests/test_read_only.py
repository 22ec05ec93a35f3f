"""A read-only checkout (or one the user may not write) is bad input for every command that
would write to it: one error naming the path, exit 2, nothing written and nothing spent —
never an internal error. Commands that only read it work as before."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from clirun import ENTRY_POINT, CliResult, agentrun, cli_env
from gitutil import run_git
from launcher import Launcher
from runkit import make_project, scripted, spec_text, writes
from test_review_cli import met, review_turn


def read_only_launcher(root: Path) -> Launcher:
    """A launcher for whose calls `root` cannot be written: a read-only bind mount (root is
    not stopped by permission bits), or the bits themselves for any other user."""
    if os.geteuid() != 0:
        subprocess.run(["chmod", "-R", "a-w", str(root)], check=True)
        return Launcher(ENTRY_POINT, cli_env())
    if shutil.which("bwrap") is None:
        pytest.skip("root without bubblewrap cannot make a folder read-only")
    return Launcher(ENTRY_POINT, cli_env(),
                    wrap=["bwrap", "--dev-bind", "/", "/", "--ro-bind", str(root), str(root)])


def snapshot(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*")}


def test_every_command_names_the_read_only_path_and_exits_2(tmp_path):
    script = {"groups": {"G1": writes("one.txt", "1\n")},
              "agents": {"code-reviewer": [review_turn(
                  [met(1, "one.txt:1"), {"criterion": 2, "verdict": "not met",
                                         "evidence": "README.md"}])],
                         "spec-auditor": [{"text": "never asked"}]}}
    root = make_project(tmp_path / "p", "SPEC-1", spec_text("SPEC-1", [("G1", [], "one.txt")]),
                        script, files={".specflow/specs/SPEC-2.md": spec_text(
                            "SPEC-2", [("G1", [], "two.txt")], status="draft")})
    ran = agentrun("run", "SPEC-1", *scripted(review=True), cwd=root)
    assert ran.returncode == 1 and ran.json["review"]["result"] == "CHANGES_REQUESTED"
    head, before = run_git(root, "rev-parse", "HEAD"), snapshot(root)
    out = tmp_path / "out.json"
    model = ("--provider", "scripted", "--script", ".specflow/script.yaml")
    writes_to = {  # each command, and the path its error names
        ("new", "Another"): ".specflow/specs/SPEC-003.md",
        ("init",): ".specflow/config.yaml",  # the fixture has none yet
        ("clean", "--dry-run"): str(root / ".git/agentrun-run.lock"),
        ("audit", "--static", "SPEC-2"): ".specflow/specs/SPEC-2.md",  # a draft it would pass
        ("audit", "SPEC-1", *model): str(root / ".specflow/specs"),
        ("review", "SPEC-1", *model): str(root / ".specflow/specs"),
        ("fix", "SPEC-1", *model): str(root / ".specflow"),
        ("run", "SPEC-1", *scripted()[:-1], "--rerun"): str(root / ".specflow"),
        ("worker", "--spec", "SPEC-1", "--groups", "G1", "--out", str(out), *model):
            str(root / ".git"),
    }
    reads = [("plan", "SPEC-1"), ("status", "SPEC-1"), ("audit", "--static", "SPEC-1")]
    launcher = read_only_launcher(root)
    try:
        results = {args: CliResult(*_call(launcher, args, root))
                   for args in [*writes_to, *reads]}
    finally:
        launcher.close()
        subprocess.run(["chmod", "-R", "u+w", str(root)], check=True)
    for args, path in writes_to.items():
        proc = results[args]
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, args
        error = next(line for line in proc.stderr.splitlines() if line.startswith("error: "))
        assert "cannot write" in error and path in error, (args, error)
        assert proc.stderr.splitlines()[-1].startswith("hint: "), (args, proc.stderr)
    for args in reads:
        assert results[args].returncode == 0, (args, results[args].stderr)
    assert "G1" in results[("plan", "SPEC-1")].stdout
    assert run_git(root, "rev-parse", "HEAD") == head and snapshot(root) == before
    assert not out.exists()
    # the positive control: writable again, the same checkout takes a new spec
    assert agentrun("new", "Another", cwd=root).returncode == 0
    assert yaml.safe_load((root / ".specflow/script.yaml").read_text())["groups"]


def _call(launcher: Launcher, args: tuple[str, ...], root: Path) -> tuple[int, str, str]:
    proc = launcher.run([str(ENTRY_POINT), *args], root, cli_env(), timeout=120)
    return proc.returncode, proc.stdout, proc.stderr
