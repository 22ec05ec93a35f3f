"""Prompt and agent overrides come from the user's commit, and render in Jinja's sandbox."""

from __future__ import annotations

from pathlib import Path

import pytest
from clirun import agentrun
from runkit import make_project, scripted, spec_text, writes

from agentrun.agent.prompts import render
from agentrun.core.errors import BadInput

TWO_WAVES = [("G1", [], "src/a.py"), ("G2", ["G1"], "src/b.py")]
USER_TEMPLATE = "USER-OVERRIDE for {{ spec_id }}: {{ group_ids }}\n"


def transcripts(root: Path, group: str) -> str:
    """Every transcript of `group`'s worker, wherever the run keeps its record."""
    found = [p for p in root.rglob("transcript.jsonl") if p.parent.name == group]
    assert found, f"no transcript of {group} under {root}"
    return "".join(p.read_text() for p in found)


def test_a_worker_writing_a_prompt_does_not_change_what_later_workers_are_told(tmp_path):
    script = {"groups": {
        "G1": writes(".specflow/prompts/worker_assignment.md",
                     "INJECTED {{ ''.__class__.__mro__ }}\n")[:1]
        + writes("src/a.py", "A = 1\n"),
        "G2": writes("src/b.py", "B = 2\n")}}
    # even a spec that names the prompt does not let a worker write under .specflow/: the file
    # tool refuses, and wave 2 is told what the user committed
    spec = spec_text("SPEC-31", TWO_WAVES) + \
        "\n## Files to Modify\n\n- `.specflow/prompts/worker_assignment.md`\n"
    root = make_project(tmp_path / "p", "SPEC-31", spec, script,
                        files={".specflow/prompts/worker_assignment.md": USER_TEMPLATE})
    proc = agentrun("run", "SPEC-31", *scripted("--mode", "orchestrated"), cwd=root)
    assert proc.returncode in (0, 1), proc.stderr
    assert "is under .specflow" in transcripts(root, "G1")  # the attempt was made, refused
    assert (root / ".specflow/prompts/worker_assignment.md").read_text() == USER_TEMPLATE
    second = transcripts(root, "G2")
    assert "USER-OVERRIDE for SPEC-31: G2" in second  # the user's committed override is used
    assert "INJECTED" not in second
    assert "unsafe" not in second


def test_a_template_reaching_python_internals_fails_clearly(tmp_path):
    prompts = tmp_path / ".specflow/prompts"
    prompts.mkdir(parents=True)
    (prompts / "retry.md").write_text("{{ ''.__class__.__mro__[1].__subclasses__() }}\n")
    with pytest.raises(BadInput) as info:
        render("retry", {}, tmp_path)
    assert "tries an unsafe operation" in info.value.message
    assert "__class__" in info.value.message
