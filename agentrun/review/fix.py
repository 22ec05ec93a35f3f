"""The fix cycle's two pieces of text: the assignment a fix worker gets (the open findings of
the last review and the files they name), and the `### Fix Response vN` entry that records,
per finding, what the fix's commits changed.

What "fixed" means here is what git shows (the finding's file changed in the fix's commits);
whether the fix is right is the next review's call, never the fix worker's word.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from agentrun.protocol import GroupAssignment
from agentrun.report.escape import inline
from agentrun.review.findings import LastReview
from agentrun.review.history import SECTION
from agentrun.spec import parse_spec
from agentrun.spec.writeback import append_to_section, next_version, replace_if_unchanged

FIX_WORD = "fix response"


def fix_group_id(version: int) -> str:
    """The fix worker's group (and batch) id: one per Fix Response, so branches never clash."""
    return f"FIX-{version}"


def fix_group(review: LastReview, version: int) -> GroupAssignment:
    """The open findings of `review` as one task group for a fresh worker."""
    tasks = [f"Fix finding {n} of Review v{review.version} {inline(f.text())}"
             for n, f in enumerate(review.findings, start=1)]
    tasks += [f"Meet the acceptance criterion the review found unmet: {inline(c)}"
              for c in review.not_passed]
    tasks.append("Change only what these findings need; commit the fixes")
    return GroupAssignment(id=fix_group_id(version),
                           title=f"Fix the findings of Review v{review.version}",
                           tasks=tasks, files=review.files)


def next_fix_version(spec_text: str) -> int:
    return next_version(spec_text, SECTION, FIX_WORD)


@dataclass
class FixOutcome:
    """What the fix worker's batch delivered, as verified and merged."""

    status: str
    commits: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)  # paths the fix's commits touched
    summary: str = ""
    error: str | None = None
    merged: bool = False


def render_fix_response(version: int, when: datetime, review: LastReview, worker: str,
                        outcome: FixOutcome) -> str:
    """`### Fix Response vN (date time)` in SpecFlow's shape, heading included."""
    commits = ", ".join(f"`{c[:7]}`" for c in outcome.commits) or "none"
    applied = (f"{outcome.status}, merged" if outcome.merged
               else f"{outcome.status}, not merged")
    out = [f"### Fix Response v{version} ({when:%Y-%m-%d %H:%M})",
           f"**Responding to:** Review v{review.version}",
           f"**Applied by:** {inline(worker)} ({applied})",
           f"**Commits:** {commits}", "", "**Fixes:**"]
    changed = set(outcome.changed) if outcome.merged else set()
    number = 0
    for finding in review.findings:
        number += 1
        if not finding.path:
            mark, note = "?", "names no file; see the next review"
        elif finding.path in changed:
            mark, note = "✓", f"`{inline(finding.path)}` changed"
        else:
            mark, note = "✗", f"`{inline(finding.path)}` not changed"
        out.append(f"{number}. [{mark}] {inline(finding.issue)} — {note}")
    for criterion in review.not_passed:
        number += 1
        out.append(f"{number}. [?] {inline(criterion)} — see the next review")
    if outcome.error:
        out += ["", f"**Error:** {inline(outcome.error)}"]
    if outcome.summary.strip():
        out += ["", f"**Summary:** {inline(outcome.summary)}"]
    return "\n".join(out)


def append_fix_response(path: Path, entry: str) -> None:
    """Append the entry under `## Review History`, every other byte unchanged."""
    text = path.read_text(encoding="utf-8")
    new = append_to_section(text, SECTION, entry)
    parse_spec(new, path)
    replace_if_unchanged(path, text, new, "fix")
