"""The `### Audit vN` entry: its shape, and model text that cannot break the spec around it."""

from __future__ import annotations

import re
from datetime import datetime

from markdown_it import MarkdownIt

from agentrun.audit.estimates import ContextEstimate, Thresholds, UnitEstimate
from agentrun.audit.history import EntryData, render_entry
from agentrun.spec import parse_spec
from agentrun.spec.writeback import append_to_section, next_audit_version

WHEN = datetime(2026, 1, 23, 17, 30)


def estimate(groups: list[tuple[str, int]], total: int, single: bool = False,
             window: int = 200_000) -> ContextEstimate:
    th = Thresholds(0.3, 0.5)
    units = [UnitEstimate(g, t, t / window, over=t / window > th.group_max) for g, t in groups]
    whole = UnitEstimate("total", total, total / window, over=single and total / window > 0.5)
    return ContextEstimate(model="claude-sonnet-4", window=window, method="tiktoken:o200k_base",
                           thresholds=th, groups=units, total=whole, source="spec",
                           single_context=single)


def test_entry_has_the_history_format_with_the_measured_table():
    entry = render_entry(EntryData(
        version=3, when=WHEN, status="NEEDS_REVISION",
        critical=["Agent file structure not specified", "Criterion 5 is unmeasurable"],
        recommendations=["Clarify parallel spawning", "Specify failure handling"],
        dimensions={"clarity": "PASS — clear", "architecture_fit": "CONCERN — new module"},
        comment="Close.", estimate=estimate([("G1", 70_000), ("G2", 10_000)], 120_000),
        static_notes=["wave-drift: G2 is declared in wave 1"]))
    lines = entry.splitlines()
    assert lines[:2] == ["### Audit v3 (2026-01-23 17:30)", "**Status:** NEEDS_REVISION"]
    assert ("**Context Estimate:** ~60% total (120,000 tokens of the 200,000-token window of "
            "claude-sonnet-4, counted with tiktoken:o200k_base); largest group G1 ~35%") in lines
    assert "| G1 | 70,000 | ~35% | over 30% |" in lines and "| G2 | 10,000 | ~5% | ok |" in lines
    assert "| Total (one context) | 120,000 | ~60% | — (workers; limit 50% applies to one " \
           "context) |" in lines
    assert lines[lines.index("**Critical:**") + 1] == "1. Agent file structure not specified"
    assert lines[lines.index("**Recommendations:**") + 1] == "3. Clarify parallel spawning"
    assert "- Architecture fit: CONCERN — new module" in lines
    assert "- wave-drift: G2 is declared in wave 1" in lines
    assert lines[-1] == "**Comment:** Close."


def test_proposed_groups_are_shown_when_the_spec_has_none():
    proposed = estimate([("G1", 2_000)], 5_000)
    entry = render_entry(EntryData(version=1, when=WHEN, status="NEEDS_DECOMPOSITION",
                                   estimate=estimate([], 3_000, single=True),
                                   proposed=proposed, tasks_note="1 proposed (G1)"))
    assert "| G1 (proposed) | 2,000 | ~1% | ok |" in entry
    assert "| Total (one context, with the proposed groups) | 5,000 |" in entry
    assert "**Task Groups:** 1 proposed (G1)" in entry


def test_model_text_cannot_open_blocks_or_sections():
    hostile = ["## Execution Summary", "```python", "- nested\n\n## Context\nmore", "> quote",
               "1. numbered", "<div>", "---"]
    entry = render_entry(EntryData(version=1, when=WHEN, status="NEEDS_REVISION",
                                   critical=hostile, comment="## not a heading"))
    text = "---\nid: S\n---\n# S\n\n## Task\n\nx\n\n## Acceptance Criteria\n\n- [ ] y\n"
    spec = parse_spec(append_to_section(text, "Audit History", entry))
    assert [s.title for s in spec.sections if s.level == 2] == \
        ["Task", "Acceptance Criteria", "Audit History"]
    assert len(spec.acceptance_criteria) == 1
    assert next_audit_version(append_to_section(text, "Audit History", entry)) == 2
    html = MarkdownIt("commonmark").render(entry)  # rendered, the items read as written
    assert html.count("<h3>") == 1 and html.count("<ol>") == 1 and "<ul>" not in html
    assert not re.search(r"<(h2|pre|blockquote|div|hr)", html)


def test_static_stop_is_said():
    entry = render_entry(EntryData(version=1, when=WHEN, status="NEEDS_REVISION",
                                   critical=["missing-section: no `## Task` section"],
                                   static_stop=True))
    assert "the auditor was not run" in entry and "**Context Estimate:**" not in entry
