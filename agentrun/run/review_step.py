"""The end of a run: an independent review of its merged result, and the fix cycles.

Once a run's work is merged and integration-checked, the reviewer (`review.reviewer`, the same
code as `agentrun review`) judges the run's base..HEAD diff against the spec and appends its
`### Review vN`. When it requests changes and fix cycles are allowed, the open findings become
one fix batch for a fresh worker — run, verified, merged and integration-checked by the run's
own machinery like any wave — its `### Fix Response vN` is appended, and the reviewer looks
again. The run is `complete` only when the last review approved; otherwise it is `partial`
with `stop_reason: review`. A reviewer that submits nothing approves nothing.

The run's spending cap covers both: the fix worker is a batch like any other (its turns count
live, and it is wound down at the cap), the reviewer's cost is charged when it ends, and
neither starts once the cap is reached (`stop_reason: cost_cap`, not approved).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from agentrun import workspace
from agentrun.audit.runner import ModelAccess
from agentrun.core.errors import AgentrunError, Interrupted
from agentrun.core.events import (
    BaseEvent,
    FixDoneEvent,
    FixStartEvent,
    ReviewDoneEvent,
    ReviewSkippedEvent,
    ReviewStartEvent,
    reviewed,
)
from agentrun.core.fsutil import atomic_write_json
from agentrun.core.results import WorkerResult
from agentrun.core.status import RunStatus, Status, StopReason
from agentrun.plan import Batch, Plan
from agentrun.project import Project
from agentrun.protocol import GroupAssignment
from agentrun.providers.pricing import cost_usd
from agentrun.report.execution_state import (
    GroupState,
    ReviewRecord,
    RunState,
    WaveState,
    load_state,
    save_state,
    state_path,
)
from agentrun.report.summary import review_words
from agentrun.review.findings import LastReview, last_review
from agentrun.review.fix import (
    FixOutcome,
    append_fix_response,
    fix_group,
    next_fix_version,
    render_fix_response,
)
from agentrun.review.reviewer import ReviewOptions, SpecReview, review_spec
from agentrun.review.verdict import ReviewResult
from agentrun.run.backends import WorkerBackend
from agentrun.run.execute import execute
from agentrun.run.integration import Integration
from agentrun.run.land import Lander, WaveLanding
from agentrun.run.record import Recorder, now_text
from agentrun.run.spending import Spending
from agentrun.run.verify import Delivery, Verifier
from agentrun.spec import load_spec
from agentrun.spec.model import Spec

CAP_REACHED = "the run reached its spending cap"  # why a review was not run


@dataclass
class ReviewSettings:
    """How a run is reviewed: the reviewer's model, its limits and sandbox, and how many fix
    cycles may follow a review that requests changes."""

    access: ModelAccess
    fix_cycles: int = 0
    limits: dict[str, Any] = field(default_factory=dict)
    sandbox: str = "auto"
    pricing: dict[str, Any] = field(default_factory=dict)
    now: Callable[[], datetime] = datetime.now


class Host(Protocol):
    """What the step uses of the run it ends (the orchestrator)."""

    project: Project
    spec: Spec
    plan: Plan
    cancel: threading.Event
    record: Recorder
    backend: WorkerBackend
    verifier: Verifier
    lander: Lander
    integration: Integration
    fix_groups: dict[str, GroupAssignment]
    root: Path
    spending: Spending

    @property
    def state(self) -> RunState: ...

    def verify_delivery(self, d: Delivery) -> WorkerResult: ...


class ReviewStep:
    def __init__(self, host: Host, settings: ReviewSettings) -> None:
        self.host = host
        self.settings = settings

    @property
    def state(self) -> RunState:
        return self.host.state

    def after_run(self) -> None:
        """Review a run whose work all merged; fix and review again up to `fix_cycles`."""
        if self.state.status not in (RunStatus.COMPLETE, RunStatus.REVIEWING):
            self.state.review_skipped = f"the run ended {self.state.status}"
            return
        self.cycles(self.settings.fix_cycles, review_first=True)

    def cycles(self, fixes: int, *, review_first: bool) -> bool:
        """Review (unless `review_first` is off: the last review's findings are open), then
        fix and review until approval or `fixes` fix cycles; True when approved."""
        approved = self.review() if review_first else False
        spec, done = self.state.spec_id, 0
        while not approved and done < fixes and not self.host.cancel.is_set():
            if self._capped("the fix cycle", f"continue with `agentrun fix {spec}`"):
                break
            done += 1
            if not self.fix():
                # the fix was wound down at the cap
                self._capped("the review of the fix", f"review it with `agentrun review {spec}`")
                break
            approved = self.review()
        self._conclude(approved)
        return approved

    # -- one review -------------------------------------------------------------------------
    def review(self) -> bool:
        host, s = self.host, self.settings
        if self._capped("the review", f"review it with `agentrun review {host.spec.id}`"):
            return False
        host.record.save()
        host.record.emit(ReviewStartEvent(spec=host.spec.id, model=self._model(),
                                          provider=self._provider()))
        # the review records its verdict in the run's live state (saved by `_announce`)
        options = ReviewOptions(limits=s.limits, sandbox=s.sandbox, now=s.now,
                                cancel=host.cancel, on_event=self._relay, state=self.state)
        try:
            result = review_spec(host.spec.path, host.project, s.access, options)
        except Interrupted:
            host.cancel.set()
            self._add(ReviewRecord(result=str(ReviewResult.CHANGES_REQUESTED),
                                   error="the review was interrupted"))
            return False
        except AgentrunError as exc:  # no criteria, no model: no approval either
            error = exc.message + (f" ({exc.hint})" if exc.hint else "")
            self._add(ReviewRecord(result=str(ReviewResult.CHANGES_REQUESTED), error=error))
            return False
        if result.record is not None:  # recorded by the review itself
            host.spending.charge(result.record.cost_usd)
            self._announce(result.record)
        else:  # no review submitted: nothing written, but the run keeps what it cost
            cost = cost_usd(s.access.model, result.usage, s.pricing or None)
            host.spending.charge(cost)
            self._add(ReviewRecord(result=str(result.result), error=result.error,
                                   usage=result.usage, cost_usd=cost))
        return result.result == ReviewResult.APPROVED

    def _model(self) -> str:
        try:
            return self.settings.access.model
        except AgentrunError:  # no model: the review says so when it starts
            return ""

    def _provider(self) -> str:
        try:
            return str(getattr(self.settings.access.config(), "provider", "") or "")
        except AgentrunError:
            return ""

    def _relay(self, event: BaseEvent) -> None:
        """The reviewer's model turns and tool calls, for the live display and `--events`
        (not the run's record, as with a worker's own progress)."""
        passed_on = reviewed(event)
        if passed_on is not None:
            self.host.record.emit(passed_on, record=False)

    def _capped(self, step: str, then: str) -> bool:
        """Whether the spending cap is reached: then `step` is not run, and the run ends
        unapproved with `stop_reason: cost_cap`."""
        spending, state = self.host.spending, self.state
        if not spending.reached:
            return False
        state.stop_reason = StopReason.COST_CAP
        if not state.reviews:
            state.review_skipped = CAP_REACHED
        state.warnings.append(f"{step} was not run: {spending.summary()}; {then}")
        self.host.record.emit(ReviewSkippedEvent(step=step, reason=StopReason.COST_CAP,
                                                 spent_usd=round(spending.spent, 6),
                                                 cap_usd=spending.cap))
        return True

    def _add(self, record: ReviewRecord) -> None:
        """Keep a review's outcome that the review itself did not record (no verdict)."""
        self.state.reviews.append(record)
        self._announce(record)

    def _announce(self, record: ReviewRecord) -> None:
        """The review's event, with the reviewer's findings and criteria verdicts (the run's
        HTML report shows them), and the state saved."""
        said = {k: v for k, v in (record.verdict or {}).items()
                if k in ("criteria", "findings", "summary")}
        self.host.record.emit(ReviewDoneEvent(result=record.result, version=record.version,
                                              error=record.error, tokens=record.usage.total,
                                              cost_usd=record.cost_usd, **said))
        self.host.record.save()

    # -- one fix ----------------------------------------------------------------------------
    def fix(self) -> bool:
        """One fix batch for the last review's open findings; True when it completed, merged
        and passed its integration check (so a new review has something to look at)."""
        host, state = self.host, self.state
        spec = load_spec(host.spec.path)
        last = last_review(state)  # the run's record, never the spec's text
        if last is None or not last.open:
            return False
        version = next_fix_version(spec.text)
        group = fix_group(last, version)
        gid, label = group.id, f"fix-{version}"
        batch = Batch(id=gid, groups=[gid])
        state.groups[gid] = GroupState(id=gid, title=group.title, wave=label, batch=gid)
        state.waves.append(WaveState(number=len(state.waves) + 1, label=label, groups=[gid],
                                     status="running"))
        host.fix_groups[gid] = group
        host.record.emit(FixStartEvent(batch=gid, review=last.version))
        base = workspace.head_commit(host.root)
        landing = WaveLanding(host.lander, [batch])
        results = execute([batch], base, host.backend, max_parallel=1, cancel=host.cancel,
                          verify=host.verify_delivery, not_started=self._not_started,
                          gate=host.spending, on_result=landing.land_ready)
        broken = host.integration.after_wave(label, base, landing.finish(results))
        landing.clean_up()
        state.waves[-1].status = "failed" if broken else "done"
        g = state.groups[gid]
        ok = g.status == Status.COMPLETE and not broken
        outcome = FixOutcome(status=str(g.status), commits=list(g.commits),
                             changed=[*g.files_created, *g.files_modified, *g.files_deleted],
                             summary=g.summary, error=g.error,
                             merged=ok and bool(g.merge_commit))
        self._respond(version, last, outcome)
        host.record.emit(FixDoneEvent(batch=gid, status=g.status))
        host.record.save()
        return ok and not host.cancel.is_set()

    def _respond(self, version: int, last: LastReview, outcome: FixOutcome) -> None:
        agent = "spec-executor" if self.host.plan.mode == "single" else "spec-executor-worker"
        entry = render_fix_response(version, self.settings.now(), last,
                                    f"{agent} ({self.state.model})", outcome)
        append_fix_response(self.host.spec.path, entry)

    def _not_started(self, batch: Batch) -> None:
        for gid in batch.ids:
            g = self.state.groups[gid]
            g.status, g.error = Status.INTERRUPTED, "interrupted before the worker started"
            g.stop_reason = StopReason.INTERRUPTED

    # -- the verdict on the run -------------------------------------------------------------
    def _conclude(self, approved: bool) -> None:
        state = self.state
        if self.host.cancel.is_set():
            state.status = RunStatus.INTERRUPTED
        elif approved and state.unfinished():  # `fix` after a partial run: still partial
            state.status = RunStatus.PARTIAL
        elif approved:
            state.status, state.stop_reason = RunStatus.COMPLETE, None
        else:
            state.status = RunStatus.PARTIAL
            state.stop_reason = state.stop_reason or StopReason.REVIEW
            state.warnings.append(review_warning(state))
        state.finished = now_text()
        self.host.record.write_summary(state.finished)
        self.host.record.save()


def review_pending(state: RunState) -> bool:
    """Whether `state`'s run merged all its work but stopped before its review's verdict
    (killed during it, or interrupted): the run is not finished until a review concludes it."""
    return state.status == RunStatus.REVIEWING or (
        state.status == RunStatus.INTERRUPTED and bool(state.reviews)
        and all(g.status == Status.COMPLETE for g in state.groups.values()))


def conclude_review(project: Project, spec_id: str, review: SpecReview,
                    pricing: dict[str, Any] | None = None) -> RunState | None:
    """`agentrun review` of a run whose own review never ended completes that run: the
    verdict decides, as at the end of `run` (`complete` only on approval), and the execution
    state and the run's record say so. Returns that state (None when no run waited)."""
    path = state_path(project.execution_dir, spec_id)
    state = load_state(path)
    if state is None or state.run_id != review.run_id or not review_pending(state):
        return None
    if review.record is None:  # no verdict (the review keeps its verdicts itself)
        state.reviews.append(ReviewRecord(
            result=str(review.result), version=review.version, error=review.error,
            usage=review.usage,
            cost_usd=cost_usd(review.model, review.usage, pricing) if review.model else None))
    if review.result == ReviewResult.APPROVED:
        state.status, state.stop_reason = RunStatus.COMPLETE, None
    else:
        state.status, state.stop_reason = RunStatus.PARTIAL, StopReason.REVIEW
        state.warnings.append(review_warning(state))
    state.finished = now_text()
    save_state(path, state)
    atomic_write_json(project.runs_dir / state.run_id / "result.json", state.to_dict())
    return state


def review_warning(state: RunState) -> str:
    last = state.reviews[-1] if state.reviews else None
    if last is None or not last.judged:
        return f"{state.spec_id} was not approved: {review_words(state)}"
    return (f"Review v{last.version} of {state.spec_id} requested changes "
            f"({last.findings} finding(s)); fix them with `agentrun fix {state.spec_id}`")


def review_position(state: RunState) -> tuple[str, str, str] | None:
    """STATE.md's progress, Current Position status and next step after a reviewed run, or
    one whose review the spending cap skipped; None for a run without either."""
    if not state.reviews:
        if state.review_skipped != CAP_REACHED:
            return None
        return "Complete, not reviewed (spending cap reached)", "review", \
            f"`agentrun review {state.spec_id}`"
    last = state.reviews[-1]
    if state.status == RunStatus.COMPLETE:
        return f"Complete, approved (Review v{last.version})", "done", "archive the spec"
    if state.status == RunStatus.INTERRUPTED:
        return "Interrupted during review", "review", \
            f"`agentrun review {state.spec_id}`"
    unfinished = state.unfinished()
    if unfinished:  # a fix after a partial run: whatever the review, the spec is not done
        return (f"Incomplete: {', '.join(unfinished)} (Review v{last.version}: "
                f"{last.result})", str(state.status),
                f"finish the run: `agentrun run {state.spec_id} --resume`")
    if last.version is None:
        return "Complete, not approved (no review submitted)", "review", \
            f"`agentrun review {state.spec_id}`"
    if last.result == ReviewResult.INCOMPLETE:
        return (f"Complete, not approved (Review v{last.version} incomplete)", "review",
                "review the change yourself: it is too large to show a reviewer whole")
    return (f"Complete, changes requested (Review v{last.version})", "review",
            f"fix the findings: `agentrun fix {state.spec_id}`")
