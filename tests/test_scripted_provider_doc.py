"""docs/scripted-provider.md's example is a working session: its task groups and its script,
taken from the page as they stand, run a spec to an approved `complete`."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from clirun import agentrun, plain_python_env
from runkit import make_project

DOC = Path(__file__).parents[1] / "docs/scripted-provider.md"


def fenced(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", text, re.M | re.S)


def test_the_documented_example_runs_as_written(tmp_path):
    doc = DOC.read_text(encoding="utf-8")
    [groups] = [b for b in fenced(doc, "markdown") if b.startswith("| Group |")]
    [script] = fenced(doc, "yaml")
    session = tmp_path / "session.yaml"
    session.write_text(script)
    criteria = [c for turns in yaml.safe_load(script)["groups"].values() for t in turns
                for c in (t.get("tool_calls") or [{}])[0].get("arguments", {})
                .get("criteria_met", [])]
    spec = ("---\nid: SPEC-001\nstatus: audited\n---\n# SPEC-001: Greeting\n\n## Context\n\n"
            "A greeting.\n\n## Task\n\nWrite greet(name) and its test.\n\n## Requirements\n\n"
            "As the groups say.\n\n## Acceptance Criteria\n\n"
            + "".join(f"- [ ] {c}\n" for c in criteria)
            + f"\n## Implementation Tasks\n\n{groups}")
    root = make_project(tmp_path / "p", "SPEC-001", spec, {})
    [command] = fenced(doc, "console")
    args = command.split()[1:]
    assert args[:2] == ["run", "SPEC-001"] and "session.yaml" in args
    args = [str(session) if a == "session.yaml" else a for a in args]
    proc = agentrun(*args, "--json", cwd=root, env=plain_python_env(tmp_path / "py"))
    assert proc.returncode == 0, proc.stderr
    doc_result = proc.json
    assert doc_result["status"] == "complete" and doc_result["review"]["result"] == "APPROVED"
    assert [w["groups"] for w in doc_result["waves"]] == [["G1"], ["G2"]]
    assert (root / "greet.py").read_text().startswith("def greet(name):")
    assert (root / "tests/test_greet.py").is_file()
    assert "Result: complete" in doc  # what the page promises
