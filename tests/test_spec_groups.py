"""Task groups in the three shapes real specs use, and declared waves (recorded, not computed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrun.spec import load_spec, parse_spec
from agentrun.spec.refs import dependency_refs, looks_like_path, parse_group_cell

FIXTURES = Path(__file__).parent / "fixtures" / "specs"


def spec_with(impl: str, before: str = "", after: str = ""):
    text = (f"---\nid: SPEC-1\n---\n\n# T\n\n## Context\n\nWhy.\n\n{before}"
            f"## Implementation Tasks\n\n{impl}\n{after}")
    return parse_spec(text)


def deps(spec) -> dict[str, list[str]]:
    return {g.id: g.dependencies for g in spec.groups}


# -- notations ------------------------------------------------------------------------------

@pytest.mark.parametrize("cell", ["—", "–", "--", "-", "None", "none", "N/A", "", "**None**",
                                  "none (first wave)"])
def test_no_dependency_notations(cell):
    assert dependency_refs(cell) == []


@pytest.mark.parametrize("cell, expected", [
    ("G2, G3", ["G2", "G3"]),
    ("G2 G3", ["G2", "G3"]),
    ("G2 and G3", ["G2", "G3"]),
    ("G2; G3", ["G2", "G3"]),
    ("G2<br>G3", ["G2", "G3"]),
    ("G1-G5", ["G1", "G2", "G3", "G4", "G5"]),
    ("G1–G5", ["G1", "G2", "G3", "G4", "G5"]),
    ("G1..G3", ["G1", "G2", "G3"]),
    ("G1-3", ["G1", "G2", "G3"]),
    ("G8-G10, G2", ["G8", "G9", "G10", "G2"]),
    ("G2-S1", ["G2"]),
    ("G2-S1, G3-S2", ["G2", "G3"]),
    ("Group 2", ["G2"]),
    ("g2, G02", ["G2"]),
    ("**G1** (types), `G4`", ["G1", "G4"]),
    ("G1-G99999", ["G1", "G99999"]),  # too wide to expand: taken as its two ends
])
def test_dependency_lists_and_ranges(cell, expected):
    assert dependency_refs(cell.replace("<br>", " ")) == expected


@pytest.mark.parametrize("cell, expected", [
    ("G2", ("G2", None, "")), ("**G02**", ("G2", None, "")), ("Group 2", ("G2", None, "")),
    ("g2", ("G2", None, "")), ("G2-S1", ("G2", "S1", "")), ("G2 (S2)", ("G2", "S2", "")),
    ("G2: Parser core", ("G2", None, "Parser core")), ("G2 — Title", ("G2", None, "Title")),
    ("G2: S3 bucket", ("G2", None, "S3 bucket")), ("G-2", ("G2", None, "")),
    ("G 2", ("G2", None, "")), ("G_2", ("G2", None, "")), ("Grp 2", ("G2", None, "")),
])
def test_group_cells(cell, expected):
    assert parse_group_cell(cell) == expected


@pytest.mark.parametrize("cell", ["Group", "Gx", "G1-G3", "G1, G2", "Wave 1", "—", "Task 2",
                                  "G - 2", "2"])
def test_cells_that_are_not_one_group(cell):
    assert parse_group_cell(cell) is None


@pytest.mark.parametrize("text, expected", [
    ("src/a.py", True), ("README.md", True), (".env", True), ("Makefile", True),
    ("~/.claude/agents/x.md", True), ("tests/", True), ("a.b.c.py", True),
    ("/sf:run", False), ("os.path.join", False), ("Task()", False), ("0.5", False),
    ("status: \"failed\"", False), ("--resume", False), ("http://x.io/a", False),
    ("*_API_KEY", False), ("agentrun", False), ("self.name", False), ("", False),
])
def test_paths_in_backticks(text, expected):
    assert looks_like_path(text) is expected


# -- shape 1: a table -----------------------------------------------------------------------

def test_table_with_mixed_notations_in_one_spec():
    spec = spec_with("""### Task Groups

| Group | Tasks | Dependencies |
|-------|-------|--------------|
| G1 | Models | — |
| G2 | Parser | None |
| g3 | Writer | G1, G2 |
| G4 | CLI | G3 and G1 |
| **G5** | Docs | G1–G4 |
| Group 6 | Bench | G2; G5 |
| G07 | Release | G1..G3 |
| G8 | Smoke | N/A |
""")
    assert deps(spec) == {"G1": [], "G2": [], "G3": ["G1", "G2"], "G4": ["G3", "G1"],
                          "G5": ["G1", "G2", "G3", "G4"], "G6": ["G2", "G5"],
                          "G7": ["G1", "G2", "G3"], "G8": []}
    assert [g.line for g in spec.groups] == list(range(17, 25))
    assert spec.declared_waves == {}
    assert all(g.declared_wave is None for g in spec.groups)


def test_columns_in_any_order_and_case_with_extras():
    spec = spec_with("""| Owner | DEPENDS ON | Est. context | task group | Work | Notes |
