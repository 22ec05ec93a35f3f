"""Task and title text reaches workers and commits as the spec's author wrote it."""

from __future__ import annotations

import json

from clirun import agentrun
from gitutil import run_git
from runkit import make_project, scripted, writes

from agentrun.spec.parse import load_spec

SPEC = """---
id: SPEC-9
status: audited
complexity: small
---
# SPEC-9: Text as written

## Task

Make the package importable.

## Acceptance Criteria

- [ ] the package imports

## Implementation Tasks

| Group | Tasks | Files | Dependencies |
|-------|-------|-------|--------------|
{row}

### G2: Fix `calc/__main__.py`

- Make calc/__main__.py run *main*

**Depends on:** G1
""".format(row="| G1 | Create `calc/__init__.py`; call __import__(name) in **one** place; "
                 "see [docs](https://x.io/a_b) | calc/__init__.py | — |")


def test_workers_and_commits_get_the_text_as_written(tmp_path):
    root = make_project(tmp_path / "p", "SPEC-9", SPEC, {"groups": {
        "G1": writes("calc/__init__.py", "VALUE = 1\n"),
        "G2": writes("calc/__main__.py", "print(1)\n")}})
    proc = agentrun("run", "SPEC-9", *scripted(), cwd=root)
    assert proc.returncode == 0, proc.stderr
    transcripts = "".join(p.read_text() for p in (root / ".specflow/runs").rglob(
        "transcript.jsonl"))
    for text in ("Create `calc/__init__.py`", "call __import__(name) in **one** place",
                 "see [docs](https://x.io/a_b)", "Fix `calc/__main__.py`",
                 "Make calc/__main__.py run *main*"):
        assert json.dumps(text)[1:-1] in transcripts, text
    log = run_git(root, "log", "--format=%s")
    assert "SPEC-9 G1, G2: Create `calc/__init__.py`; Fix `calc/__main__.py`" in log
    spec = load_spec(root / ".specflow/specs/SPEC-9.md")
    assert spec.group("G1").files == ["calc/__init__.py"]
