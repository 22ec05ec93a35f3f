"""Slips in how groups are written are named by `plan` and the static audit, not merged away."""

from __future__ import annotations

from pathlib import Path

from clirun import agentrun
from runkit import make_project

SPEC = """---
id: SPEC-41
status: draft
---
# Slips

## Task

Build it.

## Acceptance Criteria

- [ ] It works

## Implementation Tasks

| Group | Tasks | Dependencies |
|---|---|---|
| G1 | Create `src/a.py` | — |
| G2 | Create `src/b.py` | G1, G2 |
| G1 | Create `src/c.py` | — |
| G3 | Part one of `src/d.py` (segment S1) | G2 |
"""


def _findings(doc: dict) -> dict[str, dict]:
    return {f["code"]: f for f in doc["findings"]}


def test_duplicate_ids_and_self_dependencies_are_named(tmp_path: Path):
    root = make_project(tmp_path / "p", "SPEC-41", SPEC, {"groups": {}})
    plan = agentrun("plan", "SPEC-41", "--json", cwd=root)
    assert plan.returncode == 0, plan.stderr
    found = _findings(plan.json["plan"])
    assert found["duplicate-group"]["severity"] == "critical"
    assert found["duplicate-group"]["group"] == "G1"
    assert "lines" in found["duplicate-group"]["message"]
    assert found["self-dependency"]["group"] == "G2"

    audit = agentrun("audit", "SPEC-41", "--static", "--json", cwd=root)
    assert audit.returncode == 1, audit.stderr  # a critical finding
    assert "duplicate-group" in audit.stdout

    text = agentrun("plan", "SPEC-41", cwd=root)
    assert "G1 is defined more than once" in text.stdout + text.stderr
