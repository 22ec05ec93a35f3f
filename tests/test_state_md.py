"""STATE.md updates touch only Current Position, Execution Status and Warnings."""

from agentrun.report.state_md import (
    MAX_WARNINGS,
    TEMPLATE,
    StateUpdate,
    apply_update,
    update_state_file,
)

USER_STATE = """# SpecFlow State

## Current Position

- **Active Specification:** SPEC-001
- **Status:** review
- **TODO Items:** 15
- **Next Step:** /sf:review

## Queue

| # | ID | Title | Priority | Status | Depends On |
|---|-------|----------|--------|--------|------------|
| 1 | SPEC-002 | Text stats | high | audited | - |

## Decisions

| Date | Specification | Decision |
|------|---------------|----------|
| 2026-01-31 | SPEC-001 | COMPLETED: truncate() |

```markdown
## Warnings
| fake | table | inside a fence |
```
"""


def test_position_and_status_rows_update_in_place():
    update = StateUpdate(spec_id="SPEC-002", status="running", run_id="r1", mode="orchestrated",
                         progress="Wave 1/3 (0%)", when="2026-11-21 23:00")
    text = apply_update(USER_STATE, update)
    assert "- **Active Specification:** SPEC-002\n" in text
    assert "- **Status:** running\n" in text
    assert "- **TODO Items:** 15\n" in text  # untouched line kept
    assert "| SPEC-002 | r1 | orchestrated | Wave 1/3 (0%) | 2026-11-21 23:00 |" in text
    again = apply_update(text, StateUpdate(spec_id="SPEC-002", run_id="r1", mode="orchestrated",
                                           progress="Complete", when="2026-11-21 23:05"))
    assert again.count("| SPEC-002 | r1 |") == 1 and "| Complete |" in again
    # every other section is byte-for-byte the same
    for block in ("## Queue", "## Decisions", "```markdown\n## Warnings\n"):
        start = USER_STATE.index(block)
        chunk = USER_STATE[start:start + 120]
        assert chunk in again


def test_warnings_append_rows_and_fenced_heading_is_ignored():
    text = apply_update(USER_STATE, StateUpdate(spec_id="SPEC-002", warnings=["not audited"],
                                                when="2026-11-21"))
    assert "| fake | table | inside a fence |" in text
    tail = text[text.rindex("## Warnings"):]
    assert tail.startswith("## Warnings\n\n| Date | Specification | Warning |")
    assert "| 2026-11-21 | SPEC-002 | not audited |" in tail
    text2 = apply_update(text, StateUpdate(spec_id="SPEC-002", warnings=["second"], when="d"))
    warnings = text2[text2.rindex("## Warnings"):]
    assert warnings.count("| SPEC-002 |") == 2


def test_created_from_template_when_absent(tmp_path):
    path = tmp_path / ".specflow" / "STATE.md"
    update_state_file(path, StateUpdate(spec_id="SPEC-9", status="running", progress="Wave 1/1",
                                        run_id="r", mode="single", when="now"))
    text = path.read_text()
    assert text.startswith("# SpecFlow State")
    assert "**Active Specification:** SPEC-9" in text and "| SPEC-9 | r | single |" in text


def test_crlf_file_keeps_crlf():
    crlf = TEMPLATE.replace("\n", "\r\n")
    text = apply_update(crlf, StateUpdate(spec_id="S-1", progress="Complete", when="w"))
    assert "\n" not in text.replace("\r\n", "")


def test_missing_sections_are_added_without_touching_content():
    original = "# My notes\n\nSomething the user wrote.\n"
    text = apply_update(original, StateUpdate(spec_id="S-1", status="running",
                                              progress="Wave 1/2 (0%)", warnings=["w"],
                                              when="t"))
    assert "Something the user wrote.\n" in text
    assert "## Current Position" in text and "## Execution Status" in text
    assert "## Warnings" in text


def test_rows_follow_the_users_own_table_header():
    text = ("## Execution Status\n\n| Spec ID | Mode | Progress | Last Updated |\n"
            "|---|---|---|---|\n\n## Warnings\n\n| Date | Specification | Reason |\n"
            "|------|---------------|--------|\n")
    new = apply_update(text, StateUpdate(spec_id="SPEC-2", run_id="r9", mode="single",
                                         progress="Complete", warnings=["late"], when="T"))
    assert "| SPEC-2 | single | Complete | T |" in new
    assert "| T | SPEC-2 | late |" in new


def test_the_queue_row_of_the_spec_follows_current_position():
    from pathlib import Path

    example = (Path(__file__).parents[1] / ".specflow-example/.specflow/STATE.md").read_text()
    new = apply_update(example, StateUpdate("SPEC-002", status="review", when="2026-11-21"))
    assert "| 1 | SPEC-002 | Readability report | high | review | large | — |" in new
    assert ("| 2 | SPEC-001 | Add truncate() for previews and table cells | medium | audited "
            "| small | — |") in new
    pairs = zip(example.splitlines(), new.splitlines(), strict=True)
    assert [b for a, b in pairs if a != b] == ["- **Status:** review",
                                       "| 1 | SPEC-002 | Readability report | high | review "
                                       "| large | — |"]
    untouched = apply_update(example, StateUpdate("SPEC-009", status="review"))
    assert "| 1 | SPEC-002 | Readability report | high | audited |" in untouched
    assert "SPEC-009 |" not in untouched.split("## Queue")[1].split("## Decisions")[0]


def test_warnings_keep_one_row_per_distinct_warning_and_only_the_most_recent():
    text = apply_update(USER_STATE, StateUpdate(spec_id="SPEC-002", warnings=["again"],
                                                when="day 1"))
    for n in range(2, 14):
        text = apply_update(text, StateUpdate(spec_id="SPEC-002",
                                              warnings=["again", f"new {n}"], when=f"day {n}"))
    rows = [line for line in text[text.rindex("## Warnings"):].splitlines()[4:]
            if line.startswith("|")]
    assert len(rows) == MAX_WARNINGS
    assert rows[-2:] == ["| day 13 | SPEC-002 | again |", "| day 13 | SPEC-002 | new 13 |"]
    assert sum("| again |" in row for row in rows) == 1
    assert "new 5 |" in rows[0]  # "again" and new 5..13: older ones dropped
