"""The `### Review vN (date time)` entry a review appends under `## Review History`.

The entry renders the run's record of the review (`ReviewRecord`); nothing reads it back. The
shape is SpecFlow's (Result, Reviewer, Findings by severity with File/Issue/Fix, Passed with
`[✓]` lines), so specs reviewed here read like the ones reviewed there. Everything the model
wrote goes through `inline`: it can be shown, never open a heading or a fence.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from agentrun.report.escape import inline
from agentrun.review.verdict import Judgement, Review, ReviewResult, Severity

SECTION = "Review History"
_MARK = {Judgement.MET: "✓", Judgement.NOT_MET: "✗", Judgement.CANNOT_TELL: "?"}
BACKTICK, QUOTE = "`", "'"
_WORDS = {Judgement.NOT_MET: "not met", Judgement.CANNOT_TELL: "cannot tell"}


@dataclass
class ReviewEntry:
    version: int
    when: datetime
    result: ReviewResult
    reviewer: str  # "code-reviewer (model)"
    criteria: list[str]  # the spec's acceptance criteria, in order
    review: Review


def _criterion_line(number: int, text: str, judgement: Judgement, evidence: str) -> str:
    line = f"- [{_MARK[judgement]}] AC{number}: {inline(text)}"
    if judgement in _WORDS:
        line += f" — {_WORDS[judgement]}"
    return line + (f" — {inline(evidence)}" if evidence.strip() else "")


def render_entry(entry: ReviewEntry) -> str:
    """The entry's markdown, heading included, with no trailing blank line."""
    review = entry.review
    out = [f"### Review v{entry.version} ({entry.when:%Y-%m-%d %H:%M})",
           f"**Result:** {entry.result}", f"**Reviewer:** {inline(entry.reviewer)}", ""]
    if review.findings:
        out.append("**Findings:**")
        number = 0
        for severity in Severity:
            found = [f for f in review.findings if f.severity == severity]
            if not found:
                continue
            out += ["", f"**{severity.capitalize()}:**"]
            for finding in found:
                number += 1
                out.append(f"{number}. **{inline(finding.issue)}**")
                if finding.file.strip():
                    out.append(f"   - File: `{inline(finding.file).replace(BACKTICK, QUOTE)}`")
                if finding.fix.strip():
                    out.append(f"   - Fix: {inline(finding.fix)}")
    else:
        out.append("**Findings:** none")
    judged = {c.criterion: c for c in review.criteria}
    passed: list[str] = []
    open_: list[str] = []
    for number, text in enumerate(entry.criteria, start=1):
        verdict = judged.get(number)
        judgement = verdict.verdict if verdict else Judgement.CANNOT_TELL
        evidence = verdict.evidence if verdict else ""
        line = _criterion_line(number, text, judgement, evidence)
        (passed if judgement == Judgement.MET and evidence.strip() else open_).append(line)
    if passed:
        out += ["", "**Passed:**", *passed]
    if open_:
        out += ["", "**Not Passed:**", *open_]
    if review.summary.strip():
        out += ["", f"**Summary:** {inline(review.summary)}"]
    return "\n".join(out)


def render_incomplete(version: int, when: datetime, reviewer: str, reason: str) -> str:
    """The entry of a review that could not be shown the whole change: no verdict."""
    return "\n".join([f"### Review v{version} ({when:%Y-%m-%d %H:%M})",
                      f"**Result:** {ReviewResult.INCOMPLETE}",
                      f"**Reviewer:** {inline(reviewer)}", "",
                      f"**Not reviewed:** {inline(reason)}"])
