"""The reviewer's answer, and the rule that turns it into APPROVED or CHANGES_REQUESTED.

The reviewer judges each acceptance criterion and lists findings; it does not pick the result.
Code does: `decide` approves only when every criterion is met *with evidence* and nothing
critical or major was found, so a reviewer that waves a change through without looking cannot
approve it. The answer is the reviewer task's result model (`review_model(n)` knows how many
criteria the spec has), so a review that skips a criterion, or calls one met without evidence,
is refused in the conversation and corrected there.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator


class ReviewResult(StrEnum):
    APPROVED = "APPROVED"
    CHANGES_REQUESTED = "CHANGES_REQUESTED"
    INCOMPLETE = "INCOMPLETE"  # the change could not be shown whole (review/diff.py): no verdict


class Judgement(StrEnum):
    MET = "met"
    NOT_MET = "not_met"
    CANNOT_TELL = "cannot_tell"


class Severity(StrEnum):
    CRITICAL = "critical"
    MAJOR = "major"
    MINOR = "minor"


BLOCKING_SEVERITIES = (Severity.CRITICAL, Severity.MAJOR)


def _word(value: Any) -> Any:
    """`Not met`, `NOT-MET`, `cannot tell` -> `not_met`, `cannot_tell`."""
    if isinstance(value, str):
        return re.sub(r"[\s\-]+", "_", value.strip()).lower()
    return value


class CriterionVerdict(BaseModel):
    """The reviewer's judgement of one acceptance criterion."""

    model_config = ConfigDict(extra="ignore")

    criterion: int = Field(validation_alias=AliasChoices("criterion", "number", "id"),
                           description="The criterion's number in the list you were given "
                                       "(1, 2, ...).")
    verdict: Judgement = Field(validation_alias=AliasChoices("verdict", "status", "result"),
                               description="met, not_met or cannot_tell.")
    evidence: str = Field("", description=(
        "What shows it: a `file:line`, a test name, or a command you ran and its output. "
        "Required when met."))

    @field_validator("criterion", mode="before")
    @classmethod
    def _number(cls, value: Any) -> Any:
        if isinstance(value, str):  # "AC2", "#2", "2"
            match = re.fullmatch(r"\s*(?:AC|#)?\s*(\d{1,4})\s*", value, re.I)
            return int(match.group(1)) if match else value
        return value

    @field_validator("verdict", mode="before")
    @classmethod
    def _verdict(cls, value: Any) -> Any:
        return _word(value)

    @field_validator("evidence", mode="before")
    @classmethod
    def _evidence(cls, value: Any) -> Any:
        return "" if value is None else value


class ReviewFinding(BaseModel):
    """A problem in the change, ranked."""

    model_config = ConfigDict(extra="ignore")

    severity: Severity = Field(description="critical, major or minor.")
    file: str = Field("", description="The file (and line) it is in: `path:line`.")
    issue: str = Field(min_length=1, description="What is wrong.")
    fix: str = Field("", description="How to fix it.")

    @field_validator("severity", mode="before")
    @classmethod
    def _severity(cls, value: Any) -> Any:
        return _word(value)

    @field_validator("file", "fix", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        return "" if value is None else value


class Review(BaseModel):
    """The reviewer's answer: every acceptance criterion judged, and the findings."""

    model_config = ConfigDict(extra="ignore")

    expected_criteria: ClassVar[int] = 0  # set by review_model: the spec's criteria

    criteria: list[CriterionVerdict] = Field(
        default_factory=list,
        validation_alias=AliasChoices("criteria", "acceptance_criteria"),
        description="One entry per acceptance criterion, in order.")
    findings: list[ReviewFinding] = Field(default_factory=list, description=(
        "Problems found, each with severity, file, issue and fix; empty when there are none."))
    summary: str = Field("", description="One or two sentences on the change as a whole.")

    @field_validator("findings", mode="before")
    @classmethod
    def _findings(cls, value: Any) -> Any:
        return [] if value is None else value

    @field_validator("summary", mode="before")
    @classmethod
    def _summary(cls, value: Any) -> Any:
        return "" if value is None else value

    @model_validator(mode="after")
    def _complete(self) -> Review:
        count = type(self).expected_criteria
        numbers = [c.criterion for c in self.criteria]
        wrong = sorted({n for n in numbers if not 1 <= n <= count})
        if wrong:
            raise ValueError(f"criteria: no acceptance criterion numbered "
                             f"{', '.join(map(str, wrong))}; they are numbered 1 to {count}")
        twice = sorted({n for n in numbers if numbers.count(n) > 1})
        if twice:
            raise ValueError(f"criteria: criterion {', '.join(map(str, twice))} judged more "
                             "than once")
        missing = [n for n in range(1, count + 1) if n not in numbers]
        if missing:
            raise ValueError(f"criteria: criterion {', '.join(map(str, missing))} not judged; "
                             "give every criterion a verdict (cannot_tell when you cannot "
                             "check it)")
        bare = [c.criterion for c in self.criteria
                if c.verdict == Judgement.MET and not c.evidence.strip()]
        if bare:
            raise ValueError(f"criteria: criterion {', '.join(map(str, bare))} is met without "
                             "evidence; name a file:line, a test, or a command and its output")
        return self


def review_model(criteria: int) -> type[Review]:
    """The result model for a spec with `criteria` acceptance criteria."""
    return type("Review", (Review,), {"__module__": __name__, "expected_criteria": criteria,
                                      "__annotations__": {"expected_criteria": ClassVar[int]}})


def decide(review: Review, criteria: int) -> ReviewResult:
    """APPROVED only when each of the spec's `criteria` is met with evidence and no finding is
    critical or major; the reviewer's own words never approve anything."""
    if criteria == 0:
        return ReviewResult.CHANGES_REQUESTED
    met = {c.criterion for c in review.criteria
           if c.verdict == Judgement.MET and c.evidence.strip()}
    if any(n not in met for n in range(1, criteria + 1)):
        return ReviewResult.CHANGES_REQUESTED
    if any(f.severity in BLOCKING_SEVERITIES for f in review.findings):
        return ReviewResult.CHANGES_REQUESTED
    return ReviewResult.APPROVED


_WORST = {Judgement.MET: 0, Judgement.CANNOT_TELL: 1, Judgement.NOT_MET: 2}


def combine(reviews: list[Review], criteria: int) -> Review:
    """The reviews of a change shown in several parts as one, conservatively: each criterion
    takes its worst verdict across the parts (not met, then cannot tell, then met), with every
    part's evidence; every finding of every part counts."""
    if len(reviews) == 1:
        return reviews[0]
    verdicts: list[dict[str, Any]] = []
    for number in range(1, criteria + 1):
        judged = [c for r in reviews for c in r.criteria if c.criterion == number]
        worst = max(judged, key=lambda c: _WORST[c.verdict])
        evidence = "; ".join(f"part {n}: {c.evidence.strip()}"
                             for n, r in enumerate(reviews, start=1) for c in r.criteria
                             if c.criterion == number and c.evidence.strip())
        verdicts.append({"criterion": number, "verdict": worst.verdict, "evidence": evidence})
    summary = " ".join(f"Part {n}: {r.summary.strip()}" for n, r in enumerate(reviews, start=1)
                       if r.summary.strip())
    return review_model(criteria).model_validate({
        "criteria": verdicts, "summary": summary,
        "findings": [f.model_dump() for r in reviews for f in r.findings]})
