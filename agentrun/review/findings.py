"""The current verdict on a spec's run, and its open findings: read from the run's record.

The run's execution state keeps every review's full verdict (`ReviewRecord`), and the spec's
`## Review History`, its criteria checkboxes and its Execution Summary are renderings of it.
Nothing is read back from the spec's text: a review written there by hand, by another tool or
by a worker's change counts for nothing here, so `agentrun fix`, `status` and every report
show the one latest review the run recorded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from agentrun.report.execution_state import ReviewRecord, RunState
from agentrun.review.verdict import ReviewResult, Severity


@dataclass
class OpenFinding:
    severity: str
    issue: str
    file: str = ""
    fix: str = ""

    @property
    def path(self) -> str:
        """The file without its `:line` and backticks."""
        return re.sub(r":\d+(?:-\d+)?$", "", self.file.strip().strip("`'").strip())

    def text(self) -> str:
        where = f" in `{self.file.strip('`')}`" if self.file.strip() else ""
        fix = f" — fix: {self.fix}" if self.fix.strip() else ""
        return f"[{self.severity}]{where}: {self.issue}{fix}"


@dataclass
class LastReview:
    version: int | None
    result: str
    findings: list[OpenFinding] = field(default_factory=list)
    not_passed: list[str] = field(default_factory=list)  # unmet criteria, as written
    judged: bool = True  # False: the review gave no verdict (an error, or incomplete)
    error: str | None = None

    @property
    def open(self) -> bool:
        """Something to fix: the review did not approve, and named what."""
        return self.result != ReviewResult.APPROVED and bool(self.findings or self.not_passed)

    @property
    def files(self) -> list[str]:
        return list(dict.fromkeys(f.path for f in self.findings if f.path))

    def describe(self) -> str:
        """"Review v3 (CHANGES_REQUESTED)", or what kept it from a verdict."""
        if self.judged:
            return f"Review v{self.version} ({self.result})"
        what = f"Review v{self.version} " if self.version else "the last review "
        return f"{what}({self.result}: {self.error or 'no verdict'})"


def last_review(state: RunState | None) -> LastReview | None:
    """The latest review the run recorded, or None when it has none."""
    if state is None or not state.reviews:
        return None
    return from_record(state.reviews[-1])


def from_record(record: ReviewRecord) -> LastReview:
    review = LastReview(record.version, record.result, judged=record.judged,
                        error=record.error)
    if not record.judged or record.verdict is None:
        return review
    verdict = record.verdict
    for finding in verdict.get("findings") or []:
        review.findings.append(OpenFinding(Severity(finding["severity"]),
                                           str(finding.get("issue") or ""),
                                           str(finding.get("file") or ""),
                                           str(finding.get("fix") or "")))
    review.findings.sort(key=lambda f: list(Severity).index(Severity(f.severity)))
    met = record.met() or []
    review.not_passed = [text for text, ok in zip(record.criteria, met, strict=False)
                         if not ok]
    return review
