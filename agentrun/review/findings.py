"""The open findings of a spec's last review, read back from its `## Review History`.

The spec is the record: a review written by `agentrun review`, by a run, or by SpecFlow's own
`/sf:review` reads the same way (`**Result:**`, findings under `**Critical:**` / `**Major:**` /
`**Minor:**` as `N. **issue**` with `- File:` and `- Fix:` lines, unmet criteria under
`**Not Passed:**`), so `agentrun fix` works from whichever wrote it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from agentrun.review.history import SECTION
from agentrun.review.verdict import ReviewResult, Severity
from agentrun.spec.model import Spec

_REVIEW = re.compile(r"^###\s+Review\s+v(\d+)\b", re.I)
_HEADING = re.compile(r"^#{1,3}\s")
_SEVERITY = re.compile(r"^\*\*(Critical|Major|Minor)(?:\s+Issues)?:\*\*\s*$", re.I)
_ITEM = re.compile(r"^\d+\.\s+(?:\*\*(.+?)\*\*|(.+))\s*$")
_DETAIL = re.compile(r"^\s+-\s+(File|Fix|Issue):\s*(.*)$", re.I)
_NOT_PASSED = re.compile(r"^-\s+\[[✗x?\s]\]\s+(.*)$")


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
    version: int
    result: str
    findings: list[OpenFinding] = field(default_factory=list)
    not_passed: list[str] = field(default_factory=list)  # unmet criteria, as written

    @property
    def open(self) -> bool:
        """Something to fix: the review did not approve, and named what."""
        return self.result != ReviewResult.APPROVED and bool(self.findings or self.not_passed)

    @property
    def files(self) -> list[str]:
        return list(dict.fromkeys(f.path for f in self.findings if f.path))


def last_review(spec: Spec) -> LastReview | None:
    """The last `### Review vN` of the spec, or None when it has no review."""
    section = spec.section(SECTION)
    if section is None:
        return None
    lines = section.body.splitlines()
    starts = [(i, int(m.group(1))) for i, line in enumerate(lines)
              if (m := _REVIEW.match(line))]
    if not starts:
        return None
    first, version = starts[-1]
    body: list[str] = []
    for line in lines[first + 1:]:
        if _HEADING.match(line):
            break
        body.append(line)
    return _parse(version, body)


def _parse(version: int, lines: list[str]) -> LastReview:
    review = LastReview(version, "")
    severity: str | None = None
    in_not_passed = False
    for line in lines:
        stripped = line.strip()
        if stripped.lower().startswith("**result:**"):
            review.result = stripped[len("**result:**"):].strip().upper()
            continue
        if match := _SEVERITY.match(stripped):
            severity, in_not_passed = match.group(1).lower(), False
            continue
        if stripped.startswith("**"):
            severity, in_not_passed = None, stripped.lower().startswith("**not passed:**")
            continue
        if in_not_passed and (match := _NOT_PASSED.match(stripped)):
            review.not_passed.append(match.group(1).strip())
        elif severity and (match := _ITEM.match(stripped)):
            issue = (match.group(1) or match.group(2) or "").strip()
            review.findings.append(OpenFinding(Severity(severity), issue))
        elif severity and review.findings and (match := _DETAIL.match(line)):
            key, value = match.group(1).lower(), match.group(2).strip()
            finding = review.findings[-1]
            if key == "file":
                finding.file = value.strip("`")
            elif key == "fix":
                finding.fix = value
            else:
                finding.issue = f"{finding.issue}: {value}"
    return review
