"""`agentrun run` checks each wave's merged result, and a `complete` must be earned: through the
CLI, with real git repositories and the scripted model."""

from __future__ import annotations

import json
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from clirun import agentrun, finish, start
from gitutil import run_git
from runkit import make_project, scripted, spec_text, submit, writes

CHECK = f"{sys.executable} check.py"

# imports every module at the root and calls its `run()`: a caller of a renamed function fails
CHECK_PY = """import importlib
import pathlib

for path in sorted(pathlib.Path(".").glob("*.py")):
    if path.stem != "check":
        module = importlib.import_module(path.stem)
        if hasattr(module, "run"):
            module.run()
"""
# a Python project ignores its bytecode, as real ones do (the validation command imports lib)
LIB = {".gitignore": ".specflow/runs/\n__pycache__/\n",
       "check.py": CHECK_PY, "lib.py": "def old():\n    return 1\n",
       "app.py": "import lib\n\n\ndef run():\n    return lib.old()\n"}
# G1 renames lib.old() to lib.new(); G2 adds a caller of lib.old(); G3 (wave 2) builds on G1
GROUPS = [("G1", [], "lib.py"), ("G2", [], "caller.py"), ("G3", ["G1"], "extra.py")]


def write_many(files: dict[str, str], summary: str, **submit_args: Any) -> list[dict]:
    calls = [{"name": "write_file", "arguments": {"path": p, "content": c}}
             for p, c in files.items()]
    return [{"tool_calls": calls, "usage": {"input_tokens": 1000, "output_tokens": 100}},
            submit_with(summary, **submit_args)]


def submit_with(summary: str, **extra: Any) -> dict:
    turn = submit("complete", summary, ["every file exists"])
    turn["tool_calls"][0]["arguments"].update(extra)
    return turn


def semantic_conflict_script() -> dict:
    return {"groups": {
        "G1": write_many({"lib.py": "def new():\n    return 1\n",
                          "app.py": "import lib\n\n\ndef run():\n    return lib.new()\n"},
                         "renamed old to new"),
        "G2": writes("caller.py", "import lib\n\n\ndef run():\n    return lib.old() + 1\n"),
        "G3": writes("extra.py", "VALUE = 3\n"),
    }}


def events_of(result: dict) -> list[dict]:
    path = Path(result["run_dir"]) / "events.ndjson"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_wave_whose_merge_breaks_the_check_stops_the_run_and_is_undone(tmp_path):
    root = make_project(tmp_path / "p", "SPEC-I", spec_text("SPEC-I", GROUPS),
                        semantic_conflict_script(), files=LIB)
    base = run_git(root, "rev-parse", "HEAD")
    proc = agentrun("run", "SPEC-I", *scripted("--validate", CHECK, "--max-retries", "0"),
                    cwd=root)
    assert proc.returncode == 1, proc.stderr
    result = proc.json
    assert result["status"] == "failed" and result["stop_reason"] == "integration"
    [check] = result["integration"]
    assert check["wave"] == "1" and not check["ok"] and check["base"] == base
    assert check["culprits"] == [["G1", "G2"]] and check["restored"]
    assert "AttributeError" in check["output"] and "old" in check["output"]
    # the target branch is as before the wave: only the run's report commit is on top
    assert run_git(root, "rev-parse", "HEAD^") == base
    assert run_git(root, "log", "--merges", "--format=%s", f"{base}..HEAD") == ""
    assert (root / "lib.py").read_text() == LIB["lib.py"]
    assert not (root / "caller.py").exists()
    # the wave's branches are kept and named; its groups failed; wave 2 never ran
    branches = run_git(root, "branch", "--format=%(refname:short)").splitlines()
    for gid in ("G1", "G2"):
        group = result["groups"][gid]
        assert group["status"] == "failed" and "broken by G1 + G2" in group["error"]
        assert group["branch"] in branches and group["branch"] in check["kept_branches"]
        assert Path(group["worktree"]).is_dir()
    g3 = result["groups"]["G3"]
    assert g3["status"] == "blocked" and "integration check" in g3["error"]
    assert [w["status"] for w in result["waves"]] == ["failed", "skipped"]
    assert "G3" not in {e.get("batch") for e in events_of(result)
                        if e["type"] == "worker_start"}
    # no throwaway check worktree or branch is left behind
    assert not any("check-" in b for b in branches)
    assert run_git(root, "status", "--porcelain") == ""
    # the report names the wave, the culprits and the command's output
    spec = (root / ".specflow/specs/SPEC-I.md").read_text()
    assert "### Integration" in spec and "- Wave 1: `" in spec
    assert "broken by: G1 + G2" in spec and "AttributeError" in spec
    assert "status: review" not in spec
    state_md = (root / ".specflow/STATE.md").read_text()
    assert "wave 1's merged result fails" in state_md
    assert "wave 1's merged result fails" in proc.stderr  # said on the terminal too

    # `--resume` runs the wave again (the same script breaks it the same way)
    again = agentrun("run", "SPEC-I", *scripted("--validate", CHECK, "--max-retries", "0",
                                                "--resume"), cwd=root)
    assert again.returncode == 1, again.stderr
    rerun = {e.get("batch") for e in events_of(again.json) if e["type"] == "worker_start"}
    assert rerun == {"G1", "G2"}
    assert again.json["stop_reason"] == "integration"


