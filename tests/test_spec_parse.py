"""Spec parsing: files, frontmatter in its three places, sections, criteria, files lists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentrun.core.errors import EXIT_BAD_INPUT, SpecError
from agentrun.spec import Spec, load_spec, parse_spec

FIXTURES = Path(__file__).parent / "fixtures" / "specs"


# -- reading files --------------------------------------------------------------------------

def test_missing_file_names_the_path_and_hints_at_specs_dir(tmp_path):
    missing = tmp_path / "SPEC-404.md"
    with pytest.raises(SpecError) as exc:
        load_spec(missing)
    assert exc.value.message == f"spec not found: {missing}"
    assert ".specflow/specs/" in exc.value.hint
    assert exc.value.exit_code == EXIT_BAD_INPUT
    assert exc.value.path == str(missing)


def test_directory_is_refused(tmp_path):
    with pytest.raises(SpecError, match="is a directory") as exc:
        load_spec(tmp_path)
    assert exc.value.hint


def test_binary_file_names_the_nul_offset(tmp_path):
    path = tmp_path / "SPEC-1.md"
    path.write_bytes(b"# Title\n\x89PNG\x00\x01")
    with pytest.raises(SpecError, match=r"binary.*offset 12"):
        load_spec(path)


def test_non_utf8_names_the_byte_and_offset(tmp_path):
    path = tmp_path / "SPEC-1.md"
    path.write_bytes("# Café\n".encode() + b"caf\xe9 latin-1\n")
    with pytest.raises(SpecError, match=r"not valid UTF-8 \(byte 0xe9 at offset 11\)") as exc:
        load_spec(path)
    assert "UTF-8" in exc.value.hint


@pytest.mark.parametrize("content", [b"", b"  \n\n\t\n", "\ufeff\n".encode()])
def test_empty_file_is_refused(tmp_path, content):
    path = tmp_path / "SPEC-1.md"
    path.write_bytes(content)
    with pytest.raises(SpecError, match="spec is empty"):
        load_spec(path)


def test_load_keeps_text_byte_for_byte(tmp_path):
    raw = "---\r\nid: SPEC-5\r\n---\r\n\r\n# T\r\n\r\n## Context\r\n\r\nx\r\n"
    path = tmp_path / "SPEC-5.md"
    path.write_bytes(raw.encode())
    spec = load_spec(str(path))
    assert spec.text == raw
    assert spec.path == path
    assert spec.frontmatter == {"id": "SPEC-5"}
    assert spec.section("Context").body == "x"


# -- frontmatter ----------------------------------------------------------------------------

BODY = "## Context\n\nWhy.\n\n## Task\n\nWhat.\n"


def test_leading_frontmatter():
    spec = parse_spec("---\nid: SPEC-1\nstatus: draft\n---\n\n# Title\n\n" + BODY)
    assert spec.frontmatter_style == "leading"
    assert spec.frontmatter == {"id": "SPEC-1", "status": "draft"}
    assert spec.title == "Title"
    # the last key and the closing `---` must not read as a setext heading
    assert [s.title for s in spec.sections] == ["Context", "Task"]


@pytest.mark.parametrize("prefix", [
    "# SPEC-2: Title\n\n",
    "# SPEC-2: Title\n",
    "# SPEC-2: Title\n\n\n> Part 1 of 2\n\n",
    "> Part 1 of 2 from SPEC-1\n> (the parent)\n\n",
])
def test_frontmatter_after_title_or_blockquote(prefix):
    text = prefix + "---\nid: SPEC-2\npriority: P1\n---\n\n" + BODY
    spec = parse_spec(text)
    assert spec.frontmatter_style == "after_heading"
    assert spec.frontmatter == {"id": "SPEC-2", "priority": "P1"}
    assert [s.title for s in spec.sections] == ["Context", "Task"]


def test_fenced_yaml_frontmatter_near_the_top():
    text = ("# Title\n\nSome intro.\n\n```yaml\nid: SPEC-3\nstatus: running\n```\n\n" + BODY)
    spec = parse_spec(text)
    assert spec.frontmatter_style == "fenced"
    assert spec.frontmatter == {"id": "SPEC-3", "status": "running"}


def test_fenced_yaml_after_first_section_is_an_example_not_frontmatter():
    text = "# Title\n\n## Context\n\n```yaml\nid: OTHER\nstatus: done\n```\n"
    spec = parse_spec(text, "SPEC-8.md")
    assert spec.frontmatter_style == "none"
    assert spec.id == "SPEC-8"


def test_fenced_yaml_without_spec_keys_is_an_example():
    text = "# Config loader\n\n```yaml\nport: 8080\nhost: [\n```\n\n## Context\n\nx\n"
    spec = parse_spec(text, "SPEC-9.md")
    assert spec.frontmatter_style == "none"


def test_thematic_break_after_title_is_not_frontmatter():
    text = "# Title\n\n> summary\n\n---\n\n## Context\n\nx\n\n---\n\n## Task\n\ny\n"
    spec = parse_spec(text, "SPEC-4.md")
    assert spec.frontmatter_style == "none"
    assert spec.frontmatter == {}
    assert [s.title for s in spec.sections] == ["Context", "Task"]


def test_no_frontmatter_id_from_stem_title_from_heading():
    spec = parse_spec("# My spec\n\n" + BODY, Path(".specflow/specs/SPEC-123.md"))
    assert spec.frontmatter_style == "none"
    assert spec.id == "SPEC-123"
    assert spec.title == "My spec"


def test_title_falls_back_to_frontmatter_then_id():
    assert parse_spec("---\nid: S-1\ntitle: From YAML\n---\n" + BODY).title == "From YAML"
    assert parse_spec("---\nid: S-1\n---\n" + BODY).title == "S-1"


def test_values_kept_as_yaml_gives_them_and_serialisable():
    text = ("---\nid: SPEC-7\ntype: feature\nstatus: audited\npriority: P0\ncomplexity: Large\n"
            "created: 2026-01-23\nupdated: 2026-01-24T10:00:00\nparent: EPIC-2\n"
            "depends_on: [SPEC-3, TODO-44, JIRA-9]\ntodo: TODO-44\nestimate: 3\n"
            "reviewers:\n  - ana\n  - bo\nwhen: {2026-01-01: start}\n---\n" + BODY)
    spec = parse_spec(text)
    fm = spec.frontmatter
    assert fm["created"] == "2026-01-23"
    assert fm["updated"] == "2026-01-24T10:00:00"
    assert fm["depends_on"] == ["SPEC-3", "TODO-44", "JIRA-9"]
    assert fm["estimate"] == 3 and fm["reviewers"] == ["ana", "bo"]
    assert fm["when"] == {"2026-01-01": "start"}
    assert spec.status == "audited" and spec.complexity == "large"
    json.dumps(spec.to_dict())


def test_broken_yaml_names_the_line():
    text = "---\nid: SPEC-1\nstatus: [draft\npriority: high\n---\n" + BODY
    with pytest.raises(SpecError) as exc:
        parse_spec(text, "SPEC-1.md")
    assert exc.value.line is not None and 2 <= exc.value.line <= 5
    assert f"SPEC-1.md:{exc.value.line}: invalid YAML in frontmatter" in exc.value.message
    assert exc.value.hint


def test_broken_yaml_line_counts_from_the_file_for_after_heading_style():
    text = "# T\n\n---\nid: X\nbad: : :\n---\n" + BODY
    with pytest.raises(SpecError) as exc:
        parse_spec(text)
    assert exc.value.line == 5


def test_impossible_date_is_a_spec_error():
    with pytest.raises(SpecError, match="invalid YAML"):
        parse_spec("---\ncreated: 2026-13-45\n---\n" + BODY)


@pytest.mark.parametrize("yaml_text", ["- a\n- b", "just a string", "42"])
def test_frontmatter_that_is_not_a_mapping(yaml_text):
    with pytest.raises(SpecError, match="not a mapping"):
        parse_spec(f"---\n{yaml_text}\n---\n" + BODY)


def test_unclosed_frontmatter():
    with pytest.raises(SpecError, match="never closed") as exc:
        parse_spec("---\nid: SPEC-1\nstatus: draft\n\n# Title\n\n" + BODY)
    assert exc.value.line == 1


def test_recursive_alias_is_a_spec_error():
    with pytest.raises(SpecError, match="recursive"):
        parse_spec("---\nloop: &a [1, *a]\n---\n" + BODY)


def test_alias_chain_does_not_explode():
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    spec = parse_spec("---\n" + "\n".join(lines) + "\n---\n" + BODY)
    assert "a8" in spec.frontmatter


# -- sections -------------------------------------------------------------------------------

FENCED = """# Title

