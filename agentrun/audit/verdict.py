"""The auditor's verdict: the result model its `submit_result` must carry.

The model's answer is data to check, not a fact. The verdict is the auditor task's output
model: its JSON schema is what the auditor is shown, and what it submits is validated against
it in the conversation (a refusal names the field to fix). The validators are lenient about
spellings models use (`verdict` for `status`, issues as objects, `Group 2` for `G2`) and strict
about meaning (a known status, no critical issue in an approval, well-formed group ids).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from agentrun.spec.refs import is_none, parse_group_cell

AuditStatus = Literal["APPROVED", "NEEDS_REVISION", "NEEDS_DECOMPOSITION"]


def _text_items(value: Any) -> Any:
    """Issues may come as strings or as `{title, detail}` objects; keep them as text."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if not isinstance(value, list):
        return value
    out = []
    for item in value:
        if isinstance(item, dict):
            title = str(item.get("title") or item.get("issue") or item.get("summary") or "")
            detail = str(item.get("detail") or item.get("description") or item.get("fix")
                         or "")
            item = f"**{title}**: {detail}" if title and detail else (title or detail)
        if isinstance(item, str) and item.strip():
            out.append(" ".join(item.split()))
        elif not isinstance(item, str):
            out.append(item)  # left for pydantic to reject with a clear path
    return out


def group_ref(text: str) -> str:
    """`G02`, `g2`, `Group 2` -> `G2`; anything else is kept as written (an unknown group)."""
    parsed = parse_group_cell(text.strip())
    if parsed is not None and not parsed[2]:
        return parsed[0]
    return text.strip()


class ProposedGroup(BaseModel):
    """A task group the auditor proposes; written into the spec only with `--write`."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field(description="G1, G2, ...")
    title: str = Field("", description="A short title.")
    tasks: list[str] = Field(min_length=1, description=(
        "Concrete tasks; name files in backticks."))
    dependencies: list[str] = Field(
        default_factory=list, validation_alias=AliasChoices("dependencies", "depends_on", "deps"),
        description="The groups whose output this one needs. No waves: they are computed.")
    files: list[str] = Field(default_factory=list,
                             description="The files the group creates or modifies.")

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            value = f"G{value}"
        if isinstance(value, str):
            parsed = parse_group_cell(value.strip())
            if parsed is None or parsed[2] or parsed[1]:
                raise ValueError(f"group id {value!r} is not of the form G1, G2, ...")
            return parsed[0]
        return value

    @field_validator("title", mode="before")
    @classmethod
    def _title(cls, value: Any) -> Any:
        return " ".join(value.split()) if isinstance(value, str) else value

    @field_validator("tasks", mode="before")
    @classmethod
    def _tasks(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [" ".join(t.split()) if isinstance(t, str) else t for t in value
                    if not (isinstance(t, str) and not t.strip())]
        return value

    @field_validator("dependencies", mode="before")
    @classmethod
    def _deps(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str):
            value = [] if is_none(value) else re.split(r"\s*[,;]\s*", value.strip())
        if isinstance(value, list):
            return [group_ref(d) if isinstance(d, str) else d for d in value
                    if not (isinstance(d, str) and not d.strip())]
        return value

    @field_validator("files", mode="before")
    @classmethod
    def _files(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str):
            value = value.split(",")
        if isinstance(value, list):
            return [f.strip().strip("`").strip() for f in value if isinstance(f, str)
                    and f.strip().strip("`").strip()]
        return value


class AuditVerdict(BaseModel):
    """The auditor's verdict on the spec."""

    model_config = ConfigDict(extra="ignore")

    status: AuditStatus = Field(validation_alias=AliasChoices("status", "verdict"), description=(
        "APPROVED when nothing blocks execution; NEEDS_REVISION when something must be fixed "
        "first; NEEDS_DECOMPOSITION when the spec is too large for its workers."))
    critical_issues: list[str] = Field(
        default_factory=list, validation_alias=AliasChoices("critical_issues", "critical"),
        description="What blocks execution, each with how to fix it; empty when APPROVED.")
    recommendations: list[str] = Field(default_factory=list,
                                       description="Improvements that do not block execution.")
    dimensions: dict[str, str] = Field(default_factory=dict, description=(
        'Each dimension judged: "PASS", "CONCERN" or "FAIL", optionally followed by " — " '
        "and a reason."))
    comment: str = Field("", description="One or two sentences on the overall state.")
    task_groups: list[ProposedGroup] = Field(
        default_factory=list,
        validation_alias=AliasChoices("task_groups", "proposed_groups", "groups"),
        description="Proposed task groups, only when the spec has none or they must change.")

    @field_validator("status", mode="before")
    @classmethod
    def _status(cls, value: Any) -> Any:
        if isinstance(value, str):
            return re.sub(r"[\s\-]+", "_", value.strip()).upper()
        return value

    @field_validator("critical_issues", "recommendations", mode="before")
    @classmethod
    def _issues(cls, value: Any) -> Any:
        return _text_items(value)

    @field_validator("dimensions", mode="before")
    @classmethod
    def _dimensions(cls, value: Any) -> Any:
        if value is None:
            return {}
        if isinstance(value, list):  # [{"name": ..., "result": ..., "note": ...}]
            out = {}
            for item in value:
                if not isinstance(item, dict) or "name" not in item:
                    return value
                out[str(item["name"])] = " — ".join(
                    str(item[k]) for k in ("result", "note") if item.get(k))
            return out
        if isinstance(value, dict):
            return {str(k): (" — ".join(str(v[k2]) for k2 in ("result", "note") if v.get(k2))
                             if isinstance(v, dict) else v) for k, v in value.items()}
        return value

    @field_validator("comment", mode="before")
    @classmethod
    def _comment(cls, value: Any) -> Any:
        return "" if value is None else value

    @model_validator(mode="after")
    def _consistent(self) -> AuditVerdict:
        if self.status == "APPROVED" and self.critical_issues:
            raise ValueError(f"status is APPROVED but {len(self.critical_issues)} critical "
                             "issue(s) are listed; use NEEDS_REVISION, or move them to "
                             "recommendations")
        ids = [g.id for g in self.task_groups]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"task_groups defines {', '.join(dupes)} more than once")
        return self

