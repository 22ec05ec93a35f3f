"""A model that reports `failed` with a reason gets one more try with that reason in front of
it, not every configured retry; validation failures keep the configured retries."""

from __future__ import annotations

from pathlib import Path

from clirun import agentrun
from runkit import make_project, scripted, spec_text, submit, writes

ONE = [("G1", [], "src/a.py")]


def test_self_reported_failure_is_retried_once_with_its_reason(tmp_path):
    script = {"groups": {"G1": [
        submit("failed", "cannot", error="the spec names no module for the parser"),
        submit("failed", "still cannot", error="still no module named"),
        *writes("src/a.py", "A = 1\n"),  # a third attempt would succeed: it must not happen
    ]}}
    root = make_project(tmp_path / "p", "SPEC-50", spec_text("SPEC-50", ONE), script)
    proc = agentrun("run", "SPEC-50", *scripted("--max-retries", "3"), cwd=root)
    assert proc.returncode == 1, proc.stderr
    group = proc.json["groups"]["G1"]
    assert group["status"] == "failed" and group["attempts"] == 2
    assert "reported the failure itself: retried once, not 3 times" in group["error"]
    assert "still no module named" in group["error"]
    assert not (root / "src/a.py").exists()
    spec = (root / ".specflow/specs/SPEC-50.md").read_text()
    assert "retried once" in spec[spec.index("## Execution Summary"):]
    records = "".join(p.read_text(errors="replace") for p in
                      Path(proc.json["run_dir"]).rglob("*") if p.is_file())
    assert "Previous attempt failed (attempt 1 of 4)" in records
    assert "the spec names no module for the parser" in records  # the reason, fed back


def test_validation_failures_keep_the_configured_retries(tmp_path):
    bad = writes("src/a.py", "A = (\n")
    script = {"groups": {"G1": [*bad, *bad, *writes("src/a.py", "A = 1\n")]}}
    root = make_project(tmp_path / "p", "SPEC-51", spec_text("SPEC-51", ONE), script)
    check = ("python -c 'import ast, pathlib; p = pathlib.Path(\"src/a.py\"); "
             "p.exists() and ast.parse(p.read_text())'")  # passes on the base: no file yet
    proc = agentrun("run", "SPEC-51", *scripted("--max-retries", "3", "--validate", check),
                    cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert proc.json["groups"]["G1"]["attempts"] == 3
