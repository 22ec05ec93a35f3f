"""The auditor's verdict: the JSON object its final message carries, and how to read it.

The model's answer is data to check, not a fact: `parse_verdict` finds the one JSON object in
the reply (bare or in a ```json fence), validates it, and raises `VerdictError` with a message
short enough to send back to the model when something is wrong.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from agentrun.spec.refs import is_none, parse_group_cell

Status = Literal["APPROVED", "NEEDS_REVISION", "NEEDS_DECOMPOSITION"]
STATUSES: tuple[str, ...] = ("APPROVED", "NEEDS_REVISION", "NEEDS_DECOMPOSITION")

_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\r?\n(.*?)\r?\n[ \t]*```", re.S)


class VerdictError(ValueError):
    """The reply holds no usable verdict; the message says what is wrong, for a re-ask."""


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

    id: str
    title: str = ""
    tasks: list[str] = Field(min_length=1)
    dependencies: list[str] = Field(default_factory=list,
                                    validation_alias=AliasChoices("dependencies", "depends_on",
                                                                  "deps"))
    files: list[str] = Field(default_factory=list)

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


class Verdict(BaseModel):
    """What the auditor returns (see agents/spec-auditor.md for the schema it is shown)."""

    model_config = ConfigDict(extra="ignore")

    status: Status = Field(validation_alias=AliasChoices("status", "verdict"))
    critical_issues: list[str] = Field(
        default_factory=list, validation_alias=AliasChoices("critical_issues", "critical"))
    recommendations: list[str] = Field(default_factory=list)
    dimensions: dict[str, str] = Field(default_factory=dict)
    comment: str = ""
    task_groups: list[ProposedGroup] = Field(
        default_factory=list,
        validation_alias=AliasChoices("task_groups", "proposed_groups", "groups"))

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
    def _consistent(self) -> Verdict:
        if self.status == "APPROVED" and self.critical_issues:
            raise ValueError(f"status is APPROVED but {len(self.critical_issues)} critical "
                             "issue(s) are listed; use NEEDS_REVISION, or move them to "
                             "recommendations")
        ids = [g.id for g in self.task_groups]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"task_groups defines {', '.join(dupes)} more than once")
        return self


def extract_json(text: str) -> Any:
    """The JSON object of a reply: a ```json fence (the last one that parses), else the first
    `{...}` that parses. Raises VerdictError when there is none."""
    for block in reversed(_FENCE.findall(text)):
        try:
            return json.loads(block)
        except json.JSONDecodeError:
            continue
    decoder = json.JSONDecoder()
    first_error: json.JSONDecodeError | None = None
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError as exc:
            first_error = first_error or exc
            continue
        if isinstance(value, dict):
            return value
    if first_error is not None:
        raise VerdictError(f"the reply's JSON does not parse: {first_error.msg} at line "
                           f"{first_error.lineno} column {first_error.colno}")
    raise VerdictError("the reply holds no JSON object")


def parse_verdict(text: str) -> Verdict:
    """Validate the verdict in `text`; VerdictError names every problem found."""
    if not text or not text.strip():
        raise VerdictError("the reply is empty")
    data = extract_json(text)
    if not isinstance(data, dict):
        raise VerdictError("the verdict must be one JSON object")
    try:
        return Verdict.model_validate(data)
    except ValidationError as exc:
        raise VerdictError(_describe(exc)) from None


def _describe(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors()[:8]:
        where = ".".join(str(p) for p in err["loc"]) or "verdict"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "literal_error" and err["loc"][:1] == ("status",):
            msg = f"must be one of {', '.join(STATUSES)}"
        problems.append(f"{where}: {msg}")
    return "invalid verdict: " + "; ".join(problems)

