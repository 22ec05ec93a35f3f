"""The reviewer agent, and one review of a spec's last run: ask, decide, record.

The reviewer runs in a fresh context over the user's checkout with read-only tools (any command
would run in a read-only sandbox) and answers with a `Review` as the `output` of
`submit_result`, validated in the conversation. Code then decides the result (`decide`) and
appends the `### Review vN` entry and the new status to the spec in one atomic write. A reviewer
that never submits a valid review approves nothing and writes nothing.
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
from agentrun.audit.runner import ModelAccess
from agentrun.errors import BadInput, Interrupted
from agentrun.executors.base import AgentTask
from agentrun.project import Project
from agentrun.protocol import StopReason
from agentrun.providers.base import Usage
from agentrun.report.state_md import StateUpdate, update_state_file
from agentrun.review.history import SECTION, ReviewEntry, render_entry
from agentrun.review.inputs import gather, review_task
from agentrun.review.verdict import Review, ReviewResult, decide, review_model
from agentrun.sandbox.choice import make_sandbox
from agentrun.spec import load_spec, parse_spec
from agentrun.spec.model import Spec
from agentrun.spec.writeback import (
    append_to_section,
    next_version,
    replace_if_unchanged,
    set_frontmatter_value,
)

REVIEWER = "code-reviewer"
READ_ONLY_TOOLS = ("read_file", "list_files", "search_files")
DEFAULT_MAX_STEPS = 30  # per review (--max-steps); the definition's 10 is for sub-agent use
DEFAULT_TOKEN_BUDGET = 200_000
STATUS_FOR = {ReviewResult.APPROVED: "done", ReviewResult.CHANGES_REQUESTED: "review"}


@dataclass
class ReviewOptions:
    limits: dict[str, Any] = field(default_factory=dict)  # max_steps, token_budget overrides
    sandbox: str = "auto"
    now: Callable[[], datetime] = datetime.now
    cancel: threading.Event = field(default_factory=threading.Event)
    on_event: Callable[[dict[str, Any]], None] | None = None  # the reviewer's progress


@dataclass
class SpecReview:
    """One review: its result, and what was written (nothing when the reviewer gave none)."""

    spec_id: str
    path: Path
    run_id: str
    result: ReviewResult
    criteria: list[str]
    review: Review | None = None
    error: str | None = None  # the reviewer gave no valid review
    version: int | None = None
    entry: str | None = None
    status: str | None = None  # the spec's new frontmatter status
    usage: Usage = field(default_factory=Usage)
    steps: int = 0
    # the spec's groups the reviewed run did not complete: the review covers what landed
    incomplete: list[str] = field(default_factory=list)
    model: str = ""  # the reviewer's, for its cost

    def to_dict(self) -> dict[str, Any]:
        review = self.review.model_dump(mode="json") if self.review else None
        return {"spec": self.spec_id, "path": str(self.path), "run_id": self.run_id,
                "result": str(self.result), "error": self.error, "criteria": self.criteria,
                "review": review, "review_version": self.version, "history_entry": self.entry,
                "frontmatter_status": self.status, "steps": self.steps,
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
    given = gather(spec, project)
    criteria = [c.text for c in spec.acceptance_criteria]
    if not criteria:  # nothing to check against: an approval would mean nothing
        raise BadInput(f"{spec.id} has no acceptance criteria to review against",
                       hint="add a `## Acceptance Criteria` list of `- [ ]` items, then "
                            "review again")
    result = SpecReview(spec.id, spec.path, given.state.run_id,
                        ReviewResult.CHANGES_REQUESTED, criteria,
                        incomplete=given.state.unfinished())
    agent = reviewer_agent(project.overrides_root)
    jail, _ = make_sandbox(options.sandbox, project.root, writable=False)
    limits = limits_for(spec.complexity, agent, {
        "retry_on_failure": False, "max_steps": DEFAULT_MAX_STEPS,
        "token_budget": DEFAULT_TOKEN_BUDGET, **options.limits})
    task = AgentTask(agent=agent, task=review_task(spec, project, given),
                     worktree=project.root, limits=limits, group=spec.id,
                     project_root=project.overrides_root,
                     output=review_model(len(criteria)))
    outcome = run_agent(task, access.provider(), cancel=options.cancel, sandbox=jail,
                        on_event=options.on_event)
    result.usage, result.steps, result.model = outcome.usage, outcome.steps, access.model
    if outcome.stop_reason == StopReason.INTERRUPTED:
        raise Interrupted(f"the review of {spec.id} was interrupted",
                          hint="nothing was written; review again")
    if not isinstance(outcome.output, Review):
        result.error = (f"the reviewer stopped ({outcome.stop_reason}) without submitting a "
                        f"review: {outcome.error or outcome.summary or 'no output'}")
        return result
    result.review = outcome.output
    result.result = decide(outcome.output, len(criteria))
    _record(result, outcome.output, spec, project, access.model, options)
    return result


def _record(result: SpecReview, review: Review, spec: Spec, project: Project, model: str,
            options: ReviewOptions) -> None:
    """Append the entry, set the status, check it reads back, write atomically; STATE.md
    follows when the project has one."""
    result.version = next_version(spec.text, SECTION, "review")
    result.entry = render_entry(ReviewEntry(
        version=result.version, when=options.now(), result=result.result,
        reviewer=f"{REVIEWER} ({model})", criteria=result.criteria, review=review))
    new = append_to_section(spec.text, SECTION, result.entry)
    approved = result.result == ReviewResult.APPROVED
    fix = (f"fix the findings of Review v{result.version}, then run `agentrun review "
           f"{spec.id}`")
    if result.incomplete:  # a partial run: its spec is not done, whatever the verdict
        result.status = spec.status  # unchanged, so `run --resume` still takes it
        next_step = (f"finish the run: `agentrun run {spec.id} --resume` "
                     f"({', '.join(result.incomplete)}), then review again"
                     + ("" if approved else f"; or {fix} (`agentrun fix {spec.id}`)"))
    else:
        result.status = STATUS_FOR[result.result]
        new = set_frontmatter_value(new, "status", result.status)
        next_step = "archive the spec" if approved else fix
    parse_spec(new, spec.path)  # what we write must read back (SpecError otherwise)
    replace_if_unchanged(spec.path, spec.text, new, "review")
    if project.state_md.is_file():
        update_state_file(project.state_md, StateUpdate(
            spec.id, status=None if result.incomplete else result.status,
            next_step=next_step, when=f"{options.now():%Y-%m-%d %H:%M}"))
