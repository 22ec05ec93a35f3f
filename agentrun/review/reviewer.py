"""The reviewer agent, and one review of a spec's last run: ask, decide, record, render.

The reviewer runs in a fresh context over the user's checkout with read-only tools (any command
would run in a read-only sandbox) and answers with a `Review` as the `output` of
`submit_result`, validated in the conversation. A change too long for one request is shown in
parts, one conversation each, whose answers combine conservatively (`combine`); one that cannot
be shown whole is `INCOMPLETE` (review/diff.py). Code then decides the result (`decide`),
records it in the run's execution state (`ReviewRecord`: what every command reads back), and
renders it into the spec in one atomic write: the `### Review vN` entry, the status, the
acceptance criteria's checkboxes and the Execution Summary. A reviewer that never submits a
valid review approves nothing and writes nothing.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from agentrun.agent.definitions import AgentDefinition, load_agent
from agentrun.agent.terminator import limits_for
from agentrun.attempts import run_agent
from agentrun.audit.auditor import READ_ONLY_TOOLS
from agentrun.audit.runner import ModelAccess
from agentrun.core.errors import BadInput, Interrupted
from agentrun.core.events import EventSink
from agentrun.core.fsutil import atomic_write_json
from agentrun.core.status import StopReason
from agentrun.core.usage import Usage
from agentrun.executors.base import AgentTask
from agentrun.project import Project
from agentrun.providers.pricing import cost_usd
from agentrun.report.execution_state import ReviewRecord, RunState, save_state, state_path
from agentrun.report.state_md import StateUpdate, update_state_file
from agentrun.report.summary import render_summary
from agentrun.review.history import SECTION, ReviewEntry, render_entry, render_incomplete
from agentrun.review.inputs import ReviewInput, gather, review_task
from agentrun.review.verdict import Review, ReviewResult, combine, decide, review_model
from agentrun.sandbox.choice import make_sandbox
from agentrun.spec import load_spec, parse_spec
from agentrun.spec.model import Spec
from agentrun.spec.writeback import (
    append_to_section,
    next_version,
    replace_if_unchanged,
    set_checkboxes,
    set_frontmatter_value,
    upsert_section,
)

REVIEWER = "code-reviewer"
DEFAULT_MAX_STEPS = 30  # per review (--max-steps); the definition's 10 is for sub-agent use
REVIEW_TOKEN_BUDGET = 200_000
STATUS_FOR = {ReviewResult.APPROVED: "done", ReviewResult.CHANGES_REQUESTED: "review",
              ReviewResult.INCOMPLETE: "review"}
SUMMARY = "Execution Summary"


@dataclass
class ReviewOptions:
    limits: dict[str, Any] = field(default_factory=dict)  # max_steps, token_budget overrides
    sandbox: str = "auto"
    now: Callable[[], datetime] = datetime.now
    cancel: threading.Event = field(default_factory=threading.Event)
    on_event: EventSink | None = None  # the reviewer's progress
    # the run's live state (a run's own review): the record goes there, the caller saves it;
    # None: the spec's last run, read from its execution state and saved back
    state: RunState | None = None


@dataclass
class SpecReview:
    """One review: its result, and what was written (nothing when the reviewer gave none)."""

    spec_id: str
    path: Path
    run_id: str
    result: ReviewResult
    criteria: list[str]
    review: Review | None = None
    error: str | None = None  # the reviewer gave no valid review, or the review is incomplete
    version: int | None = None
    entry: str | None = None
    status: str | None = None  # the spec's new frontmatter status
    usage: Usage = field(default_factory=Usage)
    steps: int = 0
    # the spec's groups the reviewed run did not complete: the review covers what landed
    incomplete: list[str] = field(default_factory=list)
    model: str = ""  # the reviewer's, for its cost
    parts: int = 1  # requests the change was shown in
    record: ReviewRecord | None = None  # what the run's record keeps (None: nothing written)

    def to_dict(self) -> dict[str, Any]:
        review = self.review.model_dump(mode="json") if self.review else None
        return {"spec": self.spec_id, "path": str(self.path), "run_id": self.run_id,
                "result": str(self.result), "error": self.error, "criteria": self.criteria,
                "review": review, "review_version": self.version, "history_entry": self.entry,
                "frontmatter_status": self.status, "steps": self.steps, "parts": self.parts,
                "usage": self.usage.to_dict(), "incomplete": self.incomplete}


def reviewer_agent(overrides_root: Path | None) -> AgentDefinition:
    """The reviewer's definition (packaged, or the override committed in the run's start
    commit: `Project.overrides_root`, never the working tree) with its tools cut down to
    read-only ones, whatever an override lists: a review never changes the checkout."""
    agent = load_agent(REVIEWER, overrides_root)
    tools = [t for t in agent.tools if t in READ_ONLY_TOOLS] or list(READ_ONLY_TOOLS)
    return dataclasses.replace(agent, tools=tools)


def review_spec(path: Path | str, project: Project, access: ModelAccess,
                options: ReviewOptions | None = None) -> SpecReview:
    """Review the last run of the spec at `path`. BadInput when there is no run to review; the
    model is resolved only once there is one (NotConfigured then)."""
    options = options or ReviewOptions()
    spec = load_spec(path)
    given = gather(spec, project, options.state)
    criteria = [c.text for c in spec.acceptance_criteria]
    if not criteria:  # nothing to check against: an approval would mean nothing
        raise BadInput(f"{spec.id} has no acceptance criteria to review against",
                       hint="add a `## Acceptance Criteria` list of `- [ ]` items, then "
                            "review again")
    result = SpecReview(spec.id, spec.path, given.state.run_id,
                        ReviewResult.CHANGES_REQUESTED, criteria,
                        incomplete=given.state.unfinished(),
                        parts=max(1, len(given.diff.parts)))
    if given.diff.incomplete:
        result.result = ReviewResult.INCOMPLETE
        result.error = f"the review is incomplete: {given.diff.incomplete}"
        _record(result, None, spec, project, given, access, options)
        return result
    agent = reviewer_agent(project.overrides_root)
    jail, _ = make_sandbox(options.sandbox, project.root, writable=False)
    limits = limits_for(spec.complexity, agent, {
        "retry_on_failure": False, "max_steps": DEFAULT_MAX_STEPS,
        "token_budget": REVIEW_TOKEN_BUDGET, **options.limits})
    answers: list[Review] = []
    result.model = access.model
    for part in range(1, result.parts + 1):
        task = AgentTask(agent=agent, task=review_task(spec, project, given, part),
                         worktree=project.root, limits=limits, group=spec.id,
                         project_root=project.overrides_root,
                         output=review_model(len(criteria)))
        outcome = run_agent(task, access.provider(), cancel=options.cancel, sandbox=jail,
                            on_event=options.on_event)
        result.usage, result.steps = result.usage + outcome.usage, result.steps + outcome.steps
        if outcome.stop_reason == StopReason.INTERRUPTED:
            raise Interrupted(f"the review of {spec.id} was interrupted",
                              hint="nothing was written; review again")
        if not isinstance(outcome.output, Review):
            where = f" (part {part} of {result.parts})" if result.parts > 1 else ""
            result.error = (f"the reviewer stopped ({outcome.stop_reason}){where} without "
                            f"submitting a review: "
                            f"{outcome.error or outcome.summary or 'no output'}")
            return result
        answers.append(outcome.output)
    result.review = combine(answers, len(criteria))
    result.result = decide(result.review, len(criteria))
    _record(result, result.review, spec, project, given, access, options)
    return result


def _record(result: SpecReview, review: Review | None, spec: Spec, project: Project,
            given: ReviewInput, access: ModelAccess, options: ReviewOptions) -> None:
    """Keep the review in the run's record, then render it into the spec: the entry, the
    status, the criteria's checkboxes and the Execution Summary, checked to read back and
    written atomically; STATE.md follows when the project has one."""
    state, now = given.state, options.now()
    recorded = [r.version for r in state.reviews if r.version is not None]
    result.version = max(next_version(spec.text, SECTION, "review"),
                         max(recorded, default=0) + 1)
    reviewer = f"{REVIEWER} ({access.model})"
    record = ReviewRecord(
        result=str(result.result), version=result.version, error=result.error,
        findings=len(review.findings) if review else 0, usage=result.usage,
        cost_usd=cost_usd(access.model, result.usage,
                          project.config.price_overrides() or None),
        when=f"{now:%Y-%m-%d %H:%M}", reviewer=reviewer, head=given.head, parts=result.parts,
        criteria=result.criteria, verdict=review.model_dump(mode="json") if review else None)
    state.reviews.append(record)
    try:
        result.entry = (render_entry(ReviewEntry(
            version=result.version, when=now, result=result.result, reviewer=reviewer,
            criteria=result.criteria, review=review)) if review is not None else
            render_incomplete(result.version, now, reviewer, result.error or ""))
        new = render_verdict(spec, state, state.finished or f"{now:%Y-%m-%d %H:%M}")
        new = append_to_section(new, SECTION, result.entry)
        if result.incomplete:  # a partial run: its spec is not done, whatever the verdict
            result.status = spec.status  # unchanged, so `run --resume` still takes it
        else:
            result.status = STATUS_FOR[result.result]
            new = set_frontmatter_value(new, "status", result.status)
        parse_spec(new, spec.path)  # what we write must read back (SpecError otherwise)
        if options.state is None:  # `agentrun review`: the record is the state's file
            _save(project, spec, state)
        replace_if_unchanged(spec.path, spec.text, new, "review")
    except Exception:
        state.reviews.pop()  # nothing is written when the spec cannot show it
        if options.state is None:
            _save(project, spec, state)
        raise
    result.record = record
    if project.state_md.is_file():
        update_state_file(project.state_md, StateUpdate(
            spec.id, status=None if result.incomplete else result.status,
            next_step=_next_step(result, spec.id), when=f"{now:%Y-%m-%d %H:%M}"))


def _save(project: Project, spec: Spec, state: RunState) -> None:
    """The run's record after a review outside a run: its execution state, and its run
    folder's result when it has one."""
    save_state(state_path(project.execution_dir, spec.id), state)
    run_dir = project.runs_dir / state.run_id
    if run_dir.is_dir():
        atomic_write_json(run_dir / "result.json", state.to_dict())


