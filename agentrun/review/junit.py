"""A review as JUnit XML: one test case per acceptance criterion (not met → failure, cannot
tell → skipped, no review at all → an error case), plus one case for blocking findings."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from agentrun.report.junit import add_element, first_line, serialise
from agentrun.review.reviewer import SpecReview
from agentrun.review.verdict import BLOCKING_SEVERITIES, Judgement


def review_junit(result: SpecReview) -> str:
    root = ET.Element("testsuites", {"name": "agentrun review"})
    suite = add_element(root, "testsuite", name=result.spec_id)
    failures = errors = skipped = 0
    cls = f"agentrun.review.{result.spec_id}"
    if result.review is None:
        errors += 1
        case = add_element(suite, "testcase", classname=cls, name="review", file=str(result.path))
        add_element(case, "error", result.error, message=first_line(result.error, "no review"),
            type="no-review")
    judged = {c.criterion: c for c in result.review.criteria} if result.review else {}
    for number, text in enumerate(result.criteria, start=1):
        case = add_element(suite, "testcase", classname=cls, name=f"AC{number}: {text}",
                   file=str(result.path))
        verdict = judged.get(number)
        if verdict is None:
            skipped += 1
            add_element(case, "skipped", message="not reviewed")
        elif verdict.verdict == Judgement.MET and verdict.evidence.strip():
            add_element(case, "system-out", verdict.evidence)
        elif verdict.verdict == Judgement.CANNOT_TELL:
            skipped += 1
            add_element(case, "skipped", message=first_line(verdict.evidence, "cannot tell"))
        else:
            failures += 1
            add_element(case, "failure", verdict.evidence,
                message=first_line(verdict.evidence, "not met"), type="not-met")
    blocking = [f for f in (result.review.findings if result.review else [])
                if f.severity in BLOCKING_SEVERITIES]
    if result.review is not None:
        case = add_element(suite, "testcase", classname=cls, name="no critical or major findings",
                   file=str(result.path))
        if blocking:
            failures += 1
            lines = "\n".join(f"{f.severity} {f.file}: {f.issue} — fix: {f.fix}"
                              for f in blocking)
            add_element(case, "failure", lines,
                        message=f"{len(blocking)} blocking finding(s); first: "
                                f"{first_line(blocking[0].issue, '')}", type="findings")
    tests = len(suite)
    for element in (root, suite):
        for key, value in (("tests", tests), ("failures", failures), ("errors", errors),
                           ("skipped", skipped)):
            element.set(key, str(value))
    return serialise(root)
