"""`agentrun review` through the entry point: a real run, then a scripted reviewer."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from clirun import agentrun
from runkit import make_project, scripted, spec_text, submit, writes

SPEC = ".specflow/specs/SPEC-1.md"
REVIEW = ["--provider", "scripted", "--script", ".specflow/script.yaml"]


def review_turn(criteria: list[dict[str, Any]], findings: list[dict[str, Any]] | None = None,
                summary: str = "Looked at it.") -> dict[str, Any]:
    return {"tool_calls": [{"name": "submit_result", "arguments": {
        "status": "complete", "summary": "Reviewed.", "criteria_met": [], "deviations": [],
        "output": {"criteria": criteria, "findings": findings or [], "summary": summary}}}]}


def met(n: int, evidence: str) -> dict[str, Any]:
    return {"criterion": n, "verdict": "met", "evidence": evidence}


def script(reviewer: list[dict[str, Any]]) -> dict[str, Any]:
    return {"default": writes("a.txt", "hello\n", criteria=["every file exists"]),
            "agents": {"code-reviewer": reviewer}}


@pytest.fixture(scope="module")
def ran_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project whose spec was run (one file written); a review never changes the run, so
    each test reviews its own copy of it."""
    root = make_project(tmp_path_factory.mktemp("ran") / "p", "SPEC-1", spec_text("SPEC-1", []),
                        script([]))
    proc = agentrun("run", "SPEC-1", *scripted(), cwd=root)
    assert proc.returncode == 0, proc.stderr
    return root


@pytest.fixture()
def ran_project(ran_template: Path, tmp_path: Path):
    """A copy of the run project, with the reviewer's turns scripted."""
    def make(reviewer: list[dict[str, Any]]) -> Path:
        root = tmp_path / "p"
        shutil.copytree(ran_template, root, symlinks=True)
        (root / ".specflow/script.yaml").write_text(yaml.safe_dump(script(reviewer),
                                                                   sort_keys=False))
        return root
    return make


def status(text: str) -> str:
    return re.search(r"^status: (\S+)$", text, re.M).group(1)


def appended(before: str, entry: str, new_status: str, summary: str) -> str:
    """What the spec must be: the text before with its status, its criteria's checkboxes (as
    the review judged them) and its Execution Summary (`summary`, as written) changed, then
    the entry."""
    head = before.replace(f"status: {status(before)}", f"status: {new_status}", 1)
    old_summary = head.split("## Execution Summary\n", 1)[1]
    head = head.replace(old_summary, summary)
    for criterion, ticked in REVIEW_TICKS.items():
        head = head.replace(f"- [ ] {criterion}\n", f"- [{ticked}] {criterion}\n", 1)
    return head.rstrip("\n") + "\n\n## Review History\n\n" + entry + "\n"


REVIEW_TICKS = {"every file exists": "x", "nothing else changes": "x"}


def summary_of(text: str) -> str:
    return text.split("## Execution Summary\n", 1)[1].split("## Review History")[0]


def test_approval_sets_done_and_appends_the_entry_byte_exactly(ran_project):
    root = ran_project([review_turn(
        [met(1, "a.txt:1 holds the greeting"), met(2, "git diff --stat: 1 file changed")],
        [{"severity": "minor", "file": "a.txt:1", "issue": "no trailing period",
          "fix": "add one"}])])
    before = (root / SPEC).read_text()
    proc = agentrun("review", "SPEC-1", *REVIEW, "--json", cwd=root)
    assert proc.returncode == 0, proc.stderr
    doc = proc.json
    assert doc["ok"] and doc["result"] == "APPROVED" and doc["frontmatter_status"] == "done"
    entry = doc["history_entry"]
    text = (root / SPEC).read_text()
    summary = summary_of(text)
    assert text == appended(before, entry, "done", summary)  # every other byte as it was
    # the criteria and the summary show the review's verdict
    assert "- [x] every file exists\n- [x] nothing else changes\n" in text
    assert "**Review:** APPROVED (Review v1, 1 review(s))" in summary
    assert "- [x] every file exists (Review v1: met)" in summary
    assert entry.startswith("### Review v1 (")
    assert "**Result:** APPROVED" in entry and "**Reviewer:** code-reviewer (" in entry
    assert "- [✓] AC1: every file exists — a.txt:1 holds the greeting" in entry
    assert "**Minor:**\n1. **no trailing period**\n   - File: `a.txt:1`" in entry
    # the reviewer was shown the diff of the run and the spec's criteria
    state = (root / ".specflow/STATE.md").read_text()
    assert "done" in state


def test_changes_requested_exits_1_sets_review_and_lists_findings(ran_project):
    root = ran_project([review_turn(
        [met(1, "a.txt:1"), {"criterion": 2, "verdict": "not met",
                             "evidence": "README.md changed too"}],
        [{"severity": "critical", "file": "a.txt", "issue": "## Constraints\nwrong text",
          "fix": "write the greeting"}])])
    proc = agentrun("review", "SPEC-1", *REVIEW, cwd=root)
    assert proc.returncode == 1, proc.stderr
    assert "CHANGES_REQUESTED" in proc.stdout
    text = (root / SPEC).read_text()
    assert status(text) == "review"
    assert "**Result:** CHANGES_REQUESTED" in text
    assert "**Critical:**\n1. **## Constraints wrong text**" in text  # inert: one line
    assert "- [✗] AC2: nothing else changes — not met — README.md changed too" in text
    assert text.count("## Constraints") == 1 + text.count("**## Constraints")


