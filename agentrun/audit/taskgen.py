"""Proposed task groups -> an `## Implementation Tasks` section, checked before it is written.

The waves in the generated tables are computed here from the dependencies, never taken from the
model, and the estimates come from the measurement. A proposal with a cycle or an unknown group
is rejected (PlanError) before any text is made. The new text is then parsed and planned again,
exactly as `agentrun run` will read it, and must give back the proposed groups and waves; if it
does not, the proposal is rejected too, so a spec never gains tasks that would run differently
from what the audit reported.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agentrun.audit.estimates import UnitEstimate, approx
from agentrun.audit.verdict import ProposedGroup
from agentrun.core.errors import PlanError, SpecError
from agentrun.plan import Plan, build_plan, compute_layers
from agentrun.spec import frontmatter, parse_spec
from agentrun.spec.groups import IMPL_TITLES
from agentrun.spec.markdown import norm_title
from agentrun.spec.model import Spec, TaskGroup
from agentrun.spec.refs import looks_like_path, unique
from agentrun.spec.writeback import _eol, _lines, upsert_section

TASKS_SECTION = "Implementation Tasks"
INSERT_BEFORE = ("audit history", "execution summary")  # the new section goes above these
_RULE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_CODE = re.compile(r"`([^`\r\n]+)`")


@dataclass
class GeneratedTasks:
    groups: list[TaskGroup]  # the proposal as task groups (ids normalised, files completed)
    section: str  # the markdown body of `## Implementation Tasks`
    text: str  # the whole spec with the section in place
    spec: Spec  # `text` parsed again
    plan: Plan  # `spec` planned again: what `agentrun run` will do


def proposal_groups(proposed: list[ProposedGroup]) -> list[TaskGroup]:
    """Task groups from the proposal. A group's files are the ones it lists plus the paths it
    quotes in backticks (the parser reads both, so the plan must count both)."""
    groups = []
    for p in proposed:
        quoted = [m for text in (p.title, *p.tasks) for m in _CODE.findall(text)]
        files = [f for f in unique([*p.files, *(q.strip() for q in quoted)])
                 if looks_like_path(f)]
        groups.append(TaskGroup(id=p.id, title=p.title, tasks=list(p.tasks),
                                dependencies=unique(list(p.dependencies)), files=files))
    return groups


def check_proposal(groups: list[TaskGroup]) -> list[list[str]]:
    """The dependency layers of the proposal; PlanError for a cycle or an unknown group."""
    if not groups:
        raise PlanError("the auditor proposed no task groups",
                        hint="nothing to write; run the audit again or add the groups by hand")
    return compute_layers(groups)


def _cell(text: str) -> str:
    """Text safe inside one table cell: no line breaks, pipes escaped, no stray `<br>`."""
    text = " ".join(text.split())
    text = re.sub(r"<(\s*br\b)", r"&lt;\1", text, flags=re.I)
    return text.replace("|", "\\|")


def _estimate_cell(unit: UnitEstimate | None) -> str:
    if unit is None:
        return "—"
    return f"{approx(unit.share)} ({unit.tokens:,} tokens)"


def render_section(groups: list[TaskGroup], layout: Plan, detected: Plan,
                   estimates: Mapping[str, UnitEstimate] | None = None) -> str:
    """The section body: Task Groups table, Execution Plan table, mode and workers.

    `layout` is the plan with every dependency layer as its own wave (sub-waves where groups
    share a file); `detected` is the plan `agentrun run` will choose, for the mode line.
    """
    estimates = estimates or {}
    layer_of = {gid: n for n, layer in enumerate(layout.layers, start=1) for gid in layer}
    rows = ["| Group | Wave | Title | Tasks | Files | Dependencies | Est. Context |",
            "|-------|------|-------|-------|-------|--------------|--------------|"]
    for g in groups:
        files = ", ".join(f"`{f}`" for f in g.files) or "—"
        deps = ", ".join(g.dependencies) or "—"
        tasks = "<br>".join(_cell(t) for t in g.tasks)
        rows.append(f"| {g.id} | {layer_of[g.id]} | {_cell(g.title) or '—'} | {tasks} | "
                    f"{files} | {deps} | {_estimate_cell(estimates.get(g.id))} |")
    plan_rows = ["| Wave | Groups | Parallel? | Workers |",
                 "|------|--------|-----------|---------|"]
    for wave in layout.waves:
        parallel = "Yes" if len(wave.batches) > 1 else "No"
        plan_rows.append(f"| {wave.label} | {', '.join(wave.groups)} | {parallel} | "
                         f"{len(wave.batches)} |")
    widest = max((len(w.batches) for w in layout.waves), default=1)
    lines = ["### Task Groups", "", *rows, "", "### Execution Plan", "", *plan_rows, "",
             f"**Execution mode:** {detected.mode} ({detected.mode_reason})",
             f"**Total workers needed:** {widest} (max in any wave)"]
    return "\n".join(lines) + "\n"


def _existing_title(spec: Spec) -> str | None:
    for sec in spec.sections:
        if sec.level == 2 and norm_title(sec.title).startswith(IMPL_TITLES):
            return sec.title
    return None


def place_section(text: str, spec: Spec, body: str) -> str:
    """Replace the spec's Implementation Tasks section, or add one above `## Audit History`
    (or `## Execution Summary`), or at the end. Every other byte is kept."""
    title = _existing_title(spec)
    if title is not None:
        return upsert_section(text, title, body)
    anchor = next((s for s in spec.sections
                   if s.level == 2 and norm_title(s.title) in INSERT_BEFORE), None)
    if anchor is None:
        return upsert_section(text, TASKS_SECTION, body)
    lines = _lines(text)
    block = frontmatter.locate(text)
    floor = block.span.stop if block is not None else 0
    at = anchor.start
    while at > floor and (not lines[at - 1].strip() or _RULE.match(lines[at - 1].rstrip("\r\n"))):
        at -= 1  # above the blank lines and `---` that separate the sections
    eol = _eol(text)
    piece = [f"## {TASKS_SECTION}{eol}", eol, *(line + eol for line in body.splitlines())]
    if at > 0:
        piece.insert(0, eol)  # a blank line after the content above
    if lines[at].strip():
        piece.append(eol)  # and one before the `---` or heading below
    lines[at:at] = piece
    return "".join(lines)


def generate_tasks(text: str, path: Path | str, proposed: list[ProposedGroup],
                   estimates: Mapping[str, UnitEstimate] | None = None) -> GeneratedTasks:
    """Render the proposal into the spec text and check that it reads back the same.

    Raises PlanError (nothing is written) for a cycle, an unknown group, or a section that
    would not parse back into the proposed groups and waves.
    """
    groups = proposal_groups(proposed)
    layers = check_proposal(groups)
    original = parse_spec(text, path)
    candidate = dataclasses.replace(original, groups=groups, declared_waves={})
    layout = build_plan(candidate, mode="orchestrated")
    detected = build_plan(candidate)
    body = render_section(groups, layout, detected, estimates)
    new_text = place_section(text, original, body)
    try:
        spec = parse_spec(new_text, path)
        plan = build_plan(spec)
    except (SpecError, PlanError) as exc:
        raise PlanError(f"the generated Implementation Tasks do not parse back: {exc.message}",
                        hint="nothing was written; add the task groups by hand") from None
    _check_readback(groups, layers, spec, plan, detected)
    return GeneratedTasks(groups=groups, section=body, text=new_text, spec=spec, plan=plan)


def _check_readback(groups: list[TaskGroup], layers: list[list[str]], spec: Spec, plan: Plan,
                    expected: Plan) -> None:
    want = [(g.id, g.dependencies, sorted(g.files)) for g in groups]
    got = [(g.id, g.dependencies, sorted(g.files)) for g in spec.groups]
    problem = None
    if got != want:
        problem = (f"groups read back as {[g[0] for g in got]} with other dependencies or "
                   f"files than proposed")
    elif plan.layers != layers or [w.groups for w in plan.waves] != \
            [w.groups for w in expected.waves] or plan.mode != expected.mode:
        problem = "the waves read back differently from the proposal"
    else:
        drift = [f.message for f in plan.findings
                 if f.code in ("wave-drift", "declared-wave-unknown-group")]
        if drift:
            problem = "declared waves elsewhere in the spec disagree: " + "; ".join(drift)
    if problem:
        raise PlanError(f"the generated Implementation Tasks were not written: {problem}",
                        hint="add the task groups by hand, or remove the conflicting wave "
                             "declarations and audit again with --write")
