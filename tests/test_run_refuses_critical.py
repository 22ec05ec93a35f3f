"""`run` refuses a spec with critical static findings (exit 2, naming them); `--force` runs it."""

from __future__ import annotations

from pathlib import Path

from clirun import agentrun
from runkit import make_project, scripted, submit

EMPTY = """---
id: SPEC-46
type: feature
status: draft
complexity: small
---
# SPEC-46: Nothing to do

## Context

Words, but no task and no acceptance criteria.
"""


def test_a_spec_with_critical_findings_is_refused_unless_forced(tmp_path: Path):
    script = {"groups": {"G1": [submit("complete", "nothing to do", [])]}}
    root = make_project(tmp_path / "p", "SPEC-46", EMPTY, script)
    head = (root / ".specflow/specs/SPEC-46.md").read_text()
    refused = agentrun("run", "SPEC-46", *scripted(), cwd=root)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "SPEC-46 cannot be executed as written (2 critical findings)" in refused.stderr
    assert "no `## Task` section" in refused.stderr
    assert "no `## Acceptance Criteria` section" in refused.stderr
    assert "--force" in refused.stderr and "Traceback" not in refused.stderr
    assert (root / ".specflow/specs/SPEC-46.md").read_text() == head
    assert not list((root / ".specflow").glob("runs/*"))
    forced = agentrun("run", "SPEC-46", "--force", *scripted(), cwd=root)
    assert "cannot be executed" not in forced.stderr
    assert forced.returncode in (0, 1), forced.stderr
