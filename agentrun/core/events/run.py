"""The orchestrator's own events (docs/events.md, "Event types"): before the workers (committed
files, leftovers, the base check, the run's and each wave's start), each worker's course
(start, adoption on a resume, verification, merge or kept worktree), a wave's integration
check, and what the run says along the way (warnings, the spending cap, a rate limit or a
signal that stops it) up to `run_done`. The review cycle's events are in review.py, a worker's
relayed progress in progress.py (docs/ARCHITECTURE.md, "The event schema").
"""

from typing import Literal

from agentrun.core.events.base import (
    BaseEvent,
    BatchFields,
    BatchGroupsFields,
    CheckFields,
    CostFields,
    ErrorInfo,
    Strs,
    WaveFields,
    absent,
)

# --- the run: before the workers -------------------------------------------------------------

class CommittedEvent(BaseEvent):
    """agentrun committed its own files before the run."""

    type: Literal["committed"] = "committed"
    commit: str
    paths: Strs
    message: str


class RemovedLeftoverEvent(BaseEvent):
    """A dead run's leftover was removed: a path in the run records, or (a resume) a worktree
    and branch of the run it took over."""

    type: Literal["removed_leftover"] = "removed_leftover"
    path: str | None = absent()
    branch: str | None = absent()
    worktree: str | None = absent()
    from_run: str | None = absent()


class BaseCheckStartEvent(CheckFields):
    type: Literal["base_check_start"] = "base_check_start"


class BaseCheckDoneEvent(BaseEvent):
    type: Literal["base_check_done"] = "base_check_done"
    ok: bool
    seconds: float


class RunStartEvent(BaseEvent):
    type: Literal["run_start"] = "run_start"
    run_id: str
    spec: str
    mode: str
    waves: int
    run_dir: str
    sandbox: str | None = absent()  # a local run's
    aggregate_wave: str | None = absent()  # `agentrun aggregate`: the wave it aggregates
    # the spec's audit as the run found it (a spec of agentrun's own format): its status and
    # how many `### Audit vN` entries its Audit History holds
    audit_status: str | None = absent()
    audits: int | None = absent()


class WaveStartEvent(WaveFields):
    type: Literal["wave_start"] = "wave_start"
    number: int
    batches: Strs


class BlockedEvent(BatchGroupsFields):
    type: Literal["blocked"] = "blocked"
    by: Strs


class SkipEvent(BatchFields):
    type: Literal["skip"] = "skip"
    reason: str


class FallbackSequentialEvent(BaseEvent):
    """Worker processes could not start: the rest run in this process, one at a time."""

    type: Literal["fallback_sequential"] = "fallback_sequential"
    reason: str


# --- workers ---------------------------------------------------------------------------------

class WorkerStartEvent(BatchGroupsFields):
    type: Literal["worker_start"] = "worker_start"
    worktree: str
    branch: str


class WaitingForWorkerEvent(BatchFields):
    """A resume waits for a dead run's worker that still runs."""

    type: Literal["waiting_for_worker"] = "waiting_for_worker"
    pid: int
    from_run: str


class AdoptedEvent(BatchGroupsFields):
    """A resume takes a dead run's finished work over instead of running it again."""

    type: Literal["adopted"] = "adopted"
    from_run: str
    branch: str


class NotAdoptedEvent(BatchFields):
    type: Literal["not_adopted"] = "not_adopted"
    branch: str
    reason: str


class WorkerTimeoutEvent(BatchFields):
    type: Literal["worker_timeout"] = "worker_timeout"
    timeout_s: float


class ProtectedChangeEvent(BatchGroupsFields):
    """A worker's branch changed a path the merge policy guards (`allowed`: it may merge)."""

    type: Literal["protected_change"] = "protected_change"
    path: str
    kind: str
    allowed: bool


class WorkerResultEvent(BatchGroupsFields):
    """A worker's result, verified against git."""

    type: Literal["worker_result"] = "worker_result"
    status: str
    error: str | None = None
    commits: int
    tokens: int
    cost_usd: float | None = None
    stop_reason: str | None = None


class MergedEvent(BatchFields):
    type: Literal["merged"] = "merged"
    commit: str | None
    started: float  # when the merge began


class MergeConflictEvent(BatchFields):
    type: Literal["merge_conflict"] = "merge_conflict"
    conflicts: Strs
    message: str
    in_the_way: Strs = ()  # the user's untracked or ignored paths that refused the merge
    started: float


class KeptWorktreeEvent(BatchFields):
    type: Literal["kept_worktree"] = "kept_worktree"
    worktree: str
    branch: str | None = None


class TargetMovedEvent(BaseEvent):
    """The branch the run lands on moved away: landing stops."""

    type: Literal["target_moved"] = "target_moved"
    message: str
    target: str | None = None


# --- a wave's integration check --------------------------------------------------------------

class IntegrationStartEvent(CheckFields, WaveFields):
    type: Literal["integration_start"] = "integration_start"


class IntegrationStepEvent(WaveFields):
    """One check of the search for the merge that breaks it (the first: the whole wave)."""

    type: Literal["integration_step"] = "integration_step"
    check: int
    groups: Strs


class IntegrationPassedEvent(WaveFields):
    type: Literal["integration_passed"] = "integration_passed"
    commit: str


class IntegrationFailedEvent(WaveFields):
    type: Literal["integration_failed"] = "integration_failed"
    culprits: tuple[Strs, ...] = ()
    base_fails: bool = False
    restored: bool = False
    branches: Strs = ()
    output: str = ""


class WaveDoneEvent(WaveFields):
    type: Literal["wave_done"] = "wave_done"
    failed: Strs


class WaveAggregatedEvent(WaveFields):
    """`agentrun aggregate` ended a wave that is not the last: the next wave's jobs go on."""

    type: Literal["wave_aggregated"] = "wave_aggregated"
    next_wave: str


# --- what the run says along the way ---------------------------------------------------------

class WarningEvent(BaseEvent):
    """Something the run's summary lists too (`batch`: about that worker)."""

    type: Literal["warning"] = "warning"
    message: str
    batch: str | None = absent()


class CostWarningEvent(CostFields):
    type: Literal["cost_warning"] = "cost_warning"


class CostCapEvent(CostFields):
    type: Literal["cost_cap"] = "cost_cap"
    running: Strs = ()  # the workers told to stop


class CostStopEvent(BatchFields):
    type: Literal["cost_stop"] = "cost_stop"


class RateLimitStopEvent(BatchFields):
    type: Literal["rate_limit_stop"] = "rate_limit_stop"
    error: str


class InterruptEvent(BaseEvent):
    type: Literal["interrupt"] = "interrupt"
    signal: str


class RunDoneEvent(BaseEvent):
    """The last event of a run: its status; or `error` (with `exit_code` and `error`) when the
    command stopped before or during the run."""

    type: Literal["run_done"] = "run_done"
    status: str
    run_dir: str | None = absent()
    tokens: int | None = absent()
    cost_usd: float | None = None
    report: str | None = absent()  # the run's report.html
    exit_code: int | None = absent()
    error: ErrorInfo | None = absent()
