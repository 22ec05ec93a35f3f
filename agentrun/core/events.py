"""Every event of a run, as a class: what the orchestrator says (the run record
`.specflow/runs/<id>/events.ndjson`, `--events`, the live display, the HTML report, tracing)
and what a worker says of its own progress (its `progress.ndjson`, relayed as `agent_*`).

Each event is a frozen model whose `type` field is a literal, so `Event` is a discriminated
union that one adapter validates. Code constructs events; it never writes an event's name or
fields as a dict, and no event type is joined from strings: a worker's `StepEvent` becomes the
run's `AgentStepEvent` through the table in `relayed`. The wire form (`wire`) is version
`SCHEMA_VERSION` of the documented schema (docs/events.md, whose tables a test keeps equal to
these classes): `v`, `t`, `type` first, then the fields; an optional field whose value is None
is left out where `absent()` says so, else written as `null`.

Whatever is read back (a worker's progress lines, a run record) is untrusted: `parse` validates
it strictly (no coercion, no unknown field, no unknown type) and raises ValueError otherwise.
"""

import functools
import json
import time
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Final, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, TypeAdapter

# the version of the events' schema (docs/events.md): it changes only when a field changes its
# meaning or goes, not when an event type or a field is added
SCHEMA_VERSION: Final = 1
_ABSENT = "absent when None"


def _now() -> float:
    return round(time.time(), 3)


def absent() -> Any:
    """An optional field left out of the wire form when it is None (documented as such)."""
    return Field(None, json_schema_extra={_ABSENT: True})


class BaseEvent(BaseModel):
    """What every event has: the schema version and when it happened (epoch seconds)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    v: Literal[1] = SCHEMA_VERSION
    t: float = Field(default_factory=_now)
    type: str  # each class's own literal: the union's discriminator

    # the fields left out of the wire form when None (set for each class from `absent()`)
    absent_fields: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls.absent_fields = frozenset(
            name for name, f in cls.model_fields.items()
            if isinstance(f.json_schema_extra, dict) and f.json_schema_extra.get(_ABSENT))


class _Payload(BaseModel):
    """A structured value inside an event."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class UsageCounts(_Payload):
    """Tokens of a model turn or of a worker so far (`input_tokens` excludes cached input)."""

    input_tokens: NonNegativeInt = 0
    output_tokens: NonNegativeInt = 0
    cache_read_tokens: NonNegativeInt = 0
    cache_write_tokens: NonNegativeInt = 0


class CriterionItem(_Payload):
    criterion: int
    verdict: str
    evidence: str = ""


class FindingItem(_Payload):
    severity: str
    file: str = ""
    issue: str
    fix: str = ""


class ErrorInfo(_Payload):
    """The error that stopped a command (its class name, message and hint)."""

    type: str
    message: str
    hint: str | None = None


Strs = tuple[str, ...]


# --- a worker's own progress (its progress.ndjson) -------------------------------------------
# Each has a relayed twin below (`agent_<type>`, with the worker's batch) that the orchestrator
# emits for it; the fields live in a mixin so that the two stay the same.

class _SandboxFields(BaseEvent):
    sandbox: str


class _StartFields(BaseEvent):
    groups: Strs
    model: str
    executor: str


class _SetupStartFields(BaseEvent):
    command: str | None = None  # None: the set-up only copies files


class _SetupDoneFields(BaseEvent):
    duration_s: float
    copied: Strs = ()


class _SpawnFields(BaseEvent):
    pgid: int


class _AttemptFields(BaseEvent):
    attempt: int
    max_attempts: int
    agent: str


class _AttemptEndFields(BaseEvent):
    attempt: int
    status: str
    stop_reason: str | None = None
    retry: bool = False
    error: str | None = None


class _ValidationFields(BaseEvent):
    attempt: int
    ok: bool
    condition: str | None = None
    started: float


class _Where(BaseEvent):
    """Who in the worker said it: the built-in loop names its agent, its depth (sub-agents are
    deeper) and attempt; a coding-agent CLI's translated stream names the task group."""

    agent: str | None = absent()
    depth: int | None = absent()
    attempt: int | None = absent()
    group: str | None = absent()