def _next_step(result: SpecReview, spec_id: str) -> str:
    """STATE.md's next step after the review."""
    approved = result.result == ReviewResult.APPROVED
    if result.result == ReviewResult.INCOMPLETE:
        then = (f"review the change yourself (Review v{result.version} is incomplete: "
                f"{result.error})")
    else:
        then = (f"fix the findings of Review v{result.version}, then run `agentrun review "
                f"{spec_id}`")
    if result.incomplete:  # a partial run: finish it first
        return (f"finish the run: `agentrun run {spec_id} --resume` "
                f"({', '.join(result.incomplete)}), then review again"
                + ("" if approved else f"; or {then}"))
    return "archive the spec" if approved else then


def render_verdict(spec: Spec, state: RunState, when: str) -> str:
    """The spec's text with the run's latest review rendered where it shows: each acceptance
    criterion's checkbox ticked exactly when that review found it met with evidence, and the
    Execution Summary (when the spec has one) rewritten from the record."""
    text = spec.text
    met = state.reviews[-1].met() if state.reviews else None
    if met is not None and len(met) == len(spec.acceptance_criteria):
        text = set_checkboxes(text, {c.line: ok for c, ok in zip(spec.acceptance_criteria, met,
                                                                 strict=True) if c.line})
    if spec.section(SUMMARY) is not None:
        criteria = [c.text for c in spec.acceptance_criteria]
        text = upsert_section(text, SUMMARY, render_summary(state, criteria, when))
    return text