## Context

Prose that quotes a template:

```markdown
## Step 1: Load
### Fake subsection
- [ ] not a criterion
```

~~~
## Also fake
~~~

- a list item
  ## heading inside a list

> ## heading inside a quote

### Details

More.

## Acceptance Criteria

- [ ] real one
"""


def test_sections_ignore_fences_lists_and_quotes():
    spec = parse_spec(FENCED)
    assert [(s.level, s.title) for s in spec.sections] == [
        (2, "Context"), (3, "Details"), (2, "Acceptance Criteria")]
    context, details, criteria = spec.sections
    assert (context.start, context.end) == (2, 25)
    assert (details.start, details.end) == (21, 25)
    assert context.body.startswith("Prose") and context.body.endswith("More.")
    assert "## Step 1: Load" in context.body
    assert (criteria.start, criteria.end) == (25, 28)
    assert [c.text for c in spec.acceptance_criteria] == ["real one"]


def test_section_lookup_helpers():
    spec = parse_spec("# T\n\n## Acceptance Criteria (v2)\n\n- [ ] a\n")
    assert spec.section("acceptance criteria").title == "Acceptance Criteria (v2)"
    assert [c.text for c in spec.acceptance_criteria] == ["a"]


# -- acceptance criteria --------------------------------------------------------------------

def test_checkbox_criteria_with_lines_and_checked_state():
    text = ("# T\n\n## Acceptance Criteria\n\nIntro.\n\n- [ ] first\n- [x] second done\n"
            "- [X] third\n  continues here\n  - [ ] nested detail\n- a note, not a criterion\n"
            "\n```\n- [ ] fenced\n```\n\n## Constraints\n\n- [ ] not here\n")
    spec = parse_spec(text)
    got = [(c.text, c.checked, c.line) for c in spec.acceptance_criteria]
    assert got == [("first", False, 7), ("second done", True, 8),
                   ("third continues here", True, 9)]


def test_numbered_criteria_taken_as_written():
    text = ("# T\n\n## Acceptance Criteria\n\n1. **Orchestrator created**: agent file exists\n"
            "2. **Mode detection works**: `/sf:run` picks the mode\n")
    crit = parse_spec(text).acceptance_criteria
    assert [c.text for c in crit] == ["**Orchestrator created**: agent file exists",
                                      "**Mode detection works**: `/sf:run` picks the mode"]
    assert [c.checked for c in crit] == [False, False]
    assert [c.line for c in crit] == [5, 6]


def test_plain_bullet_criteria():
    text = "# T\n\n## Acceptance Criteria\n\n- one\n* two\n"
    assert [c.text for c in parse_spec(text).acceptance_criteria] == ["one", "two"]


# -- files and requirements -----------------------------------------------------------------

def test_files_from_headings_labels_and_tables():
    text = """# T

