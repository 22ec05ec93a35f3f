"""Questions during a run, in a real terminal: asked while the live table is paused, so the
question stays on screen until answered and the table comes back once, below the answer."""

from __future__ import annotations

import re

from runkit import make_project, spec_text, submit, writes
from vt import Terminal

GROUPS = [("G1", [], "src/a.py"), ("G2", [], "src/b.py"), ("G3", ["G1"], "src/c.py")]
QUESTION = "Continue with the remaining waves?"


def test_continue_question_is_visible_and_leaves_one_table(tmp_path):
    script = {"groups": {"G1": writes("src/a.py", "A = 1\n"),
                         "G2": [submit("failed", "no", error="cannot do it")],
                         "G3": writes("src/c.py", "C = 3\n")}}
    root = make_project(tmp_path / "p", "SPEC-001", spec_text("SPEC-001", GROUPS), script)
    term = Terminal("run", "SPEC-001", "--provider", "scripted", "--script",
                    ".specflow/script.yaml", "--max-retries", "0", "--no-review", cwd=root)
    term.wait_for("Proceed?")
    assert "Estimate: 3 worker(s)" in term.screen.text  # priced before the question
    term.type("y\r")
    term.wait_for(QUESTION)
    term.read(1.5)  # a dozen refreshes of a live table, had it kept running
    screen = term.screen
    assert QUESTION in screen.cursor_line, screen.text  # nothing drawn over or after it
    assert "Groups G2 failed" in screen.cursor_line
    term.type("y\r")
    assert term.finish() == 1  # G2 failed: the run is not complete
    final = term.screen.text
    assert final.count(QUESTION) == 1
    # one table: its progress line once, below the answered question, with the run's totals
    bars = [i for i, line in enumerate(final.splitlines()) if re.match(r"Wave \d+/\d+", line)]
    assert len(bars) == 1, final
    question_at = next(i for i, line in enumerate(final.splitlines()) if QUESTION in line)
    assert bars[0] > question_at
    bar_line = final.splitlines()[bars[0]]
    assert "Wave 2/2" in bar_line and "tokens" in bar_line and "$" in bar_line
    assert "merged" in final and "G3" in final