class _StepFields(_Where):
    """One model turn or model call. The built-in loop says both at once: the turn's number,
    the first tool it asked for, the call's usage, the worker's so far and (when the turn ends
    a model call) when that call began. A coding-agent CLI's worker says them apart: its
    stream's turns (`step`, `tool`), and each call its key proxy metered (`tokens`, `usage`,
    `worker_usage`, `started`: executors/headless.py), so that nothing counts twice."""

    step: int | None = absent()
    tool: str | None = None
    tokens: int | None = absent()
    usage: UsageCounts | None = absent()
    worker_usage: UsageCounts | None = absent()
    started: float | None = absent()


class _ToolFields(_Where):
    """One tool call, from `started` to `t`."""

    name: str
    started: float
    error: bool = False


class _TruncatedFields(_Where):
    n: int
    where: str


class _RateLimitedFields(_Where):
    error: str
    wait_s: float | None = absent()


class _DoneFields(BaseEvent):
    status: str
    stop_reason: str | None = None


class SandboxEvent(_SandboxFields):
    type: Literal["sandbox"] = "sandbox"


class StartEvent(_StartFields):
    type: Literal["start"] = "start"


class SetupStartEvent(_SetupStartFields):
    type: Literal["setup_start"] = "setup_start"


class SetupDoneEvent(_SetupDoneFields):
    type: Literal["setup_done"] = "setup_done"


class SpawnEvent(_SpawnFields):
    type: Literal["spawn"] = "spawn"


class SpawnEndEvent(_SpawnFields):
    type: Literal["spawn_end"] = "spawn_end"


class AttemptEvent(_AttemptFields):
    type: Literal["attempt"] = "attempt"


class AttemptEndEvent(_AttemptEndFields):
    type: Literal["attempt_end"] = "attempt_end"


class ValidationEvent(_ValidationFields):
    type: Literal["validation"] = "validation"


class StepEvent(_StepFields):
    type: Literal["step"] = "step"


class ToolEvent(_ToolFields):
    type: Literal["tool"] = "tool"


class TruncatedEvent(_TruncatedFields):
    type: Literal["truncated"] = "truncated"


class RateLimitedEvent(_RateLimitedFields):
    type: Literal["rate_limited"] = "rate_limited"


class DoneEvent(_DoneFields):
    type: Literal["done"] = "done"


ProgressEvent = (SandboxEvent | StartEvent | SetupStartEvent | SetupDoneEvent | SpawnEvent
                 | SpawnEndEvent | AttemptEvent | AttemptEndEvent | ValidationEvent | StepEvent
                 | ToolEvent | TruncatedEvent | RateLimitedEvent | DoneEvent)


# --- a worker's progress as the run relays it ------------------------------------------------

class _Batch(BaseEvent):
    batch: str  # the worker: its task groups joined by `_`


class AgentSandboxEvent(_SandboxFields, _Batch):
    type: Literal["agent_sandbox"] = "agent_sandbox"


class AgentStartEvent(_StartFields, _Batch):
    type: Literal["agent_start"] = "agent_start"


class AgentSetupStartEvent(_SetupStartFields, _Batch):
    type: Literal["agent_setup_start"] = "agent_setup_start"


class AgentSetupDoneEvent(_SetupDoneFields, _Batch):
    type: Literal["agent_setup_done"] = "agent_setup_done"


class AgentSpawnEvent(_SpawnFields, _Batch):
    type: Literal["agent_spawn"] = "agent_spawn"


class AgentSpawnEndEvent(_SpawnFields, _Batch):
    type: Literal["agent_spawn_end"] = "agent_spawn_end"


class AgentAttemptEvent(_AttemptFields, _Batch):
    type: Literal["agent_attempt"] = "agent_attempt"


class AgentAttemptEndEvent(_AttemptEndFields, _Batch):
    type: Literal["agent_attempt_end"] = "agent_attempt_end"


class AgentValidationEvent(_ValidationFields, _Batch):
    type: Literal["agent_validation"] = "agent_validation"


class AgentStepEvent(_StepFields, _Batch):
    type: Literal["agent_step"] = "agent_step"


