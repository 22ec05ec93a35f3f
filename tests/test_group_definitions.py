"""Slips in how groups are written are named by `plan` and the static audit, not merged away."""

from __future__ import annotations

from pathlib import Path

from clirun import agentrun
from gitutil import run_git
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


UNREADABLE = """---
id: SPEC-42
status: audited
---
# Unreadable ids

## Task

Build it.

## Acceptance Criteria

- [ ] It works

## Implementation Tasks

| Group | Tasks | Dependencies |
|---|---|---|
|  | Create `src/zero.py` | — |
| G1 | Create `src/a.py` | — |
| G-2 | Create `src/b.py` | G1 |
| Grp 3 | Create `src/c.py` | G-2 |
| Task 4 | Create `src/d.py` | G1 |
"""


def test_a_row_whose_group_id_cannot_be_read_is_named_with_its_line(tmp_path: Path):
    """`G-2` and `Grp 3` are read as G2 and G3; an empty id in the first row and `Task 4` are
    critical findings naming their lines in `plan`, `audit` and `run`, which refuses before
    any worktree or model call."""
    root = make_project(tmp_path / "p", "SPEC-42", UNREADABLE, {"groups": {}})
    plan = agentrun("plan", "SPEC-42", "--json", cwd=root)
    assert plan.returncode == 0, plan.stderr
    doc = plan.json["plan"]
    assert [g for w in doc["waves"] for g in w["groups"]] == ["G1", "G2", "G3"]
    unread = [f for f in doc["findings"] if f["code"] == "unreadable-group"]
    assert [(f["line"], f["severity"]) for f in unread] == [(19, "critical"), (23, "critical")]
    assert "`Task 4` cannot be read" in unread[1]["message"]

    audit = agentrun("audit", "SPEC-42", "--static", cwd=root)
    assert audit.returncode == 1, audit.stderr
    assert "line 19: a task-group row has no group id" in audit.stdout + audit.stderr

    run = agentrun("run", "SPEC-42", "--provider", "scripted", "--script",
                   ".specflow/script.yaml", "--yes", cwd=root)
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert "line 23: the group id `Task 4` cannot be read" in run.stderr
    assert not (root / ".specflow/runs").exists()
    assert len(run_git(root, "worktree", "list").splitlines()) == 1
