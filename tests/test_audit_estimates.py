"""Measured context estimates: offline token counts per worker context, thresholds."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrun.audit.estimates import (
    SHARED_SECTIONS,
    Thresholds,
    estimate_context,
    group_text,
    thresholds_from,
)
from agentrun.core.errors import BadInput
from agentrun.providers.tokens import context_window, estimate_tokens
from agentrun.spec import parse_spec

SPEC = """---
id: SPEC-9
status: draft
---
# SPEC-9: Estimates

## Context

Why this exists. Mentions `src/extra.py` in passing.

## Task

Add a parser and a CLI.

## Requirements

The parser reads `src/parse.py` input.

## Acceptance Criteria

- [ ] parses
- [ ] prints

## Constraints

No new dependencies.

## Implementation Tasks

| Group | Tasks | Dependencies |
|-------|-------|--------------|
| G1 | Update `src/parse.py` | — |
| G2 | Create `src/cli.py`; wire `src/parse.py` | G1 |
"""

PROJECT_MD = "# Project\n\nA small Python tool. Tests with pytest.\n"


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src/parse.py").write_text("def parse(text):\n    return text.split()\n" * 30)
    (tmp_path / "src/extra.py").write_text("X = 1\n")
    (tmp_path / "outside.py").write_text("secret = 1\n" * 100)
    return tmp_path


def measure(project: Path, model: str = "gpt-4o", single: bool = False,
            thresholds: Thresholds | None = None, text: str = SPEC):
    spec = parse_spec(text, project / "SPEC-9.md")
    return spec, estimate_context(spec, spec.groups, root=project, project_md=PROJECT_MD,
                                  model=model, thresholds=thresholds or Thresholds(),
                                  source="spec", single_context=single)


def test_each_group_counts_its_text_shared_sections_project_md_and_existing_files(project):
    spec, est = measure(project)

    def tokens(text: str) -> int:
        return estimate_tokens(text, "gpt-4o").tokens

    shared = [tokens(spec.section(t).body.strip()) for t in SHARED_SECTIONS
              if spec.section(t) is not None]
    shared.append(tokens("- parses\n- prints"))
    shared.append(tokens(PROJECT_MD))
    parse_py = tokens((project / "src/parse.py").read_text())
    g1, g2 = est.groups
    assert g1.tokens == tokens(group_text(spec.groups[0])) + sum(shared) + parse_py
    assert g2.tokens == tokens(group_text(spec.groups[1])) + sum(shared) + parse_py
    assert g2.absent_files == ["src/cli.py"]  # to be created: nothing to read yet
    assert {p.label for p in g1.parts} >= {"group G1", "section Context", "PROJECT.md",
                                           "acceptance criteria", "file src/parse.py"}
    assert sum(p.tokens for p in g1.parts) == g1.tokens
    assert est.window == context_window("gpt-4o") == 128_000
    assert est.method == "tiktoken:o200k_base"
    assert g1.share == pytest.approx(g1.tokens / 128_000)
    # the total holds every group once, the shared parts once, and every named file once
    extra = tokens("X = 1\n")
    assert est.total.tokens == (sum(tokens(group_text(g)) for g in spec.groups) + sum(shared)
                                + parse_py + extra)
    assert not est.problems


def test_over_the_group_limit_needs_decomposition(project):
    _spec, est = measure(project, model="gpt-4", thresholds=Thresholds(0.01, 0.5))
    assert est.window == 8_192
    assert [g.over for g in est.groups] == [True, True]
    assert est.problems[0].startswith("G1 needs ~") and "limit 1%" in est.problems[0]


def test_total_limit_applies_only_when_one_context_runs_the_spec(project):
    _spec, workers = measure(project, model="gpt-4", thresholds=Thresholds(0.9, 0.01))
    assert not workers.total.over and not workers.problems
    _spec, single = measure(project, model="gpt-4", single=True,
                            thresholds=Thresholds(0.9, 0.01))
    assert single.total.over
    assert "whole spec in one context" in single.problems[0]


def test_files_outside_the_project_or_binary_are_not_read(project):
    (project / "src/blob.bin").write_bytes(b"\0\1\2")
    text = SPEC.replace("Update `src/parse.py`", "Read `../outside.py` and `src/blob.bin`")
    inner = project / "inner"
    inner.mkdir()
    (inner / "src").mkdir()
    _spec, est = measure(inner, text=text)
    assert est.groups[0].absent_files == ["../outside.py", "src/blob.bin"]
    assert not any(p.label.startswith("file") for p in est.groups[0].parts)


def test_thresholds_flags_over_config_over_defaults():
    assert thresholds_from({}) == Thresholds(0.30, 0.50)
    config = {"audit": {"group_context_max": 0.2, "total_context_max": 0.4}}
    assert thresholds_from(config) == Thresholds(0.2, 0.4)
    assert thresholds_from(config, group_max=0.1) == Thresholds(0.1, 0.4)
    for bad in ({"audit": {"group_context_max": 30}}, {"audit": {"total_context_max": "x"}},
                {"audit": []}):
        with pytest.raises(BadInput) as err:
            thresholds_from(bad)
        assert "audit" in err.value.message and err.value.hint
    with pytest.raises(BadInput) as err:
        thresholds_from({}, total_max=0)
    assert "--total-context-max" in err.value.message


def test_shared_sections_are_what_a_worker_assignment_carries(project):
    from agentrun.plan import build_plan
    from agentrun.project import Project
    from agentrun.protocol import ProviderSettings
    from agentrun.run.assignment import make_assignment
    from agentrun.run.options import RunOptions

    spec, est = measure(project)
    options = RunOptions(ProviderSettings(provider="", model=""))
    assignment = make_assignment(
        Project(project), spec, build_plan(spec), options, run_id="r", spec_path="SPEC-9.md",
        batch_id="G1", groups=["G1"], worktree=project, branch="b", base="0" * 40,
        result_path=project / "r.json", record_dir=project)
    counted = {p.label.removeprefix("section ").lower().replace(" ", "_"): p.tokens
               for p in est.groups[0].parts if p.label.startswith("section ")}
    assert counted == {k: estimate_tokens(v, "gpt-4o").tokens
                       for k, v in assignment.sections.items() if v}
    assert set(counted) >= {"context", "task", "requirements", "constraints"}