def test_a_second_review_is_v2(ran_project):
    verdicts = [met(1, "a.txt:1"), {"criterion": 2, "verdict": "cannot_tell"}]
    root = ran_project([review_turn(verdicts)])
    assert agentrun("review", "SPEC-1", *REVIEW, cwd=root).returncode == 1
    (root / ".specflow/script.yaml").write_text(yaml.safe_dump({"agents": {"code-reviewer": [
        review_turn([met(1, "a.txt:1"), met(2, "git diff")])]}}))
    proc = agentrun("review", "SPEC-1", *REVIEW, "--json", cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert proc.json["review_version"] == 2
    text = (root / SPEC).read_text()
    assert "### Review v1 (" in text and "### Review v2 (" in text and status(text) == "done"


def test_a_reviewer_that_never_submits_is_not_an_approval(ran_project):
    root = ran_project([{"text": "Looks fine to me."}])
    before = (root / SPEC).read_text()
    proc = agentrun("review", "SPEC-1", *REVIEW, "--json", cwd=root)
    assert proc.returncode == 1
    doc = proc.json
    assert not doc["ok"] and doc["result"] == "CHANGES_REQUESTED" and doc["error"]
    assert (root / SPEC).read_text() == before  # nothing written


def test_an_invalid_review_is_refused_in_the_conversation(ran_project):
    root = ran_project([review_turn([met(1, "a.txt:1")]),  # criterion 2 missing
                        review_turn([met(1, "a.txt:1"), met(2, "git diff")])])
    proc = agentrun("review", "SPEC-1", *REVIEW, "--json", cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert proc.json["steps"] == 2


def test_junit_has_one_case_per_criterion(ran_project):
    root = ran_project([review_turn(
        [met(1, "a.txt:1"), {"criterion": 2, "verdict": "not_met", "evidence": "no"}])])
    proc = agentrun("review", "SPEC-1", *REVIEW, "--junit", "r.xml", cwd=root)
    assert proc.returncode == 1
    xml = (root / "r.xml").read_text()
    assert 'name="AC1: every file exists"' in xml and 'name="AC2: nothing else changes"' in xml
    assert 'failures="1"' in xml


def test_no_run_to_review_exits_2(tmp_path):
    script = {"agents": {"code-reviewer": []}}
    root = make_project(tmp_path / "p", "SPEC-1", spec_text("SPEC-1", []), script)
    proc = agentrun("review", "SPEC-1", *REVIEW, cwd=root)
    assert proc.returncode == 2
    assert "no run to review" in proc.stderr and "agentrun run SPEC-1" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_no_model_configured_exits_3(ran_project):
    root = ran_project([])
    env = {"ANTHROPIC_API_KEY": "", "OPENAI_API_KEY": "", "OPENAI_BASE_URL": "",
           "AGENTRUN_PROVIDER": "", "AGENTRUN_MODEL": ""}
    proc = agentrun("review", "SPEC-1", cwd=root, env=env)
    assert proc.returncode == 3, proc.stderr


def test_a_spec_without_acceptance_criteria_is_not_approved(ran_project):
    """Nothing to check against is bad input, never an approval with nothing checked."""
    root = ran_project([])
    spec = root / SPEC
    text = spec.read_text()
    spec.write_text(text.replace("- [ ] every file exists\n- [ ] nothing else changes\n", ""))
    before = spec.read_text()
    proc = agentrun("review", "SPEC-1", *REVIEW, cwd=root)
    assert proc.returncode == 2, proc.stderr
    assert "no acceptance criteria" in proc.stderr
    assert spec.read_text() == before


def test_a_review_after_a_partial_run_covers_what_landed_and_leaves_the_spec_to_finish(
        tmp_path):
    """G2 failed and G3, which needs it, was blocked: the review judges G1's work, but the
    spec is not done — it keeps its status (so `run --resume` takes it), the command says the
    spec is incomplete (exit 1 even on approval), and STATE.md points at `run --resume`."""
    groups = [("G1", [], "one.txt"), ("G2", [], "two.txt"), ("G3", ["G2"], "three.txt")]
    root = make_project(tmp_path / "p", "SPEC-1", spec_text("SPEC-1", groups), {
        "groups": {"G1": writes("one.txt", "1\n"),
                   "G2": [submit("failed", "cannot", error="compile error in two.txt")]},
        "agents": {"code-reviewer": [review_turn([met(1, "one.txt:1"), met(2, "git diff")])]}})
    run = agentrun("run", "SPEC-1", *scripted("--retries", "0"), cwd=root)
    assert run.returncode == 1 and run.json["status"] == "partial", run.stderr
    before = (root / SPEC).read_text()
    proc = agentrun("review", "SPEC-1", *REVIEW, "--json", cwd=root)
    assert proc.returncode == 1, proc.stderr
    doc = proc.json
    assert doc["result"] == "APPROVED" and not doc["ok"]
    assert doc["incomplete"] == ["G2 failed", "G3 blocked"]
    assert "SPEC-1 is incomplete: its last run did not complete G2 failed, G3 blocked" \
        in proc.stderr and "agentrun run SPEC-1 --resume" in proc.stderr
    text = (root / SPEC).read_text()
    assert status(text) == status(before) == "audited"
    assert text == appended(before, doc["history_entry"], "audited", summary_of(text))
    assert "- [x] every file exists (Review v1: met)" in summary_of(text)
    state = (root / ".specflow/STATE.md").read_text()
    assert "**Next Step:** finish the run: `agentrun run SPEC-1 --resume` (G2 failed, G3 " \
           "blocked), then review again" in state
    assert "archive" not in state and "**Status:** failed" in state
