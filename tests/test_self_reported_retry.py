"""A model that reports `failed` with a reason gets one more try with that reason in front of
it, not every configured retry; validation failures keep the configured retries."""

from __future__ import annotations

from pathlib import Path

from clirun import agentrun
from runkit import make_project, scripted, spec_text, submit, writes

TWO = [("G1", [], "src/a.py"), ("G2", [], "src/b.py")]


def test_self_reported_failure_is_retried_once_validation_failures_keep_the_retries(tmp_path):
    # one run of two groups: G1 reports `failed` itself (one more try only), G2 fails
    # validation twice and keeps the configured retries
    bad = writes("src/b.py", "B = (\n")
    script = {"groups": {
        "G1": [
            submit("failed", "cannot", error="the spec names no module for the parser"),
            submit("failed", "still cannot", error="still no module named"),
            *writes("src/a.py", "A = 1\n"),  # a third attempt would succeed: it must not happen
        ],
        "G2": [*bad, *bad, *writes("src/b.py", "B = 1\n")]}}
    root = make_project(tmp_path / "p", "SPEC-50", spec_text("SPEC-50", TWO), script)
    check = ("python -c 'import ast, pathlib; p = pathlib.Path(\"src/b.py\"); "
             "p.exists() and ast.parse(p.read_text())'")  # passes on the base: no file yet
    proc = agentrun("run", "SPEC-50", *scripted("--retries", "3", "--validate", check),
                    cwd=root)
    assert proc.returncode == 1, proc.stderr
    group = proc.json["groups"]["G1"]
    assert group["status"] == "failed" and group["attempts"] == 2
    assert "reported the failure itself: retried once, not 3 times" in group["error"]
    assert "still no module named" in group["error"]
    assert not (root / "src/a.py").exists()
    spec = (root / ".specflow/specs/SPEC-50.md").read_text()
    assert "retried once" in spec[spec.index("## Execution Summary"):]
    g1 = [d for d in (Path(proc.json["run_dir"]) / "workers").iterdir() if "G1" in d.name]
    assert g1, list((Path(proc.json["run_dir"]) / "workers").iterdir())
    records = "".join(p.read_text(errors="replace") for d in g1 for p in d.rglob("*")
                      if p.is_file())
    assert "Previous attempt failed (attempt 1 of 4)" in records
    assert "the spec names no module for the parser" in records  # the reason, fed back
    g2 = proc.json["groups"]["G2"]
    assert g2["status"] == "complete" and g2["attempts"] == 3, g2