|---|---|---|---|---|---|
| ana | G2 | ~20% | G1 | Build `src/a.py` | later |
| bo | — | 10% | G2 | Build `src/b.py` | |
""")
    assert [(g.id, g.dependencies, g.est_context, g.tasks) for g in spec.groups] == [
        ("G1", ["G2"], "~20%", ["Build `src/a.py`"]), ("G2", [], "10%", ["Build `src/b.py`"])]
    assert spec.group("G1").files == ["src/a.py"]


def test_tasks_cell_split_on_br_and_semicolons_text_as_written():
    spec = spec_with("""| Group | Tasks | Dependencies |
|---|---|---|
| G1 | **Schema**: `src/schema.py`<br>Add *loader*; wire into `src/cli.py`<br/>Tests | — |
| G2 | Parse `a;b` cells; keep [links](http://x.io) text | G1 |
""")
    g1, g2 = spec.groups
    assert g1.tasks == ["**Schema**: `src/schema.py`", "Add *loader*", "wire into `src/cli.py`",
                        "Tests"]
    assert g1.title == "**Schema**: `src/schema.py`"
    assert g1.files == ["src/schema.py", "src/cli.py"]
    assert g2.tasks == ["Parse `a;b` cells", "keep [links](http://x.io) text"]


def test_segments_merge_into_one_group():
    spec = load_spec(FIXTURES / "SPEC-077.md")
    assert [g.id for g in spec.groups] == ["G1", "G2", "G3", "G4", "G5"]
    g2, g3, g4 = spec.group("G2"), spec.group("G3"), spec.group("G4")
    assert g2.segments == ["S1", "S2"] and g3.segments == ["S1", "S2"]
    assert g2.tasks == ["Confine `read_file`, `write_file` in `agentrun/tools/files.py`",
                        "Confine `list_files`, `search_files`",
                        "tests in `tests/test_tools_files.py`"]
    # `G2-S1` in G2's second row means G2 itself: no self-dependency
    assert g2.dependencies == ["G1"] and g3.dependencies == []
    assert g2.files == ["agentrun/tools/files.py", "tests/test_tools_files.py"]
    assert g2.line == 63 and g3.line == 65
    # the row with an empty group cell continues G4
    assert g4.tasks == ["Policy file loader `agentrun/tools/policy.py`",
                        "Wire policy into the registry",
                        "Document the policy format in `README.md`"]
    assert g4.files == ["agentrun/tools/policy.py", "README.md"]
    assert g4.dependencies == ["G1", "G2", "G3"]
    assert spec.group("G5").dependencies == ["G1", "G2", "G3", "G4"]
    assert spec.group("G1").segments == []


def test_segment_dependency_from_another_group():
    spec = spec_with("""| Group | Segment | Tasks | Dependencies |
|---|---|---|---|
| G1 | 1 | a | — |
| G1 | 2 | b | G1-S1 |
| G2 | — | c | G1-S2 |
""")
    assert deps(spec) == {"G1": [], "G2": ["G1"]}
    assert spec.group("G1").segments == ["S1", "S2"]


def test_fenced_example_tables_are_never_groups():
    spec = spec_with("""Example of the format, not our plan:

```markdown
| Group | Tasks | Dependencies |
|---|---|---|
| G9 | fake | — |
### G10: fake heading (depends on G9)
```

| Group | Tasks | Dependencies |
|---|---|---|
| G1 | real | — |
""", before="""Other tools write:

```
| Group | Wave | Tasks | Dependencies |
|---|---|---|---|
| G7 | 1 | fake | — |
```

""")
    assert [g.id for g in spec.groups] == ["G1"]
    assert spec.declared_waves == {}


def test_tables_outside_implementation_tasks_are_not_groups():
    spec = parse_spec("""# T

## Context

| Group | Tasks | Dependencies |
|---|---|---|
| G1 | an old plan | — |
""")
    assert spec.groups == []


# -- shape 2: one heading per group ---------------------------------------------------------

def test_heading_per_group_fixture():
    spec = load_spec(FIXTURES / "SPEC-052.md")
    assert [(g.id, g.title) for g in spec.groups] == [
        ("G1", "Provider base and registry"), ("G2", "Anthropic adapter"),
        ("G3", "OpenAI adapter"), ("G4", "Selection and configuration"),
        ("G5", "Fake-server tests"), ("G6", "Docs")]
    assert deps(spec) == {"G1": [], "G2": ["G1"], "G3": ["G1"], "G4": ["G1", "G3"],
                          "G5": ["G1", "G2", "G3", "G4"], "G6": []}
    assert spec.group("G2").tasks == ["Create `agentrun/providers/anthropic.py`",
                                      "Map `usage` fields, including cache tokens",
                                      "Port the retry classification"]
    assert spec.group("G4").tasks == ["Read `AGENTRUN_PROVIDER` and `AGENTRUN_MODEL`",
                                      "Error when no model is configured"]
    assert spec.group("G4").files == ["agentrun/config.py", "agentrun/errors.py"]
    assert spec.group("G5").files == ["tests/fake_model_server.py",
                                      "tests/test_providers_http.py"]
    assert spec.group("G6").tasks == ["Update `README.md` with the provider matrix."]
    assert [g.line for g in spec.groups] == [61, 66, 72, 77, 84, 89]
    # `Wave 1: [G7, G8]` sits in a fence in Context: ignored
    assert spec.declared_waves == {}


@pytest.mark.parametrize("heading, gid, title, expected", [
    ("### G2: Parser (depends on G1)", "G2", "Parser", ["G1"]),
    ("### G2: Parser (depends on G1-G5)", "G2", "Parser", ["G1", "G3", "G4", "G5"]),
    ("### G2: Parser (depends on G1, G3)", "G2", "Parser", ["G1", "G3"]),
    ("### G2 — Parser (Depends on: G1)", "G2", "Parser", ["G1"]),
    ("### Group 2: Parser (requires G1)", "G2", "Parser", ["G1"]),
    ("#### G2: Parser", "G2", "Parser", []),
    ("### G02: Parser (no dependencies)", "G2", "Parser", []),
    ("### G2: Parser — depends on G1", "G2", "Parser", ["G1"]),
    ("### G2: `src/parse.py` (depends on G1) (Wave 2)", "G2", "`src/parse.py`", ["G1"]),
])
def test_group_heading_variants(heading, gid, title, expected):
    spec = spec_with(f"### G1: Base\n\n- base\n\n{heading}\n\n- [ ] do it\n")
    group = spec.group(gid)
    assert group is not None and group.title == title
    assert group.dependencies == expected
    assert group.tasks == ["do it"]


def test_group_heading_with_a_small_table_and_nested_items():
    spec = spec_with("""### G1: Storage

| # | Step | File |
|---|------|------|
| 1 | Create the store | `src/store.py` |
| 2 | Add migrations | src/migrations/ |

- [x] Write the README section
  - mention `docs/store.md`
""")
    g1 = spec.group("G1")
    assert spec.unread_rows == []  # a group's own numbered steps name no groups
    assert g1.tasks == ["Write the README section", "Create the store", "Add migrations"]
    assert g1.files == ["src/store.py", "src/migrations/", "docs/store.md"]


# -- shape 3: heading plus a Dependencies line ----------------------------------------------

def test_dependency_lines_fixture():
    spec = load_spec(FIXTURES / "SPEC-063.md")
    assert deps(spec) == {"G1": [], "G2": ["G1"], "G3": ["G1"], "G4": ["G2", "G3"],
                          "G5": ["G4"]}
    g1, g4, g5 = spec.group("G1"), spec.group("G4"), spec.group("G5")
    assert g1.est_context == "~10%"
    assert g1.tasks == ["Define the record dataclasses in `agentrun/report/record.py`",
                        "Serialise with `agentrun/fsutil.py` (atomic)"]
    assert g4.tasks == ["Add `--junit PATH` to `agentrun/cli/run_cmd.py`",
                        "Document the flag in `README.md`"]
    assert g4.declared_wave == 3 and spec.declared_waves == {"G4": 3}
    assert g5.tasks == ["Run the example project with the scripted provider and parse the "
                        "JUnit file"]
    assert spec.group("G3").tasks == ["Call the record writer from `agentrun/orchestrator.py` "
                                      "when the last wave ends"]


@pytest.mark.parametrize("line, expected", [
    ("**Dependencies:** G1", ["G1"]),
    ("**Dependencies:** None", []),
    ("**Dependencies**: G1, G3", ["G1", "G3"]),
    ("Depends on: G1", ["G1"]),
    ("Depends on G1 and G3", ["G1", "G3"]),
    ("**Depends on:** G1, G2", ["G1", "G2"]),
    ("Dependencies: —", []),
    ("*Dependencies:* G1-G3", ["G1", "G2", "G3"]),
])
def test_dependency_line_variants(line, expected):
    spec = spec_with(f"### G4: Wiring\n\n{line}\n\n- connect things\n")
    assert spec.group("G4").dependencies == expected
    assert spec.group("G4").tasks == ["connect things"]


# -- declared waves -------------------------------------------------------------------------

def test_declared_waves_from_column_plan_table_and_fence_kept_as_written():
    spec = load_spec(FIXTURES / "SPEC-077.md")
    # G2 is declared in wave 1 although it depends on G1: recorded as declared, not fixed
    assert spec.declared_waves == {"G1": 1, "G2": 1, "G3": 2, "G4": 2, "G5": 3}
    assert spec.group("G2").declared_wave == 1
    assert spec.group("G2").dependencies == ["G1"]


def test_execution_plan_table_and_wave_fence():
    spec = spec_with("""### Task Groups

| Group | Tasks | Dependencies |
|---|---|---|
| G1 | a | — |
| G2 | b | — |
| G3 | c | G1 |
| G4 | d | G3 |

### Execution Plan

| Wave | Groups | Parallel? |
|------|--------|-----------|
| 1 | G1, G2, G3 | Yes |

```text
Wave 1: [G1, G2]
Wave 2: G3 (needs G1), G4
```
""")
    assert spec.declared_waves == {"G1": 1, "G2": 1, "G3": 1, "G4": 2}
    assert [g.declared_wave for g in spec.groups] == [1, 1, 1, 2]


def test_top_level_execution_plan_section_and_wave_lines():
    spec = spec_with("""### G1: a

- x

### G2: b (depends on G1)

- y
""", after="""
## Execution Plan

- **Wave 1:** G1
- **Wave 2:** G2, G9

## Constraints

Wave 5: G1
""")
    assert spec.declared_waves == {"G1": 1, "G2": 2, "G9": 2}
    assert spec.group("G1").declared_wave == 1


def test_wave_fence_outside_the_plan_is_ignored():
    spec = spec_with("""| Group | Tasks | Dependencies |
|---|---|---|
| G1 | a | — |
""", before="""The old tool planned:

```
Wave 1: [G1, G2]
Wave 2: [G3]
```

""")
    assert spec.declared_waves == {}


def test_wave_headings_declare_their_groups():
    spec = spec_with("""### Wave 1

#### G1: Models

- models

#### G2: Fixtures

- fixtures

### Wave 2

#### G3: Parser (depends on G1, G2)

- parser

### G4: Docs

- docs
""")
    assert spec.declared_waves == {"G1": 1, "G2": 1, "G3": 2}
    assert spec.group("G4").declared_wave is None
    assert deps(spec)["G3"] == ["G1", "G2"]


# -- mixing shapes --------------------------------------------------------------------------

def test_summary_table_and_detail_headings_merge():
    spec = spec_with("""### Task Groups

| Group | Wave | Tasks | Dependencies |
|---|---|---|---|
| G1 | 1 | Models | — |
| G2 | 2 | Parser | G1 |

### G1: Models

- Define `src/models.py`

### G2: Parser

**Dependencies:** G1, G3

- Write `src/parse.py`
""")
    g1, g2 = spec.groups
    assert (g1.title, g1.tasks, g1.files) == ("Models", ["Models", "Define `src/models.py`"],
                                              ["src/models.py"])
    assert g2.dependencies == ["G1", "G3"]
    assert g2.line == 18 and g2.declared_wave == 2  # its table row comes first


def test_no_implementation_tasks_means_no_groups():
    spec = load_spec(FIXTURES / "SPEC-041.md")
    text = spec.text.split("## Implementation Tasks")[0]
    assert parse_spec(text).groups == []


def test_table_fixture_groups():
    spec = load_spec(FIXTURES / "SPEC-041.md")
    assert deps(spec) == {"G1": [], "G2": [], "G3": ["G1"], "G4": ["G1", "G3"],
                          "G5": ["G1", "G2", "G3", "G4"]}
    g1 = spec.group("G1")
    assert g1.tasks == ["Define the checkpoint schema in `agentrun/checkpoint.py`",
                        "Add `load()` and `save()`"]
    assert g1.files == ["agentrun/checkpoint.py"]
    assert g1.est_context == "~15%" and g1.declared_wave == 1
    assert spec.group("G4").files == ["agentrun/cli/run_cmd.py"]


def test_tasks_column_wins_over_synonyms():
    spec = spec_with("""| Group | Step | Description | Tasks | Dependencies |
|---|---|---|---|---|
| G1 | 1 | background prose | Build it | — |
""")
    assert spec.group("G1").tasks == ["Build it"]


def test_numbered_group_headings():
    spec = spec_with("### 1. G1 — Models\n\n- m\n\n### 2. G2: API (depends on G1)\n\n- a\n")
    assert deps(spec) == {"G1": [], "G2": ["G1"]}
