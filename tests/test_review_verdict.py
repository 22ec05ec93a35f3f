"""The review rule: code, not the reviewer, decides APPROVED."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentrun.review.verdict import Review, ReviewResult, decide, review_model


def review(criteria, findings=()) -> Review:
    return review_model(len(criteria)).model_validate(
        {"criteria": [{"criterion": n, "verdict": v, "evidence": e}
                      for n, (v, e) in enumerate(criteria, start=1)],
         "findings": [{"severity": s, "file": "x.py:1", "issue": "i", "fix": "f"}
                      for s in findings]})


def test_every_criterion_met_with_evidence_and_only_minor_findings_approves():
    r = review([("met", "x.py:1"), ("met", "tests/test_x.py::test_y")], ["minor"])
    assert decide(r, 2) == ReviewResult.APPROVED


@pytest.mark.parametrize("verdict", ["not_met", "cannot_tell"])
def test_a_criterion_not_met_or_unknown_requests_changes(verdict):
    assert decide(review([("met", "x.py:1"), (verdict, "why")]), 2) \
        == ReviewResult.CHANGES_REQUESTED


@pytest.mark.parametrize("severity", ["critical", "major"])
def test_a_blocking_finding_requests_changes(severity):
    assert decide(review([("met", "x.py:1")], [severity]), 1) \
        == ReviewResult.CHANGES_REQUESTED


def test_a_criterion_the_review_does_not_cover_is_not_met():
    r = review([("met", "x.py:1")])
    assert decide(r, 2) == ReviewResult.CHANGES_REQUESTED


def test_met_without_evidence_is_refused():
    with pytest.raises(ValidationError, match="criterion 1 is met without evidence"):
        review([("met", "  ")])


def test_missing_unknown_and_repeated_criteria_are_refused():
    model = review_model(2)
    with pytest.raises(ValidationError, match="criterion 2 not judged"):
        model.model_validate({"criteria": [{"criterion": 1, "verdict": "met",
                                            "evidence": "e"}]})
    with pytest.raises(ValidationError, match="numbered 3"):
        model.model_validate({"criteria": [{"criterion": n, "verdict": "not_met"}
                                           for n in (1, 2, 3)]})
    with pytest.raises(ValidationError, match="more than once"):
        model.model_validate({"criteria": [{"criterion": n, "verdict": "not_met"}
                                           for n in (1, 1, 2)]})


def test_spellings_models_use_are_read():
    r = review_model(1).model_validate({"criteria": [
        {"criterion": "AC1", "verdict": "Cannot tell"}],
        "findings": [{"severity": "MAJOR", "issue": "x"}]})
    assert r.criteria[0].verdict == "cannot_tell" and r.findings[0].severity == "major"
