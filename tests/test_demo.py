"""`agentrun demo`: the README's first command, offline, end to end."""

from __future__ import annotations

from clirun import agentrun, plain_python_env
from gitutil import run_git

from agentrun.sandbox.jail import unavailable_reason


def test_demo_runs_the_example_end_to_end(tmp_path):
    target = tmp_path / "demo"
    # the example's pytest without this environment's own pytest plugins, as a user runs it
    proc = agentrun("demo", "--dir", str(target), "--json", timeout=300,
                    env=plain_python_env(tmp_path / "plain-python"))
    assert proc.returncode == 0, proc.stderr
    result = proc.json
    assert result["status"] == "complete" and result["mode"] == "orchestrated"
    if unavailable_reason() is None:  # the demo's commands ran confined, and still passed
        assert result["sandbox"] == "on (bubblewrap)"
    assert len(result["groups"]) >= 5
    merges = run_git(target, "log", "--merges", "--format=%s").splitlines()
    assert len(merges) == len(result["groups"])
    spec = (target / ".specflow/specs/SPEC-002.md").read_text()
    assert result["review"]["result"] == "APPROVED"  # the demo shows the review step
    assert "## Execution Summary" in spec and "status: done" in spec
    assert "### Review v1 (" in spec and "**Result:** APPROVED" in spec
    assert "Complete, approved" in (target / ".specflow/STATE.md").read_text()
    assert run_git(target, "status", "--porcelain") == ""


def test_demo_refuses_a_directory_that_is_not_empty(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    proc = agentrun("demo", "--dir", str(tmp_path))
    assert proc.returncode == 2
    assert "not empty" in proc.stderr and "Traceback" not in proc.stderr
    assert (tmp_path / "keep.txt").read_text() == "mine"
