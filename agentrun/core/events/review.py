"""The review and fix cycles' events (docs/events.md, "Event types"): the review's start, the
reviewer's model turns and tool calls passed on from its own progress through the table
`REVIEWED` (the reviewer runs in the run's process: review/reviewer.py), its verdict or why it
was skipped, and each fix worker's start and end (docs/ARCHITECTURE.md, "The event schema").
"""

from typing import Final, Literal

from agentrun.core.events.base import (
    BaseEvent,
    BatchFields,
    CriterionItem,
    FindingItem,
    absent,
    fields_of,
)
from agentrun.core.events.progress import StepEvent, StepFields, ToolEvent, ToolFields

# --- the review and fix cycles ---------------------------------------------------------------

class ReviewStartEvent(BaseEvent):
    type: Literal["review_start"] = "review_start"
    spec: str
    model: str
    provider: str = ""  # empty: none configured (or a record written before it was said)


class ReviewStepEvent(StepFields):
    """One reviewer model turn (the reviewer's `StepEvent`)."""

    type: Literal["review_step"] = "review_step"


class ReviewToolEvent(ToolFields):
    """One reviewer tool call (the reviewer's `ToolEvent`)."""

    type: Literal["review_tool"] = "review_tool"


# the reviewer's progress that the run passes on (the reviewer runs in the run's process)
REVIEWED: Final[dict[type[BaseEvent], type[BaseEvent]]] = {
    StepEvent: ReviewStepEvent, ToolEvent: ReviewToolEvent}


def reviewed(event: BaseEvent) -> BaseEvent | None:
    """The reviewer's progress event as the run's `review_*` event; None for one the run does
    not pass on."""
    cls = REVIEWED.get(type(event))
    return None if cls is None else cls.model_validate(fields_of(event))


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


class FixStartEvent(BatchFields):
    type: Literal["fix_start"] = "fix_start"
    review: int | None


class FixDoneEvent(BatchFields):
    type: Literal["fix_done"] = "fix_done"
    status: str