class AgentToolEvent(_ToolFields, _Batch):
    type: Literal["agent_tool"] = "agent_tool"


class AgentTruncatedEvent(_TruncatedFields, _Batch):
    type: Literal["agent_truncated"] = "agent_truncated"


class AgentRateLimitedEvent(_RateLimitedFields, _Batch):
    type: Literal["agent_rate_limited"] = "agent_rate_limited"


class AgentDoneEvent(_DoneFields, _Batch):
    type: Literal["agent_done"] = "agent_done"


# the run's event for each of a worker's progress events
RELAYED: Final[dict[type[BaseEvent], type[BaseEvent]]] = {
    SandboxEvent: AgentSandboxEvent, StartEvent: AgentStartEvent,
    SetupStartEvent: AgentSetupStartEvent, SetupDoneEvent: AgentSetupDoneEvent,
    SpawnEvent: AgentSpawnEvent, SpawnEndEvent: AgentSpawnEndEvent,
    AttemptEvent: AgentAttemptEvent, AttemptEndEvent: AgentAttemptEndEvent,
    ValidationEvent: AgentValidationEvent, StepEvent: AgentStepEvent, ToolEvent: AgentToolEvent,
    TruncatedEvent: AgentTruncatedEvent, RateLimitedEvent: AgentRateLimitedEvent,
    DoneEvent: AgentDoneEvent,
}


# the reviewer's progress that the run passes on (the reviewer runs in the run's process)
REVIEWED: Final[dict[type[BaseEvent], type[BaseEvent]]] = {}  # filled below its classes


def relayed(event: BaseEvent, batch: str) -> BaseEvent:
    """A worker's progress event as the run's `agent_*` event of worker `batch` (its time
    kept: when the worker said it)."""
    cls = RELAYED[type(event)]
    return cls.model_validate({**_fields(event), "batch": batch})


def reviewed(event: BaseEvent) -> BaseEvent | None:
    """The reviewer's progress event as the run's `review_*` event; None for one the run does
    not pass on."""
    cls = REVIEWED.get(type(event))
    return None if cls is None else cls.model_validate(_fields(event))


def _fields(event: BaseEvent) -> dict[str, Any]:
    return {name: getattr(event, name) for name in type(event).model_fields if name != "type"}


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


class BaseCheckStartEvent(BaseEvent):
    type: Literal["base_check_start"] = "base_check_start"
    command: str
    commit: str


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


class WaveStartEvent(BaseEvent):
    type: Literal["wave_start"] = "wave_start"
    wave: str
    number: int
    batches: Strs


class BlockedEvent(BaseEvent):
    type: Literal["blocked"] = "blocked"
    batch: str
    groups: Strs
    by: Strs


class SkipEvent(BaseEvent):
    type: Literal["skip"] = "skip"
    batch: str
    reason: str


class FallbackSequentialEvent(BaseEvent):
    """Worker processes could not start: the rest run in this process, one at a time."""

    type: Literal["fallback_sequential"] = "fallback_sequential"
    reason: str


# --- workers ---------------------------------------------------------------------------------

class WorkerStartEvent(BaseEvent):
    type: Literal["worker_start"] = "worker_start"
    batch: str
    groups: Strs
    worktree: str
    branch: str


class WaitingForWorkerEvent(BaseEvent):
    """A resume waits for a dead run's worker that still runs."""

    type: Literal["waiting_for_worker"] = "waiting_for_worker"
    batch: str
    pid: int
    from_run: str


class AdoptedEvent(BaseEvent):
    """A resume takes a dead run's finished work over instead of running it again."""

    type: Literal["adopted"] = "adopted"
    batch: str
    groups: Strs
    from_run: str
    branch: str


class NotAdoptedEvent(BaseEvent):
    type: Literal["not_adopted"] = "not_adopted"
    batch: str
    branch: str
    reason: str


class WorkerTimeoutEvent(BaseEvent):
    type: Literal["worker_timeout"] = "worker_timeout"
    batch: str
    timeout_s: float


