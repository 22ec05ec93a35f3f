"""The review at the end of `run`, `--fix-cycles` and `agentrun fix`, through the entry point
with a scripted worker, fix worker and reviewer."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from clirun import agentrun
from gitutil import run_git
from runkit import make_project, scripted, spec_text, writes
from test_review_cli import met, review_turn, status

SPEC = ".specflow/specs/SPEC-1.md"
FIX = ["--provider", "scripted", "--script", ".specflow/script.yaml", "--in-process"]
REVIEWER_TOKENS = 7000
APPROVE = [met(1, "a.txt:1 holds the greeting"), met(2, "git diff --stat: 1 file changed")]
FINDING = {"severity": "major", "file": "a.txt:1", "issue": "the greeting has no period",
           "fix": "write `hello.`"}
ENTRY_V1 = """### Review v1 (DATE)
**Result:** APPROVED
**Reviewer:** code-reviewer (MODEL)

**Findings:** none

**Passed:**
- [✓] AC1: every file exists — a.txt:1 holds the greeting
- [✓] AC2: nothing else changes — git diff --stat: 1 file changed

**Summary:** Looked at it."""


def counted(turn: dict[str, Any]) -> dict[str, Any]:
    return {**turn, "usage": {"input_tokens": REVIEWER_TOKENS, "output_tokens": 0}}


def project(tmp_path: Path, reviewer: list[dict[str, Any]],
            fixer: list[dict[str, Any]] | None = None) -> Path:
    script: dict[str, Any] = {"default": writes("a.txt", "hello\n"),
                              "agents": {"code-reviewer": reviewer}}
    if fixer is not None:
        script["groups"] = {"FIX-1": fixer}
    return make_project(tmp_path / "p", "SPEC-1", spec_text("SPEC-1", []), script)


def run(root: Path, *extra: str):
    return agentrun("run", "SPEC-1", *scripted(*extra, review=True), cwd=root)


def history(text: str) -> str:
    return text.split("\n## Review History\n\n", 1)[1]


def normalised(entry: str) -> str:
    entry = re.sub(r"\((\d{4}-\d\d-\d\d \d\d:\d\d)\)", "(DATE)", entry, count=1)
    return re.sub(r"\*\*Reviewer:\*\* code-reviewer \(.+\)", "**Reviewer:** code-reviewer "
                  "(MODEL)", entry, count=1)


def test_an_approved_run_is_complete_and_the_review_is_appended(tmp_path):
    root = project(tmp_path, [counted(review_turn(APPROVE))])
    proc = run(root)
    assert proc.returncode == 0, proc.stderr
    doc = proc.json
    assert doc["ok"] and doc["status"] == "complete" and doc["stop_reason"] is None
    assert doc["review"] == {"reviewed": True, "result": "APPROVED", "version": 1,
                             "skipped": None}
    groups = sum(sum(g["usage"].values()) for g in doc["groups"].values())
    assert doc["usage"]["input_tokens"] + doc["usage"]["output_tokens"] == \
        groups + REVIEWER_TOKENS  # the reviewer's tokens count in the run's totals
    text = (root / SPEC).read_text()
    assert status(text) == "done"
    assert normalised(history(text)) == ENTRY_V1 + "\n"  # the whole section, byte for byte
    summary = text.split("## Execution Summary", 1)[1].split("## Review History")[0]
    assert "**Result:** complete" in summary
    assert "**Review:** APPROVED (Review v1, 1 review(s))" in summary
    assert run_git(root, "show", f"HEAD:{SPEC}") == text.rstrip("\n")  # committed with it
    state_md = (root / ".specflow/STATE.md").read_text()
    assert "archive the spec" in state_md
    assert "Review: code-reviewer once the work is merged (fix cycles: 0)" in proc.stderr


def fixer() -> list[dict[str, Any]]:
    return writes("a.txt", "hello.\n", criteria=["every file exists"])


def test_a_fix_cycle_fixes_and_the_second_review_approves(tmp_path):
    root = project(tmp_path, [review_turn(APPROVE, [FINDING]), review_turn(APPROVE)],
                   fixer())
    proc = run(root, "--fix-cycles", "1")
    assert proc.returncode == 0, proc.stderr
    doc = proc.json
    assert doc["status"] == "complete" and doc["review"]["version"] == 2
    fix = doc["groups"]["FIX-1"]
    assert fix["status"] == "complete" and fix["merge_commit"]
    assert run_git(root, "show", "HEAD:a.txt") == "hello."
    text = (root / SPEC).read_text()
    assert status(text) == "done"
    entries = re.findall(r"^### (.+?) v(\d) ", history(text), re.M)
    assert entries == [("Review", "1"), ("Fix Response", "1"), ("Review", "2")]
    response = history(text).split("### Fix Response v1 ")[1].split("### Review v2")[0]
    assert "**Responding to:** Review v1" in response
    assert f"**Commits:** `{fix['commits'][0][:7]}`" in response
    assert "1. [✓] the greeting has no period — `a.txt` changed" in response


def test_changes_requested_leave_the_run_partial_and_agentrun_fix_works_from_the_review(
        tmp_path):
    """Two cases on one project: the run whose review requests changes, then `agentrun fix`
    answering that review."""
    root = project(tmp_path, [review_turn(APPROVE, [FINDING])])
    proc = run(root)
    assert proc.returncode == 1, proc.stderr
    doc = proc.json
    assert doc["status"] == "partial" and doc["stop_reason"] == "review"
    assert doc["review"]["result"] == "CHANGES_REQUESTED" and doc["review"]["version"] == 1
    assert doc["groups"]["single"]["status"] == "complete"  # the work itself merged
    text = (root / SPEC).read_text()
    assert status(text) == "review"
    assert "**Result:** CHANGES_REQUESTED" in history(text)
    assert "**Review:** CHANGES_REQUESTED (Review v1" in text
    state_md = (root / ".specflow/STATE.md").read_text()
    assert "agentrun fix SPEC-1" in state_md

    (root / ".specflow/script.yaml").write_text(yaml.safe_dump(
        {"agents": {"code-reviewer": [review_turn(APPROVE)]}, "groups": {"FIX-1": fixer()}}))
    run_git(root, "commit", "-qam", "a new script")
    proc = agentrun("fix", "SPEC-1", *FIX, "--json", cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert proc.json["status"] == "complete" and proc.json["review"]["version"] == 2
    text = (root / SPEC).read_text()
    assert "### Fix Response v1 (" in text and "### Review v2 (" in text
    assert status(text) == "done"
    assert run_git(root, "show", "HEAD:a.txt") == "hello."
    again = agentrun("fix", "SPEC-1", *FIX, cwd=root)  # approved: nothing open
    assert again.returncode == 2 and "nothing open to fix" in again.stderr


def test_a_reviewer_that_never_submits_is_no_approval(tmp_path):
    root = project(tmp_path, [{"text": "Looks fine to me."}])
    proc = run(root)
    assert proc.returncode == 1, proc.stderr
    doc = proc.json
    assert doc["status"] == "partial" and doc["stop_reason"] == "review"
    assert doc["review"]["reviewed"] is False and doc["reviews"][0]["error"]
    text = (root / SPEC).read_text()
    assert "## Review History" not in text and status(text) == "review"
    assert "**Review:** no review submitted — not approved" in text


def test_no_review_keeps_a_complete_run_complete_and_agentrun_fix_names_agentrun_review(
        tmp_path):
    """Two cases on one project: a run with --no-review, then `agentrun fix` with no review to
    work from."""
    root = project(tmp_path, [review_turn([])])
    proc = agentrun("run", "SPEC-1", *scripted(), cwd=root)
    assert proc.returncode == 0, proc.stderr
    doc = proc.json
    assert doc["status"] == "complete" and doc["reviews"] == []
    assert doc["review"] == {"reviewed": False, "result": None, "version": None,
                             "skipped": "--no-review"}
    text = (root / SPEC).read_text()
    assert status(text) == "review" and "## Review History" not in text
    assert "**Review:** not reviewed (--no-review)" in text
    assert "Review: skipped (--no-review)" in proc.stderr

    before = (root / SPEC).read_text()
    proc = agentrun("fix", "SPEC-1", *FIX, cwd=root)
    assert proc.returncode == 2, proc.stderr
    assert "has no review yet" in proc.stderr and "agentrun review SPEC-1" in proc.stderr
    assert "Traceback" not in proc.stderr and (root / SPEC).read_text() == before
