"""The live display's state: one row per worker, group, check or review, and what each of the
orchestrator's events does to those rows and to the run's totals — pure, with no Rich.

`PlainProgress` shows it as timestamped lines (`cli/event_lines.py`); `cli/live.py` draws it
as a Rich table. Dispatch is by the event's class (docs/ARCHITECTURE.md, "Who reads them, by
class").
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from agentrun.cli.event_lines import describe
from agentrun.cli.output import Output
from agentrun.core.errors import BadInput
from agentrun.core.events import (
    AgentAttemptEvent,
    AgentStartEvent,
    AgentStepEvent,
    BaseCheckDoneEvent,
    BaseCheckStartEvent,
    BaseEvent,
    FixStartEvent,
    IntegrationFailedEvent,
    IntegrationPassedEvent,
    IntegrationStartEvent,
    IntegrationStepEvent,
    MergeConflictEvent,
    MergedEvent,
    ReviewDoneEvent,
    ReviewStartEvent,
    ReviewStepEvent,
    RunStartEvent,
    UsageCounts,
    WaveDoneEvent,
    WaveStartEvent,
    WorkerResultEvent,
    WorkerStartEvent,
    WorkerTimeoutEvent,
)
from agentrun.core.usage import Usage
from agentrun.providers.pricing import cost_usd

QUEUED = "queued"  # in a wave, waiting for a free slot under --max-parallel
BASE_CHECK = "base check"  # the row of the validation command on the run's base commit


@dataclass
class LiveRow:
    batch: str
    groups: list[str]
    state: str = "starting"
    step: int = 0
    tool: str = ""
    tokens: int = 0
    cost: float | None = None
    model: str = ""
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None

    @property
    def elapsed(self) -> float:
        return (self.ended or time.monotonic()) - self.started


Handler = Callable[["Progress", Any], None]
_HANDLERS: dict[type[BaseEvent], Handler] = {}  # what each event changes in the display


def _on(*classes: type[BaseEvent]) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        for cls in classes:
            _HANDLERS[cls] = handler
        return handler
    return register


class Progress:
    """Turns events into rows and running totals; subclasses decide how to show them.

    `pricing` is the config's price overrides: a worker's cost is priced from the usage its
    progress events carry, so it grows while the worker runs, not only when it ends.
    """

    def __init__(self, out: Output, pricing: dict[str, Any] | None = None) -> None:
        self.out = out
        self.pricing = pricing
        self.rows: dict[str, LiveRow] = {}
        self.waves_total = 0
        self.waves_done = 0
        self.phase = ""  # what the run is doing: a wave, its integration check, the review
        self.reviews = 0
        self.started = time.monotonic()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Hold the display still while a person answers a question (nothing to hold here)."""
        yield

    def __call__(self, event: BaseEvent) -> None:
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)
        self.show(event)

    # -- the run and its waves --------------------------------------------------------------
    @_on(RunStartEvent)
    def _run_start(self, e: RunStartEvent) -> None:
        self.waves_total = e.waves
        if BASE_CHECK not in self.rows:  # else the base check's time counts too
            self.started = time.monotonic()
        self.phase = f"Wave 1/{max(self.waves_total, 1)}"

    @_on(WaveStartEvent)
    def _wave_start(self, e: WaveStartEvent) -> None:
        self.phase = f"Wave {e.wave}/{max(self.waves_total, 1)}"
        for name in e.batches:  # under --max-parallel, some wait for a free slot
            self.rows.setdefault(name, LiveRow(name, name.split("_"), state=QUEUED))

    @_on(WaveDoneEvent)
    def _wave_done(self, e: WaveDoneEvent) -> None:
        self.waves_done += 1
        total = max(self.waves_total, 1)
        self.phase = f"Wave {min(self.waves_done + 1, total)}/{total}"

    # -- the checks and the review: rows of their own ---------------------------------------
    @_on(BaseCheckStartEvent)
    def _base_check_start(self, e: BaseCheckStartEvent) -> None:
        self.phase = "Base check"
        self.rows[BASE_CHECK] = LiveRow(BASE_CHECK, [], state="checking")

    @_on(BaseCheckDoneEvent)
    def _base_check_done(self, e: BaseCheckDoneEvent) -> None:
        self._ended(self.rows.get(BASE_CHECK), e.ok)

    @_on(IntegrationStartEvent)
    def _integration_start(self, e: IntegrationStartEvent) -> None:
        self.phase = f"Wave {e.wave}/{max(self.waves_total, 1)} · integration check"
        self.rows[f"check {e.wave}"] = LiveRow(f"check {e.wave}", [], state="checking")

    @_on(IntegrationStepEvent)
    def _integration_step(self, e: IntegrationStepEvent) -> None:
        """The checks of a culprit search."""
        row = self.rows.get(f"check {e.wave}")
        if row is not None:
            row.step = e.check
            row.tool = "+".join(e.groups) or "the base"

    @_on(IntegrationPassedEvent, IntegrationFailedEvent)
    def _integration_done(self, e: IntegrationPassedEvent | IntegrationFailedEvent) -> None:
        self._ended(self.rows.get(f"check {e.wave}"), isinstance(e, IntegrationPassedEvent))

    def _ended(self, row: LiveRow | None, passed: bool) -> None:
        if row is not None:
            row.state, row.ended = ("passed" if passed else "failed"), time.monotonic()

    @_on(ReviewStartEvent)
    def _review_start(self, e: ReviewStartEvent) -> None:
        self.reviews += 1
        self.phase = "Review"
        name = self._review_row()
        self.rows[name] = LiveRow(name, [], state="reviewing", model=e.model)

    @_on(ReviewStepEvent)
    def _review_step(self, e: ReviewStepEvent) -> None:
        """The reviewer's turns and tokens."""
        row = self.rows.get(self._review_row())
        if row is not None:
            self._stepped(row, e)

    @_on(ReviewDoneEvent)
    def _review_done(self, e: ReviewDoneEvent) -> None:
        row = self.rows.get(self._review_row())
        if row is None:
            return
        row.state = "error" if e.error and not e.version else e.result.lower().replace("_", " ")
        row.tokens = e.tokens
        row.cost = e.cost_usd
        row.ended = time.monotonic()

    def _review_row(self) -> str:
        return "review" if self.reviews <= 1 else f"review {self.reviews}"

    @_on(FixStartEvent)
    def _fix_start(self, e: FixStartEvent) -> None:
        self.phase = f"Fix {e.batch}"

    # -- the workers ------------------------------------------------------------------------
    @_on(WorkerStartEvent)
    def _worker_start(self, e: WorkerStartEvent) -> None:
        self.rows[e.batch] = LiveRow(e.batch, list(e.groups))

    @_on(AgentStartEvent)
    def _agent_start(self, e: AgentStartEvent) -> None:
        if (row := self.rows.get(e.batch)) is not None:
            row.model = e.model or row.model

    @_on(AgentStepEvent)
    def _agent_step(self, e: AgentStepEvent) -> None:
        if (row := self.rows.get(e.batch)) is not None:
            row.state = "working"
            self._stepped(row, e)

    def _stepped(self, row: LiveRow, e: AgentStepEvent | ReviewStepEvent) -> None:
        """A turn (`step`, `tool`) or a model call (`tokens`, `worker_usage`), or both."""
        if e.step is not None:
            row.step, row.tool = e.step, e.tool or row.tool
        if e.tokens is not None:
            row.tokens = e.tokens
        if e.worker_usage is not None:
            row.cost = self._price(row.model, e.worker_usage, row.cost)

    @_on(AgentAttemptEvent)
    def _agent_attempt(self, e: AgentAttemptEvent) -> None:
        if (row := self.rows.get(e.batch)) is not None:
            row.state = f"attempt {e.attempt}"

    @_on(WorkerResultEvent)
    def _worker_result(self, e: WorkerResultEvent) -> None:
        if (row := self.rows.get(e.batch)) is None:
            return
        row.state = e.status
        if e.stop_reason and e.stop_reason not in ("completed", "error", "interrupted"):
            row.state += f" ({e.stop_reason})"  # a limit or a model fault: say which
        row.tokens = e.tokens
        row.cost = e.cost_usd
        row.ended = time.monotonic()

    @_on(WorkerTimeoutEvent, MergeConflictEvent, MergedEvent)
    def _worker_end(self, e: WorkerTimeoutEvent | MergeConflictEvent | MergedEvent) -> None:
        if (row := self.rows.get(e.batch)) is not None:
            row.state = ("timeout" if isinstance(e, WorkerTimeoutEvent) else
                         "conflict" if isinstance(e, MergeConflictEvent) else "merged")

    def _price(self, model: str, usage: UsageCounts, known: float | None) -> float | None:
        if not model:
            return known
        try:
            return cost_usd(model, Usage(**dict(usage)), self.pricing)
        except (TypeError, ValueError, BadInput):  # an unknown price changes nothing
            return known

    def totals(self) -> tuple[int, float | None, bool, float]:
        """Tokens, known cost (None: nothing priced yet), whether some cost is unknown
        (a model without a price), and seconds since the run started."""
        active = [r for r in self.rows.values() if r.state != QUEUED]
        costs = [r.cost for r in active if r.cost is not None]
        unknown = any(r.cost is None and r.tokens for r in active)
        return (sum(r.tokens for r in active), sum(costs) if costs else None, unknown,
                time.monotonic() - self.started)

    def show(self, event: BaseEvent) -> None:
        raise NotImplementedError


class PlainProgress(Progress):
    """One timestamped line per meaningful event (CI logs, pipes)."""

    def show(self, event: BaseEvent) -> None:
        text = describe(event)
        if text:
            self.out.progress(text)