class ProtectedChangeEvent(BaseEvent):
    """A worker's branch changed a path the merge policy guards (`allowed`: it may merge)."""

    type: Literal["protected_change"] = "protected_change"
    batch: str
    groups: Strs
    path: str
    kind: str
    allowed: bool


class WorkerResultEvent(BaseEvent):
    """A worker's result, verified against git."""

    type: Literal["worker_result"] = "worker_result"
    batch: str
    groups: Strs
    status: str
    error: str | None = None
    commits: int
    tokens: int
    cost_usd: float | None = None
    stop_reason: str | None = None


class MergedEvent(BaseEvent):
    type: Literal["merged"] = "merged"
    batch: str
    commit: str | None
    started: float  # when the merge began


class MergeConflictEvent(BaseEvent):
    type: Literal["merge_conflict"] = "merge_conflict"
    batch: str
    conflicts: Strs
    message: str
    in_the_way: Strs = ()  # the user's untracked or ignored paths that refused the merge
    started: float


class KeptWorktreeEvent(BaseEvent):
    type: Literal["kept_worktree"] = "kept_worktree"
    batch: str
    worktree: str
    branch: str | None = None


class TargetMovedEvent(BaseEvent):
    """The branch the run lands on moved away: landing stops."""

    type: Literal["target_moved"] = "target_moved"
    message: str
    target: str | None = None


# --- a wave's integration check --------------------------------------------------------------

class IntegrationStartEvent(BaseEvent):
    type: Literal["integration_start"] = "integration_start"
    wave: str
    command: str
    commit: str


class IntegrationStepEvent(BaseEvent):
    """One check of the search for the merge that breaks it (the first: the whole wave)."""

    type: Literal["integration_step"] = "integration_step"
    wave: str
    check: int
    groups: Strs


class IntegrationPassedEvent(BaseEvent):
    type: Literal["integration_passed"] = "integration_passed"
    wave: str
    commit: str


class IntegrationFailedEvent(BaseEvent):
    type: Literal["integration_failed"] = "integration_failed"
    wave: str
    culprits: tuple[Strs, ...] = ()
    base_fails: bool = False
    restored: bool = False
    branches: Strs = ()
    output: str = ""


class WaveDoneEvent(BaseEvent):
    type: Literal["wave_done"] = "wave_done"
    wave: str
    failed: Strs


class WaveAggregatedEvent(BaseEvent):
    """`agentrun aggregate` ended a wave that is not the last: the next wave's jobs go on."""

    type: Literal["wave_aggregated"] = "wave_aggregated"
    wave: str
    next_wave: str


# --- the review and fix cycles ---------------------------------------------------------------

class ReviewStartEvent(BaseEvent):
    type: Literal["review_start"] = "review_start"
    spec: str
    model: str
    provider: str = ""  # empty: none configured (or a record written before it was said)


class ReviewStepEvent(_StepFields):
    """One reviewer model turn (the reviewer's `StepEvent`)."""

    type: Literal["review_step"] = "review_step"


class ReviewToolEvent(_ToolFields):
    """One reviewer tool call (the reviewer's `ToolEvent`)."""

    type: Literal["review_tool"] = "review_tool"


REVIEWED.update({StepEvent: ReviewStepEvent, ToolEvent: ReviewToolEvent})


class ReviewDoneEvent(BaseEvent):
    """The review's verdict; `criteria`, `findings` and `summary` when the reviewer submitted
    a review."""

    type: Literal["review_done"] = "review_done"
    result: str
    version: int | None = None
    error: str | None = None
    tokens: int = 0
    cost_usd: float | None = None
    criteria: tuple[CriterionItem, ...] | None = absent()
    findings: tuple[FindingItem, ...] | None = absent()
    summary: str | None = absent()


class ReviewSkippedEvent(BaseEvent):
    type: Literal["review_skipped"] = "review_skipped"
    step: str
    reason: str
    spent_usd: float
    cap_usd: float | None


class FixStartEvent(BaseEvent):
    type: Literal["fix_start"] = "fix_start"
    batch: str
    review: int | None


class FixDoneEvent(BaseEvent):
    type: Literal["fix_done"] = "fix_done"
    batch: str
    status: str


