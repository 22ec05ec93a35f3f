"""A spec whose work is merged already (status review or done) is not run again by accident,
and STATE.md's Warnings table keeps one row per distinct warning however often runs repeat."""

from __future__ import annotations

import re

from clirun import agentrun
from gitutil import run_git
from runkit import make_project, scripted, spec_text, writes

ONE = [("G1", [], "src/a.py")]


def _warning_rows(root) -> list[str]:
    state = (root / ".specflow/STATE.md").read_text()
    table = state[state.index("## Warnings"):]
    return [line for line in table.splitlines()[4:] if line.startswith("|")]


def test_finished_spec_is_refused_unless_rerun_and_warnings_do_not_pile_up(tmp_path):
    root = make_project(tmp_path / "p", "SPEC-40", spec_text("SPEC-40", ONE, status="draft"),
                        {"groups": {"G1": writes("src/a.py", "A = 1\n")}})
    first = agentrun("run", "SPEC-40", *scripted(), cwd=root)
    assert first.returncode == 0, first.stderr
    assert "status: review" in (root / ".specflow/specs/SPEC-40.md").read_text()
    head = run_git(root, "rev-parse", "HEAD")

    again = agentrun("run", "SPEC-40", *scripted(), cwd=root)
    assert again.returncode == 2
    error = again.json["error"]
    assert error["message"].startswith("SPEC-40 is already review")
    assert "--rerun" in error["hint"]
    assert run_git(root, "rev-parse", "HEAD") == head  # nothing ran, nothing was committed
    assert agentrun("run", "SPEC-40", *scripted("--dry-run"), cwd=root).returncode == 0

    for n in range(2):  # the same warning twice: one row
        (root / "src/a.py").write_text(f"A = {n + 2}\n")  # a later manual fix, committed
        run_git(root, "commit", "-qam", f"fix {n}")
        forced = agentrun("run", "SPEC-40", *scripted("--rerun"), cwd=root)
        assert forced.returncode in (0, 1), forced.stderr
        assert forced.json["run_id"]
    rows = _warning_rows(root)
    texts = [re.sub(r"^\|\s*[^|]*\|", "|", row) for row in rows]  # without the date
    assert len(texts) == len(set(texts)), rows
    assert sum("status is review, not audited" in row for row in rows) == 1, rows
