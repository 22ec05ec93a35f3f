"""The wire form of every event (docs/events.md, "Every line"; docs/ARCHITECTURE.md, "The
event schema"): the one discriminated union `Event` of all the classes, `wire`/`dumps` that
write an event as version `SCHEMA_VERSION` of the documented JSON line (`v`, `t`, `type` and
`batch` first; a field marked `absent()` left out when None), and `parse`/`parse_progress`
that read a line back as untrusted: strictly, no coercion, no unknown field or type.
"""

import functools
import json
from typing import Annotated, Any, get_args

from pydantic import Field, TypeAdapter

from agentrun.core.events.base import BaseEvent
from agentrun.core.events.progress import (
    RELAYED,
    AgentAttemptEndEvent,
    AgentAttemptEvent,
    AgentDoneEvent,
    AgentRateLimitedEvent,
    AgentSandboxEvent,
    AgentSetupDoneEvent,
    AgentSetupStartEvent,
    AgentSpawnEndEvent,
    AgentSpawnEvent,
    AgentStartEvent,
    AgentStepEvent,
    AgentToolEvent,
    AgentTruncatedEvent,
    AgentValidationEvent,
    ProgressEvent,
)
from agentrun.core.events.review import (
    FixDoneEvent,
    FixStartEvent,
    ReviewDoneEvent,
    ReviewSkippedEvent,
    ReviewStartEvent,
    ReviewStepEvent,
    ReviewToolEvent,
)
from agentrun.core.events.run import (
    AdoptedEvent,
    BaseCheckDoneEvent,
    BaseCheckStartEvent,
    BlockedEvent,
    CommittedEvent,
    CostCapEvent,
    CostStopEvent,
    CostWarningEvent,
    FallbackSequentialEvent,
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