# --- what the run says along the way ---------------------------------------------------------

class WarningEvent(BaseEvent):
    """Something the run's summary lists too (`batch`: about that worker)."""

    type: Literal["warning"] = "warning"
    message: str
    batch: str | None = absent()


class CostWarningEvent(BaseEvent):
    type: Literal["cost_warning"] = "cost_warning"
    spent_usd: float
    cap_usd: float


class CostCapEvent(BaseEvent):
    type: Literal["cost_cap"] = "cost_cap"
    spent_usd: float
    cap_usd: float
    running: Strs = ()  # the workers told to stop


class CostStopEvent(BaseEvent):
    type: Literal["cost_stop"] = "cost_stop"
    batch: str


class RateLimitStopEvent(BaseEvent):
    type: Literal["rate_limit_stop"] = "rate_limit_stop"
    batch: str
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


Event = Annotated[
    # a worker's progress file
    ProgressEvent
    # relayed by the run
    | AgentSandboxEvent | AgentStartEvent | AgentSetupStartEvent | AgentSetupDoneEvent
    | AgentSpawnEvent | AgentSpawnEndEvent | AgentAttemptEvent | AgentAttemptEndEvent
    | AgentValidationEvent | AgentStepEvent | AgentToolEvent | AgentTruncatedEvent
    | AgentRateLimitedEvent | AgentDoneEvent
    # the run
    | CommittedEvent | RemovedLeftoverEvent | BaseCheckStartEvent | BaseCheckDoneEvent
    | RunStartEvent | WaveStartEvent | BlockedEvent | SkipEvent | FallbackSequentialEvent
    | WorkerStartEvent | WaitingForWorkerEvent | AdoptedEvent | NotAdoptedEvent
    | WorkerTimeoutEvent | ProtectedChangeEvent | WorkerResultEvent | MergedEvent
    | MergeConflictEvent | KeptWorktreeEvent | TargetMovedEvent | IntegrationStartEvent
    | IntegrationStepEvent | IntegrationPassedEvent | IntegrationFailedEvent | WaveDoneEvent
    | WaveAggregatedEvent | ReviewStartEvent | ReviewStepEvent | ReviewToolEvent
    | ReviewDoneEvent | ReviewSkippedEvent | FixStartEvent | FixDoneEvent | WarningEvent
    | CostWarningEvent | CostCapEvent | CostStopEvent | RateLimitStopEvent | InterruptEvent
    | RunDoneEvent,
    Field(discriminator="type")]

# where events go: the run record, `--events`, the live display, a worker's progress file
EventSink = Callable[[BaseEvent], None]


@functools.cache
def _adapter() -> TypeAdapter[Any]:
    """Built on first use: a command that only writes events never pays for it."""
    return TypeAdapter(Event)


def event_classes() -> tuple[type[BaseEvent], ...]:
    """Every class of `Event`, in the union's order."""
    return get_args(get_args(Event)[0])


def parse(line: str | bytes) -> BaseEvent:
    """One event from its wire form, validated strictly; ValueError when it is not JSON, not
    an object, of an unknown type, or has a field missing, unknown or of the wrong type."""
    result: BaseEvent = _adapter().validate_json(line, strict=True)
    return result


def parse_progress(line: str | bytes) -> BaseEvent:
    """One line of a worker's progress file: a progress event and nothing else (a worker
    cannot speak for the run or for another worker); ValueError otherwise."""
    event = parse(line)
    if type(event) not in RELAYED:
        raise ValueError(f"a worker's progress has no {event.type!r} event")
    return event


def wire(event: BaseEvent) -> dict[str, Any]:
    """The event as the documented JSON object: `v`, `t`, `type` (and `batch`) first."""
    data = event.model_dump(mode="json")
    for name in event.absent_fields:
        if data.get(name) is None:
            data.pop(name, None)
    head: dict[str, Any] = {key: data.pop(key) for key in ("v", "t", "type", "batch")
                            if key in data}
    return {**head, **data}


def dumps(event: BaseEvent) -> str:
    """The event as one NDJSON line (without its newline)."""
    return json.dumps(wire(event), ensure_ascii=False)