## Requirements

### Parser

**Files to Create:**
- `src/spec/parse.py` — the parser
- `src/spec/model.py`

**Files to Modify:** `src/cli.py`, `README.md`

### Writer

#### Files to Modify

| Path | Why |
|------|-----|
| `src/spec/write.py` | lossless |
| none | |

### Notes

```markdown
## Files to Create
- `never/this.py`
```

## Files to Create

1. docs/spec-format.md (new page)
"""
    spec = parse_spec(text)
    assert spec.files_to_create == ["src/spec/parse.py", "src/spec/model.py",
                                    "docs/spec-format.md"]
    assert spec.files_to_modify == ["src/cli.py", "README.md", "src/spec/write.py"]
    assert spec.requirement_sections == 3


def test_files_to_create_modify_table_with_action_column():
    spec = parse_spec((FIXTURES / "SPEC-077.md").read_text())
    assert spec.files_to_create == ["agentrun/tools/policy.py"]
    assert spec.files_to_modify == ["agentrun/tools/files.py", "agentrun/tools/command.py"]


def test_spec_without_structure_still_parses():
    spec = parse_spec("Just a paragraph of notes.\n", "notes.md")
    assert spec.id == "notes" and spec.title == "notes"
    assert spec.sections == [] and spec.groups == [] and spec.acceptance_criteria == []


# -- realistic fixtures ---------------------------------------------------------------------

def test_fixture_with_audit_history():
    spec = load_spec(FIXTURES / "SPEC-041.md")
    assert spec.id == "SPEC-041"
    assert spec.title == "SPEC-041: Resumable Runs — Checkpoint & Resume"
    assert spec.frontmatter_style == "after_heading"
    assert spec.frontmatter["depends_on"] == ["SPEC-039", "TODO-118"]
    assert spec.frontmatter["owner"] == "platform-team"
    assert spec.frontmatter["created"] == "2026-02-03"
    assert [s.title for s in spec.sections if s.level == 2] == [
        "Context", "Task", "Requirements", "Files to Create", "Files to Modify",
        "Acceptance Criteria", "Constraints", "Assumptions", "Implementation Tasks",
        "Audit History"]
    assert spec.requirement_sections == 3
    assert spec.files_to_create == ["agentrun/checkpoint.py", "tests/test_checkpoint.py"]
    assert spec.files_to_modify == ["agentrun/orchestrator.py", "agentrun/cli/run_cmd.py"]
    assert len(spec.acceptance_criteria) == 4
    assert spec.acceptance_criteria[0].text.startswith("**Checkpoint written**: after each")
    assert spec.acceptance_criteria[0].text.endswith("names the completed groups")
    # the fenced example plan (G9, G10) in Context is not the spec's plan
    assert [g.id for g in spec.groups] == ["G1", "G2", "G3", "G4", "G5"]


@pytest.mark.parametrize("name", ["SPEC-041.md", "SPEC-052.md", "SPEC-063.md", "SPEC-077.md"])
def test_fixtures_serialise(name):
    spec = load_spec(FIXTURES / name)
    assert isinstance(spec, Spec)
    data = json.loads(json.dumps(spec.to_dict()))
    assert data["id"] == name.removesuffix(".md")
    assert "text" not in data


def test_fixture_styles():
    styles = {p.name: load_spec(p).frontmatter_style for p in sorted(FIXTURES.glob("*.md"))}
    assert styles == {"SPEC-041.md": "after_heading", "SPEC-052.md": "leading",
                      "SPEC-063.md": "fenced", "SPEC-077.md": "leading"}


def test_priority_and_non_spec_dependencies_are_kept():
    spec = load_spec(FIXTURES / "SPEC-052.md")
    assert spec.frontmatter["priority"] == "P1"
    assert spec.frontmatter["depends_on"] == ["SPEC-049", "JIRA-4412"]
    assert spec.frontmatter["todo"] == "TODO-31"
    checked = [(c.text, c.checked) for c in spec.acceptance_criteria]
    assert checked == [("`agentrun --help` imports neither `anthropic` nor `openai`", False),
                       ("The scripted provider still drives the agent loop", True),
                       ("Both adapters pass the fake-server suite", False),
                       ("`AGENTRUN_PROVIDER=openai` selects the OpenAI adapter", False)]


def test_criteria_status_of_an_execution_summary_are_not_the_criteria():
    text = ("# T\n\n## Execution Summary\n\n### Acceptance Criteria Status\n\n- [x] done\n\n"
            "## Notes\n\n### Acceptance Criteria\n\n- [ ] the real one\n")
    assert [c.text for c in parse_spec(text).acceptance_criteria] == ["the real one"]


def test_item_listing_several_files_at_once():
    text = """# T

## Files to Create

- `pkg/a.py` — builds `pkg/b.py` (named in the description, not a file to create)
- `tests/test_a.py`, `tests/test_b.py`,
  `tests/test_c.py` and `tests/test_d.py`

## Files to Modify

| File | Change |
|------|--------|
| `pkg/__init__.py`, `pkg/cli.py` | export the API |
"""
    spec = parse_spec(text)
    assert spec.files_to_create == ["pkg/a.py", "tests/test_a.py", "tests/test_b.py",
                                    "tests/test_c.py", "tests/test_d.py"]
    assert spec.files_to_modify == ["pkg/__init__.py", "pkg/cli.py"]


def test_rule_at_the_top_then_fenced_frontmatter():
    text = "---\n\n# Title\n\n```yaml\nid: SPEC-6\nstatus: draft\n```\n\n## Context\n\nx\n"
    spec = parse_spec(text)
    assert spec.frontmatter_style == "fenced" and spec.id == "SPEC-6"
