"""Lossless edits: every byte outside the edited part stays as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrun.core.errors import SpecError
from agentrun.spec import parse_spec
from agentrun.spec.writeback import (
    append_to_section,
    next_audit_version,
    set_frontmatter_value,
    upsert_section,
)

FIXTURES = Path(__file__).parent / "fixtures" / "specs"

BODY = """## Context

Agent templates quote headings:

```markdown
## Execution Summary
## Audit History
### Audit v9
status: fake
```

## Task

Do it.
"""

STYLES = {
    "leading": "---\nid: SPEC-1\nstatus: draft\npriority: high\n---\n\n# Title\n\n" + BODY,
    "after_heading": "# Title\n\n> blurb\n\n---\nid: SPEC-1\nstatus: draft\npriority: high\n"
                     "---\n\n" + BODY,
    "fenced": "# Title\n\n```yaml\nid: SPEC-1\nstatus: draft\npriority: high\n```\n\n" + BODY,
}


def changed_lines(before: str, after: str) -> list[tuple[str, str]]:
    """Pairs of differing lines; both texts must have the same number of lines."""
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    assert len(a) == len(b)
    return [(x, y) for x, y in zip(a, b, strict=True) if x != y]


# -- frontmatter ----------------------------------------------------------------------------

@pytest.mark.parametrize("style", sorted(STYLES))
def test_replace_value_changes_only_that_line(style):
    text = STYLES[style]
    out = set_frontmatter_value(text, "status", "done")
    assert changed_lines(text, out) == [("status: draft\n", "status: done\n")]
    spec = parse_spec(out)
    assert spec.frontmatter_style == style and spec.status == "done"


@pytest.mark.parametrize("style", sorted(STYLES))
def test_insert_missing_key_at_end_of_block(style):
    text = STYLES[style]
    out = set_frontmatter_value(text, "complexity", "large")
    a, b = text.splitlines(keepends=True), out.splitlines(keepends=True)
    i = b.index("complexity: large\n")
    assert b[i - 1] == "priority: high\n"
    assert b[:i] + b[i + 1:] == a
    assert parse_spec(out).frontmatter == {"id": "SPEC-1", "status": "draft",
                                           "priority": "high", "complexity": "large"}


def test_no_frontmatter_gets_a_leading_block():
    text = "# Title\n\n" + BODY
    out = set_frontmatter_value(text, "status", "running")
    assert out == "---\nstatus: running\n---\n\n" + text
    spec = parse_spec(out)
    assert spec.frontmatter_style == "leading" and spec.status == "running"


def test_crlf_file_stays_crlf():
    text = STYLES["leading"].replace("\n", "\r\n")
    out = set_frontmatter_value(text, "status", "done")
    assert out == text.replace("status: draft\r\n", "status: done\r\n")
    out = set_frontmatter_value(text, "todo", "TODO-1")
    assert "priority: high\r\ntodo: TODO-1\r\n---\r\n" in out
    assert "\n" not in out.replace("\r\n", "")


@pytest.mark.parametrize("old, new, line", [
    ('status: "draft"', "done", 'status: "done"'),
    ("status: 'draft'", "it's done", "status: 'it''s done'"),
    ("status:   draft  # lifecycle", "done", "status:   done  # lifecycle"),
    ("status: draft", "yes", 'status: "yes"'),
    ("status: draft", "2026-01-01", 'status: "2026-01-01"'),
    ("status: draft", "a: b", 'status: "a: b"'),
    ("status: draft", "", 'status: ""'),
])
def test_quoting_kept_simple_and_values_round_trip(old, new, line):
    text = f"---\nid: X\n{old}\n---\n\n" + BODY
    out = set_frontmatter_value(text, "status", new)
    assert out == text.replace(old, line)
    assert parse_spec(out).frontmatter["status"] == new


def test_block_value_is_replaced_whole():
    text = "---\nid: X\ndepends_on:\n  - SPEC-1\n  - SPEC-2\nstatus: draft\n---\n\n" + BODY
    out = set_frontmatter_value(text, "depends_on", "SPEC-9")
    assert out == "---\nid: X\ndepends_on: SPEC-9\nstatus: draft\n---\n\n" + BODY


def test_nested_key_with_same_name_is_not_touched():
    text = "---\nid: X\nmeta:\n  status: inner\n---\n\n" + BODY
    out = set_frontmatter_value(text, "status", "done")
    assert out == "---\nid: X\nmeta:\n  status: inner\nstatus: done\n---\n\n" + BODY


def test_unclosed_frontmatter_is_refused():
    with pytest.raises(SpecError, match="never closed"):
        set_frontmatter_value("---\nid: X\nstatus: draft\n\n## Context\n", "status", "done")


def test_bad_key_is_a_programming_error():
    with pytest.raises(ValueError):
        set_frontmatter_value(STYLES["leading"], "bad key:", "x")


# -- upsert_section -------------------------------------------------------------------------

def test_append_new_section_with_one_blank_line():
    text = STYLES["leading"]
    out = upsert_section(text, "Execution Summary", "**Executed:** 2026-02-01\n")
    assert out == text + "\n## Execution Summary\n\n**Executed:** 2026-02-01\n"
    assert parse_spec(out).section("Execution Summary").body == "**Executed:** 2026-02-01"


def test_append_trims_extra_trailing_blank_lines_only():
    text = "# T\n\n## Task\n\nx\n\n\n\n"
    assert upsert_section(text, "Notes", "n") == "# T\n\n## Task\n\nx\n\n## Notes\n\nn\n"


def test_append_keeps_a_missing_trailing_newline_missing():
    text = "# T\n\n## Task\n\nx"
    assert upsert_section(text, "Notes", "n\n") == "# T\n\n## Task\n\nx\n\n## Notes\n\nn"


def test_fenced_heading_of_the_same_name_is_not_the_section():
    text = STYLES["fenced"]
    out = upsert_section(text, "Execution Summary", "real")
    assert out.startswith(text)
    assert out.count("## Execution Summary") == 2
    assert parse_spec(out).section("Execution Summary").body == "real"


@pytest.mark.parametrize("style", sorted(STYLES))
def test_replace_section_body_keeps_everything_else(style):
    text = STYLES[style] + "\n## Execution Summary\n\nold summary\n\n```\n## Fake\n```\n\n" \
        "---\n\n## Notes\n\nkeep me\n"
    out = upsert_section(text, "Execution Summary", "new\n\nsummary")
    head, tail = text.split("old summary", 1)
    tail = tail.split("```\n\n", 1)[1]
    assert out == head + "new\n\nsummary\n\n" + tail
    assert out.endswith("\n---\n\n## Notes\n\nkeep me\n")
    assert parse_spec(out).section("Notes").body == "keep me"


def test_replace_section_directly_followed_by_a_heading():
    text = "# T\n\n## Execution Summary\nold\n## Notes\nkeep\n"
    out = upsert_section(text, "Execution Summary", "new")
    assert out == "# T\n\n## Execution Summary\n\nnew\n\n## Notes\nkeep\n"


def test_replace_last_section_without_trailing_newline():
    text = "# T\n\n## Execution Summary\n\nold"
    assert upsert_section(text, "execution summary", "new\n") == \
        "# T\n\n## Execution Summary\n\nnew"


def test_replace_section_whose_list_runs_into_a_rule():
    # `new` followed directly by `---` would turn the summary into a setext heading
    text = "# T\n\n## Execution Summary\n\n- old\n---\n## Notes\n"
    out = upsert_section(text, "Execution Summary", "new")
    assert out == "# T\n\n## Execution Summary\n\nnew\n\n---\n## Notes\n"
    assert parse_spec(out).section("Execution Summary").body == "new"


def test_upsert_crlf():
    text = STYLES["after_heading"].replace("\n", "\r\n")
    out = upsert_section(text, "Execution Summary", "line 1\nline 2\n")
    assert out == text + "\r\n## Execution Summary\r\n\r\nline 1\r\nline 2\r\n"


def test_upsert_twice_is_stable():
    text = STYLES["leading"]
    once = upsert_section(text, "Execution Summary", "run 1")
    twice = upsert_section(once, "Execution Summary", "run 2")
    assert twice == once.replace("run 1", "run 2")


# -- append_to_section and audit versions ---------------------------------------------------

def test_audit_entry_goes_before_the_separator_and_next_section():
    text = (FIXTURES / "SPEC-041.md").read_text() + "\n## Execution Summary\n\nDone.\n"
    assert next_audit_version(text) == 3
    entry = "### Audit v3 (2026-02-05)\n**Status:** APPROVED\n"
    out = append_to_section(text, "Audit History", entry)
    marker = "G4 may be slightly large.\n"
    head, tail = text.split(marker)
    assert out == head + marker + "\n" + entry + tail
    assert next_audit_version(out) == 4
    spec = parse_spec(out)
    assert [s.title for s in spec.sections if s.level == 3][-1] == "Audit v3 (2026-02-05)"
    assert spec.section("Execution Summary").body == "Done."


def test_audit_entry_in_fixture_ending_with_a_rule():
    text = (FIXTURES / "SPEC-041.md").read_text()
    assert text.endswith("slightly large.\n\n---\n")
    out = append_to_section(text, "Audit History", "### Audit v3\nok")
    assert out == text[:-len("\n---\n")] + "\n### Audit v3\nok\n\n---\n"


def test_append_to_last_section_at_end_of_file():
    text = (FIXTURES / "SPEC-063.md").read_text()
    out = append_to_section(text, "Audit History", "### Response v1\nApplied.\n")
    assert out == text + "\n### Response v1\nApplied.\n"
    assert next_audit_version(out) == 2


def test_append_creates_a_missing_section():
    text = "# T\n\n## Task\n\nx\n"
    out = append_to_section(text, "Audit History", "### Audit v1\n**Status:** APPROVED")
    assert out == text + "\n## Audit History\n\n### Audit v1\n**Status:** APPROVED\n"
    assert next_audit_version(out) == 2


def test_append_ignores_fenced_headings_in_the_section():
    text = ("# T\n\n## Audit History\n\n### Audit v1\nok\n\n```\n## Not a heading\n"
            "### Audit v7\n```\n\n## Task\n\nx\n")
    assert next_audit_version(text) == 2
    out = append_to_section(text, "Audit History", "### Audit v2")
    assert out == text.replace("```\n\n## Task", "```\n\n### Audit v2\n\n## Task")


def test_append_crlf_without_trailing_newline():
    text = "# T\r\n\r\n## Audit History\r\n\r\n### Audit v1\r\nok"
    out = append_to_section(text, "Audit History", "### Audit v2\nfine\n")
    assert out == ("# T\r\n\r\n## Audit History\r\n\r\n### Audit v1\r\nok\r\n\r\n"
                   "### Audit v2\r\nfine")


@pytest.mark.parametrize("text, expected", [
    ("# T\n\n## Task\n\nx\n", 1),
    ("# T\n\n## Audit History\n\nnothing yet\n", 1),
    ("# T\n\n## Audit History\n\n### Audit v2 (x)\n### Response v5\n### Audit v10\n", 11),
    ("# T\n\n## Context\n\n### Audit v4\n\n## Audit History\n\n### Audit v1\n", 2),
    ("---\nid: X\n---\n## Audit History\n#### audit v3 — late\n", 4),
])
def test_next_audit_version(text, expected):
    assert next_audit_version(text) == expected


def test_edits_compose_and_parse_back():
    text = (FIXTURES / "SPEC-077.md").read_text()
    out = set_frontmatter_value(text, "status", "done")
    out = append_to_section(out, "Audit History", f"### Audit v{next_audit_version(out)}\nok")
    out = upsert_section(out, "Execution Summary", "**Executed:** today")
    before, after = parse_spec(text), parse_spec(out)
    assert after.status == "done"
    assert after.groups == before.groups and after.declared_waves == before.declared_waves
    assert out.startswith(text.replace("status: audited", "status: done"))
