"""What every event is made of: `BaseEvent` (the schema version, the time, the `type`
discriminator, which optional fields the wire form leaves out), the structured values inside
events, and the field groups several events share (a worker's `batch`, a worker's `batch` and
`groups`, a wave), so that the events that say the same thing say it with the same fields.
The events themselves live beside this module by who says them (docs/ARCHITECTURE.md, "The
event schema"); docs/events.md documents them.
"""

import time
from collections.abc import Callable
from typing import Any, ClassVar, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt

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


# where events go: the run record, `--events`, the live display, a worker's progress file
EventSink = Callable[[BaseEvent], None]


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


# --- field groups several events share ---------------------------------------------------------
# A class that takes more than one lists them in the order its fields are written: the last
# base's fields come first.

class BatchFields(BaseEvent):
    """An event about one worker."""

    batch: str  # the worker: its task groups joined by `_`


class BatchGroupsFields(BatchFields):
    """An event about one worker that names its task groups."""

    groups: Strs


class WaveFields(BaseEvent):
    """An event about one wave."""

    wave: str


class CheckFields(BaseEvent):
    """A check command run on a commit."""

    command: str
    commit: str


class CostFields(BaseEvent):
    """The run's spending against its cap."""

    spent_usd: float
    cap_usd: float


def fields_of(event: BaseEvent) -> dict[str, Any]:
    """The event's fields but its `type`: what its twin of another type is made from."""
    return {name: getattr(event, name) for name in type(event).model_fields if name != "type"}
