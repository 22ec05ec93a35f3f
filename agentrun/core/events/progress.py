"""A worker's own progress events (its `progress.ndjson`: docs/events.md, "A worker's
own progress") and their twins the run relays as `agent_*` with the worker's batch. Each pair
shares one field class, so that a worker's event and the run's copy of it stay the same; the
table `RELAYED` maps one to the other (docs/ARCHITECTURE.md, "The event schema"). The
reviewer's model turns and tool calls reuse the step and tool fields (review.py).
"""

from typing import Final, Literal

from agentrun.core.events.base import BaseEvent, BatchFields, Strs, UsageCounts, absent, fields_of

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


class StepFields(_Where):
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


class ToolFields(_Where):
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


class StepEvent(StepFields):
    type: Literal["step"] = "step"


class ToolEvent(ToolFields):
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

class AgentSandboxEvent(_SandboxFields, BatchFields):
    type: Literal["agent_sandbox"] = "agent_sandbox"


class AgentStartEvent(_StartFields, BatchFields):
    type: Literal["agent_start"] = "agent_start"


class AgentSetupStartEvent(_SetupStartFields, BatchFields):
    type: Literal["agent_setup_start"] = "agent_setup_start"


class AgentSetupDoneEvent(_SetupDoneFields, BatchFields):
    type: Literal["agent_setup_done"] = "agent_setup_done"


class AgentSpawnEvent(_SpawnFields, BatchFields):
    type: Literal["agent_spawn"] = "agent_spawn"


class AgentSpawnEndEvent(_SpawnFields, BatchFields):
    type: Literal["agent_spawn_end"] = "agent_spawn_end"


class AgentAttemptEvent(_AttemptFields, BatchFields):
    type: Literal["agent_attempt"] = "agent_attempt"


class AgentAttemptEndEvent(_AttemptEndFields, BatchFields):
    type: Literal["agent_attempt_end"] = "agent_attempt_end"


class AgentValidationEvent(_ValidationFields, BatchFields):
    type: Literal["agent_validation"] = "agent_validation"


class AgentStepEvent(StepFields, BatchFields):
    type: Literal["agent_step"] = "agent_step"


class AgentToolEvent(ToolFields, BatchFields):
    type: Literal["agent_tool"] = "agent_tool"


class AgentTruncatedEvent(_TruncatedFields, BatchFields):
    type: Literal["agent_truncated"] = "agent_truncated"


class AgentRateLimitedEvent(_RateLimitedFields, BatchFields):
    type: Literal["agent_rate_limited"] = "agent_rate_limited"


class AgentDoneEvent(_DoneFields, BatchFields):
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


def relayed(event: BaseEvent, batch: str) -> BaseEvent:
    """A worker's progress event as the run's `agent_*` event of worker `batch` (its time
    kept: when the worker said it)."""
    cls = RELAYED[type(event)]
    return cls.model_validate({**fields_of(event), "batch": batch})
