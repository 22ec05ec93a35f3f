"""The log line of each event worth one, dispatched on the event's class through `_LINES`,
and the events no display shows (`IGNORED`).

Plain progress prints these lines (`cli/progress.py`); the live table prints the few it does
not show as rows (`cli/live.py`). docs/ARCHITECTURE.md ("Who reads them, by class") says why
each reader dispatches by class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentrun.core.events import (
    AdoptedEvent,
    AgentAttemptEndEvent,
    AgentAttemptEvent,
    AgentDoneEvent,
    AgentRateLimitedEvent,
    AgentSandboxEvent,
    AgentSetupDoneEvent,
    AgentSetupStartEvent,
    AgentSpawnEndEvent,
    AgentSpawnEvent,
    AgentToolEvent,
    AgentTruncatedEvent,
    AgentValidationEvent,
    BaseCheckDoneEvent,
    BaseCheckStartEvent,
    BaseEvent,
    BlockedEvent,
    CommittedEvent,
    CostCapEvent,
    CostStopEvent,
    CostWarningEvent,
    FallbackSequentialEvent,
    FixDoneEvent,
    FixStartEvent,
    IntegrationFailedEvent,
    IntegrationPassedEvent,
    IntegrationStartEvent,
    IntegrationStepEvent,
    InterruptEvent,
    KeptWorktreeEvent,
    MergeConflictEvent,
    MergedEvent,
    NotAdoptedEvent,
    ProtectedChangeEvent,
    RateLimitStopEvent,
    RemovedLeftoverEvent,
    ReviewDoneEvent,
    ReviewSkippedEvent,
    ReviewStartEvent,
    ReviewToolEvent,
    RunDoneEvent,
    RunStartEvent,
    SkipEvent,
    TargetMovedEvent,
    WaitingForWorkerEvent,
    WarningEvent,
    WaveAggregatedEvent,
    WaveDoneEvent,
    WaveStartEvent,
    WorkerResultEvent,
    WorkerStartEvent,
    WorkerTimeoutEvent,
)

Line = Callable[[Any], str | None]
_LINES: dict[type[BaseEvent], Line] = {}  # the log line of each event worth one


def _log_line(*classes: type[BaseEvent]) -> Callable[[Line], Line]:
    def register(line: Line) -> Line:
        for cls in classes:
            _LINES[cls] = line
        return line
    return register


# the events the display leaves out: a worker's finer progress, the reviewer's tool calls,
# what another line says already (a run_done comes with the command's report)
IGNORED: frozenset[type[BaseEvent]] = frozenset({
    AgentSandboxEvent, AgentSetupStartEvent, AgentSetupDoneEvent, AgentSpawnEvent,
    AgentSpawnEndEvent, AgentAttemptEndEvent, AgentValidationEvent, AgentToolEvent,
    AgentRateLimitedEvent, AgentDoneEvent, ReviewToolEvent, SkipEvent, WaitingForWorkerEvent,
    AdoptedEvent, NotAdoptedEvent, RemovedLeftoverEvent, ProtectedChangeEvent,
    TargetMovedEvent, WaveAggregatedEvent, RunDoneEvent})


def describe(e: BaseEvent) -> str | None:
    """One line for an event, or None for events not worth a line of their own."""
    line = _LINES.get(type(e))
    return None if line is None else line(e)


@_log_line(RunStartEvent)
def _run_start(e: RunStartEvent) -> str:
    return f"run {e.run_id}: {e.spec} in {e.mode} mode, {e.waves} wave(s)"


@_log_line(WaveStartEvent)
def _wave_start(e: WaveStartEvent) -> str:
    return f"wave {e.wave}: starting {', '.join(e.batches) or 'nothing'}"


@_log_line(WorkerStartEvent)
def _worker_start(e: WorkerStartEvent) -> str:
    return f"worker {e.batch}: started in {e.worktree}"


@_log_line(AgentAttemptEvent)
def _agent_attempt(e: AgentAttemptEvent) -> str:
    return f"worker {e.batch}: attempt {e.attempt}"


@_log_line(WorkerResultEvent)
def _worker_result(e: WorkerResultEvent) -> str:
    extra = f" — {e.error}" if e.error else ""
    return f"worker {e.batch}: {e.status} ({e.commits} commit(s), {e.tokens:,} tokens){extra}"


@_log_line(WorkerTimeoutEvent)
def _worker_timeout(e: WorkerTimeoutEvent) -> str:
    return f"worker {e.batch}: timed out after {e.timeout_s:g}s, killed"


@_log_line(MergedEvent)
def _merged(e: MergedEvent) -> str:
    return f"merged {e.batch} ({(e.commit or '')[:7]})"


@_log_line(MergeConflictEvent)
def _merge_conflict(e: MergeConflictEvent) -> str:
    return f"merge conflict in {e.batch}: {', '.join(e.conflicts) or e.message}"


@_log_line(BlockedEvent)
def _blocked(e: BlockedEvent) -> str:
    return f"blocked {', '.join(e.groups)}: dependency {', '.join(e.by)} failed"


@_log_line(KeptWorktreeEvent)
def _kept_worktree(e: KeptWorktreeEvent) -> str:
    return f"kept worktree of {e.batch} for inspection: {e.worktree}"


@_log_line(FallbackSequentialEvent)
def _fallback(e: FallbackSequentialEvent) -> str:
    return f"worker processes unavailable ({e.reason}); running sequentially"


@_log_line(InterruptEvent)
def _interrupt(e: InterruptEvent) -> str:
    return f"{e.signal} received: stopping workers and saving state"


@_log_line(WaveDoneEvent)
def _wave_done(e: WaveDoneEvent) -> str:
    return f"wave {e.wave} done" + (f"; failed: {', '.join(e.failed)}" if e.failed else "")


@_log_line(CommittedEvent)
def _committed(e: CommittedEvent) -> str:
    return f"{e.message.splitlines()[0]} ({e.commit[:7]}): {', '.join(e.paths)}"


@_log_line(WarningEvent)
def _warning(e: WarningEvent) -> str:
    return f"warning: {e.message}"


@_log_line(CostWarningEvent, CostCapEvent)
def _cost(e: CostWarningEvent | CostCapEvent) -> str:
    capped = isinstance(e, CostCapEvent)
    return (f"spending: ${e.spent_usd:.4f} spent, {'reached' if capped else '80% of'} the "
            f"${e.cap_usd:g} cap" + ("; no new worker starts, running ones stop" if capped
                                     else ""))


@_log_line(CostStopEvent)
def _cost_stop(e: CostStopEvent) -> str:
    return f"worker {e.batch}: stopped at its next model call (spending cap)"


@_log_line(RateLimitStopEvent)
def _rate_limit_stop(e: RateLimitStopEvent) -> str:
    return (f"the model's rate limit stopped the run (worker {e.batch}): {e.error}; no "
            "further worker starts")


@_log_line(AgentTruncatedEvent)
def _truncated(e: AgentTruncatedEvent) -> str:
    return f"worker {e.batch}: reply cut off at the output limit ({e.where})"


@_log_line(BaseCheckStartEvent)
def _base_check_start(e: BaseCheckStartEvent) -> str:
    return f"base check: `{e.command}` on {e.commit[:7]}"


@_log_line(BaseCheckDoneEvent)
def _base_check_done(e: BaseCheckDoneEvent) -> str:
    return f"base check: {'passed' if e.ok else 'failed'} ({e.seconds:.1f}s)"


@_log_line(IntegrationStartEvent)
def _integration_start(e: IntegrationStartEvent) -> str:
    return f"wave {e.wave}: integration check `{e.command}` on {e.commit[:7]}"


@_log_line(IntegrationStepEvent)
def _integration_step(e: IntegrationStepEvent) -> str | None:
    if e.check <= 1:  # the whole wave: said by integration_start
        return None
    return f"wave {e.wave}: check {e.check}: {'+'.join(e.groups) or 'the base'} alone"


@_log_line(IntegrationPassedEvent)
def _integration_passed(e: IntegrationPassedEvent) -> str:
    return f"wave {e.wave}: integration check passed"


@_log_line(IntegrationFailedEvent)
def _integration_failed(e: IntegrationFailedEvent) -> str:
    culprits = "; ".join("+".join(c) for c in e.culprits)
    return f"wave {e.wave}: integration check failed" + (
        f" (broken by {culprits})" if culprits else "")


@_log_line(ReviewStartEvent)
def _review_start(e: ReviewStartEvent) -> str:
    return f"review: {e.spec}" + (f" by {e.model}" if e.model else "")


@_log_line(ReviewDoneEvent)
def _review_done(e: ReviewDoneEvent) -> str:
    if e.version is None:
        return f"review: no verdict — {e.error or 'no review submitted'}"
    return (f"review: {e.result} (Review v{e.version}, {e.tokens:,} tokens, "
            f"{money(e.cost_usd)})")


@_log_line(FixStartEvent)
def _fix_start(e: FixStartEvent) -> str:
    return f"fix {e.batch}: the findings of Review v{e.review}"


@_log_line(FixDoneEvent)
def _fix_done(e: FixDoneEvent) -> str:
    return f"fix {e.batch}: {e.status}"


@_log_line(ReviewSkippedEvent)
def _review_skipped(e: ReviewSkippedEvent) -> str:
    cap = "" if e.cap_usd is None else f"${e.cap_usd:g} "
    return f"{e.step} was not run: the {cap}spending cap is reached (${e.spent_usd:.4f} spent)"



def money(cost: float | None) -> str:
    return "—" if cost is None else f"${cost:.4f}"

