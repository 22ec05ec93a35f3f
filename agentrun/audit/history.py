"""The `### Audit vN (date time)` entry an audit appends under `## Audit History`.

The shape follows what SpecFlow specs already hold (Status, Critical, Recommendations numbered
on from the critical issues, Comment), plus the measured context estimate as a table, so a
reader of the spec sees the figures the verdict rests on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from agentrun.audit.estimates import ContextEstimate, UnitEstimate, approx

_BLOCK_START = re.compile(r"#{1,6}(?:\s|$)|>|`{3}|~{3}|[-+*](?:\s|$)|\d{1,9}[.)](?:\s|$)"
                         r"|[-=_*]{3,}|<[A-Za-z!/?]")


@dataclass
class EntryData:
    """Everything one entry says; the auditor module fills it from the audit."""

    version: int
    when: datetime
    status: str
    critical: list[str] = field(default_factory=list)
    recommendations: list[str] = field(default_factory=list)
    dimensions: dict[str, str] = field(default_factory=dict)
    comment: str = ""
    estimate: ContextEstimate | None = None  # the spec as audited
    proposed: ContextEstimate | None = None  # the auditor's proposed groups, if any
    static_notes: list[str] = field(default_factory=list)  # static warnings
    static_stop: bool = False  # critical static findings: the auditor was not run
    tasks_note: str | None = None  # what happened to proposed task groups


def _limit_mark(unit: UnitEstimate, limit: float, applies: bool = True) -> str:
    if not applies:
        return f"— (workers; limit {limit:.0%} applies to one context)"
    return f"over {limit:.0%}" if unit.over else "ok"


def estimate_table(est: ContextEstimate, proposed: ContextEstimate | None = None) -> list[str]:
    """A markdown table: one row per group (the proposed ones when the spec has none), then
    the total for one context."""
    shown = est if est.groups or proposed is None else proposed
    label = " (proposed)" if shown is proposed and shown is not est else ""
    rows = ["| Group | Tokens | Context | Limit |", "|-------|--------|---------|-------|"]
    for unit in shown.groups:
        rows.append(f"| {unit.id}{label} | {unit.tokens:,} | {approx(unit.share)} | "
                    f"{_limit_mark(unit, est.thresholds.group_max)} |")
    total, label = est.total, "Total (one context)"
    if shown is not est:
        total, label = shown.total, "Total (one context, with the proposed groups)"
    rows.append(f"| {label} | {total.tokens:,} | {approx(total.share)} | "
                f"{_limit_mark(total, est.thresholds.total_max, shown.single_context)} |")
    return rows


def one_line(text: str) -> str:
    """Model text as one markdown line that cannot open a block (heading, fence, quote, list)
    and so cannot change the structure of the spec around it."""
    text = " ".join(text.split())
    if _BLOCK_START.match(text):
        text = "\\" + text
    return text


def _numbered(items: list[str], start: int) -> list[str]:
    return [f"{n}. {one_line(item)}" for n, item in enumerate(items, start=start)]


def _dimension_name(key: str) -> str:
    text = key.replace("_", " ").strip()
    return text[:1].upper() + text[1:]


def render_entry(data: EntryData) -> str:
    """The entry's markdown, heading included, with no trailing blank line."""
    out = [f"### Audit v{data.version} ({data.when:%Y-%m-%d %H:%M})",
           f"**Status:** {data.status}"]
    if data.static_stop:
        out += ["", "**Static Checks:** critical findings; the auditor was not run. Fix them "
                    "and audit again."]
    est = data.estimate
    if est is not None:
        biggest = max(est.groups, key=lambda u: u.tokens, default=None)
        line = (f"**Context Estimate:** {approx(est.total.share)} total "
                f"({est.total.tokens:,} tokens of the {est.window:,}-token window of "
                f"{est.model}, counted with {est.method})")
        if biggest is not None:
            line += f"; largest group {biggest.id} {approx(biggest.share)}"
        out += ["", line, "", *estimate_table(est, data.proposed)]
    if data.dimensions:
        out += ["", "**Dimensions Evaluated:**"]
        out += [f"- {one_line(_dimension_name(k))}: {' '.join(v.split())}"
                for k, v in data.dimensions.items()]
    if data.critical:
        out += ["", "**Critical:**", *_numbered(data.critical, 1)]
    if data.recommendations:
        out += ["", "**Recommendations:**",
                *_numbered(data.recommendations, len(data.critical) + 1)]
    if data.static_notes:
        out += ["", "**Static Warnings:**", *(f"- {one_line(n)}" for n in data.static_notes)]
    if data.tasks_note:
        out += ["", f"**Task Groups:** {data.tasks_note}"]
    if data.comment.strip():
        out += ["", f"**Comment:** {' '.join(data.comment.split())}"]
    return "\n".join(out)
