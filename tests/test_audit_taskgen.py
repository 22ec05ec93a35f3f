"""Proposed task groups -> `## Implementation Tasks`: computed waves, read back, or rejected."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrun.audit.estimates import UnitEstimate
from agentrun.audit.taskgen import generate_tasks, proposal_groups
from agentrun.audit.verdict import ProposedGroup
from agentrun.core.errors import PlanError
from agentrun.plan import build_plan, compute_layers
from agentrun.spec import parse_spec

HEAD = """---
id: SPEC-4
status: draft
---
# SPEC-4: Generated tasks

## Context

Context text.

## Task

Build it.

## Acceptance Criteria

- [ ] built
"""
HISTORY = """
---

## Audit History

### Audit v1 (2026-01-01 09:00)
**Status:** NEEDS_DECOMPOSITION
"""


def group(gid: str, *deps: str, tasks: tuple[str, ...] = (), files: tuple[str, ...] = (),
          title: str = "") -> ProposedGroup:
    return ProposedGroup(id=gid, title=title or f"Title {gid}",
                         tasks=list(tasks) or [f"Create `src/{gid.lower()}.py`"],
                         dependencies=list(deps), files=list(files))


def test_written_groups_read_back_as_the_same_plan():
    proposal = [group("G1"), group("G2", "G1"), group("G3", "G1"), group("G4", "G2", "G3")]
    estimates = {"G1": UnitEstimate("G1", 12_345, 0.0617)}
    gen = generate_tasks(HEAD + HISTORY, "SPEC-4.md", proposal, estimates)
    spec = parse_spec(gen.text, "SPEC-4.md")
    candidate = dataclasses.replace(parse_spec(HEAD, "SPEC-4.md"),
                                    groups=proposal_groups(proposal), declared_waves={})
    assert build_plan(spec).to_dict() == build_plan(candidate).to_dict() == gen.plan.to_dict()
    assert [(g.id, g.dependencies) for g in spec.groups] == \
        [("G1", []), ("G2", ["G1"]), ("G3", ["G1"]), ("G4", ["G2", "G3"])]
    assert spec.declared_waves == {"G1": 1, "G2": 2, "G3": 2, "G4": 3}  # computed by code
    assert not gen.plan.findings
    assert spec.group("G1").est_context == "~6% (12,345 tokens)"
    assert "| Group | Wave | Title | Tasks | Files | Dependencies | Est. Context |" in gen.text
    assert "| 2 | G2, G3 | Yes | 2 |" in gen.text  # the Execution Plan table
    assert gen.plan.mode == "orchestrated"


def test_the_section_goes_above_the_history_and_nothing_else_changes():
    text = HEAD + HISTORY
    gen = generate_tasks(text, "SPEC-4.md", [group("G1"), group("G2")])
    before, after = text.split("\n---\n\n## Audit History", 1)
    assert gen.text.startswith(before + "\n## Implementation Tasks\n\n### Task Groups\n")
    assert gen.text.endswith("\n\n---\n\n## Audit History" + after)
    assert gen.text.count("## Implementation Tasks") == 1


def test_an_existing_section_is_replaced_and_crlf_kept():
    text = (HEAD + "\n## Implementation Tasks\n\n| Group | Tasks | Dependencies |\n|--|--|--|\n"
            "| G1 | old | — |\n\n## Notes\n\nkeep me\n").replace("\n", "\r\n")
    gen = generate_tasks(text, "SPEC-4.md", [group("G1"), group("G2", "G1")])
    assert "old" not in gen.text and gen.text.endswith("## Notes\r\n\r\nkeep me\r\n")
    assert "\n" not in gen.text.replace("\r\n", "")
    assert gen.text.startswith(HEAD.replace("\n", "\r\n"))
    assert [g.id for g in gen.spec.groups] == ["G1", "G2"]


def test_a_cycle_is_rejected_naming_the_chain():
    with pytest.raises(PlanError) as err:
        generate_tasks(HEAD, "SPEC-4.md",
                       [group("G1"), group("G2", "G4"), group("G3", "G2"), group("G4", "G3")])
    assert err.value.message == "dependency cycle: G2 -> G4 -> G3 -> G2"


def test_an_unknown_group_is_rejected():
    with pytest.raises(PlanError) as err:
        generate_tasks(HEAD, "SPEC-4.md", [group("G1", "G7")])
    assert "unknown group G7" in err.value.message


def test_groups_sharing_a_file_get_sub_waves_that_read_back():
    proposal = [group("G1", files=("src/app.py",)), group("G2", files=("src/app.py",)),
                group("G3")]
    gen = generate_tasks(HEAD, "SPEC-4.md", proposal)
    assert [w.label for w in gen.plan.waves] == ["1a", "1b"]
    assert "| 1a | G1, G3 | Yes | 2 |" in gen.text and "| 1b | G2 | No | 1 |" in gen.text


def test_awkward_task_text_stays_inside_its_cell():
    proposal = [group("G1", tasks=("Handle `a|b` pipes | and <br> tags", "line one\nline two"),
                      title="Pipes | and more"),
                group("G2", "G1", tasks=("## not a heading",))]
    gen = generate_tasks(HEAD, "SPEC-4.md", proposal)
    g1 = gen.spec.group("G1")
    assert g1.title == "Pipes | and more"
    assert len(g1.tasks) == 2 and g1.tasks[1] == "line one line two"
    assert [s.title for s in gen.spec.sections if s.level == 2][-1] == "Implementation Tasks"


def test_conflicting_declared_waves_elsewhere_reject_the_proposal():
    text = HEAD + "\n## Execution Plan\n\n```\nWave 1: [G1, G2]\n```\n"
    with pytest.raises(PlanError) as err:
        generate_tasks(text, "SPEC-4.md", [group("G1"), group("G2", "G1")])
    assert "not written" in err.value.message and "wave" in err.value.message


@st.composite
def dags(draw):
    n = draw(st.integers(1, 7))
    groups = []
    for i in range(1, n + 1):
        deps = draw(st.lists(st.integers(1, i - 1), unique=True, max_size=3)) if i > 1 else []
        files = draw(st.lists(st.sampled_from(["src/a.py", "src/b.py", "README.md"]),
                              unique=True, max_size=2))
        groups.append(group(f"G{i}", *(f"G{d}" for d in deps), files=tuple(files)))
    return groups


@settings(max_examples=25, deadline=None)
@given(dags())
def test_any_acyclic_proposal_reads_back_with_its_computed_layers(proposal):
    gen = generate_tasks(HEAD + HISTORY, "SPEC-4.md", proposal)
    assert gen.plan.layers == compute_layers(proposal_groups(proposal))
    assert [g.id for g in gen.spec.groups] == [g.id for g in proposal]
    assert gen.text.endswith(HISTORY)