def test_merges_that_pass_the_check_complete_and_say_so(tmp_path):
    script = {"groups": {"G1": writes("one.py", "def run():\n    return 1\n"),
                         "G2": writes("two.py", "VALUE = 2\n")}}
    root = make_project(tmp_path / "p", "SPEC-J", spec_text(
        "SPEC-J", [("G1", [], "one.py"), ("G2", [], "two.py")]), script, files=LIB)
    proc = agentrun("run", "SPEC-J", *scripted("--validate", CHECK), cwd=root)
    assert proc.returncode == 0, proc.stderr
    result = proc.json
    assert result["status"] == "complete" and result["stop_reason"] is None
    [check] = result["integration"]
    assert check["ok"] and check["commit"] == run_git(root, "rev-parse", "HEAD^")
    assert run_git(root, "worktree", "list").count("\n") == 0  # all removed after the check
    spec = (root / ".specflow/specs/SPEC-J.md").read_text()
    assert f"- Wave 1: `{CHECK}` on `{check['commit'][:12]}`: passed" in spec


def one_group_spec(spec_id: str) -> str:
    return spec_text(spec_id, [("G1", [], "missing.py")])


def test_an_empty_complete_claim_is_partial(tmp_path):
    script = {"groups": {"G1": [submit("complete", "all done", ["every file exists"])]}}
    root = make_project(tmp_path / "p", "SPEC-E", one_group_spec("SPEC-E"), script)
    proc = agentrun("run", "SPEC-E", *scripted("--max-retries", "0"), cwd=root)
    assert proc.returncode == 1, proc.stderr
    result = proc.json
    assert result["status"] == "partial"
    group = result["groups"]["G1"]
    assert group["status"] == "partial" and group["commits"] == []
    assert "committed no changes" in group["error"] and "no_change_needed" in group["error"]
    assert "reported complete but committed no changes" in group["deviations"]


def test_complete_without_a_change_needs_the_models_reason_and_no_check_is_said(tmp_path):
    """G1 claims complete without a change and says why; G2 writes its file. The run has no
    validation command, so its report says it was not integration-checked."""
    reason = "missing.py already exists upstream with the required content"
    script = {"groups": {"G1": [submit_with("nothing to do", no_change_needed=reason)],
                         "G2": writes("two.py", "Y = 2\n")}}
    root = make_project(tmp_path / "p", "SPEC-N", spec_text(
        "SPEC-N", [("G1", [], "missing.py"), ("G2", [], "two.py")]), script)
    proc = agentrun("run", "SPEC-N", *scripted("--max-retries", "0"), cwd=root)
    assert proc.returncode == 0, proc.stderr
    group = proc.json["groups"]["G1"]
    assert proc.json["status"] == "complete" and group["status"] == "complete"
    assert group["no_change_needed"] == reason
    assert f"no change needed: {reason}" in group["deviations"]
    spec = (root / ".specflow/specs/SPEC-N.md").read_text()
    assert f"G1: no change needed: {reason}" in spec
    # no validation command: not checked, and said so
    assert proc.json["groups"]["G2"]["status"] == "complete"
    assert proc.json["integration"] == [] and proc.json["integration_command"] is None
    assert "Not integration-checked: no validation command." in spec


def test_an_interrupt_during_the_check_sets_the_wave_aside_for_resume(tmp_path):
    script = {"groups": {"G1": writes("one.py", "X = 1\n"), "G2": writes("two.py", "Y = 2\n")}}
    root = make_project(tmp_path / "p", "SPEC-S", spec_text(
        "SPEC-S", [("G1", [], "one.py"), ("G2", [], "two.py")]), script)
    base = run_git(root, "rev-parse", "HEAD")
    # slow on merged results only: the check of the base (no one.py yet) passes at once
    slow_check = 'case "$PWD" in */integration/*) if [ -e one.py ]; then sleep 60; fi;; esac'
    proc = start("run", "SPEC-S", *scripted("--validate", slow_check), cwd=root)
    deadline = time.monotonic() + 60
    while not any('"integration_start"' in p.read_text()
                  for p in root.glob(".specflow/runs/*/events.ndjson")):
        assert time.monotonic() < deadline and proc.poll() is None, "no integration check"
        time.sleep(0.1)
    time.sleep(0.5)
    homes = Path(tempfile.gettempdir()).glob(f"agentrun-home-{proc.pid}-*")
    assert list(homes)  # the run's own private HOME (its checks' commands) exists now
    proc.send_signal(signal.SIGINT)
    done = finish(proc, timeout=30)  # the check's sleep is killed, not waited for
    assert done.returncode == 130, done.stderr
    result = done.json
    assert result["status"] == "interrupted" and result["stop_reason"] is None
    assert [g["status"] for g in result["groups"].values()] == ["interrupted"] * 2
    assert result["integration"][0]["note"].startswith("interrupted before the check")
    assert run_git(root, "rev-parse", "HEAD") == base  # the unchecked merges are undone
    # nothing of its own is left: check worktree and branch, space reserve, its private HOME
    assert "/check-" not in run_git(root, "branch", "--list", "agentrun/*")
    assert not list(root.glob(".specflow/runs/*/integration/check-*"))
    assert not list(root.glob(".specflow/runs/*/space-reserve"))
    assert not list(Path(tempfile.gettempdir()).glob(f"agentrun-home-{proc.pid}-*"))
    # the resumed run does the wave again rather than adopting merges nobody checked
    again = agentrun("run", "SPEC-S", *scripted("--validate", "true", "--resume"), cwd=root)
    assert again.returncode == 0, again.stderr
    assert {e.get("batch") for e in events_of(again.json)
            if e["type"] == "worker_start"} == {"G1", "G2"}
    assert again.json["status"] == "complete" and again.json["integration"][0]["ok"]
