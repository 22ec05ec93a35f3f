"""Run progress for people: a live Rich table in a terminal, timestamped lines elsewhere.

Both consume the orchestrator's events; neither writes to stdout (that belongs to the final
report or the `--json` document).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from agentrun.agent.interaction import screen_held_by
from agentrun.cli.output import Output
from agentrun.core.errors import BadInput
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
    AgentStartEvent,
    AgentStepEvent,
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
    ReviewStepEvent,
    ReviewToolEvent,
    RunDoneEvent,
    RunStartEvent,
    SkipEvent,
    TargetMovedEvent,
    UsageCounts,
    WaitingForWorkerEvent,
    WarningEvent,
    WaveAggregatedEvent,
    WaveDoneEvent,
    WaveStartEvent,
    WorkerResultEvent,
    WorkerStartEvent,
    WorkerTimeoutEvent,
)
from agentrun.core.usage import Usage
from agentrun.providers.pricing import cost_usd

if TYPE_CHECKING:
    from rich.console import Group, RenderableType
    from rich.live import Live
    from rich.table import Table

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


class LiveProgress(Progress):
    """A live table (one row per worker) under a line with the wave's progress bar and the
    run's totals, on stderr. Questions pause it: the table is erased while a person reads
    and answers, then drawn again below the answer, so the screen never holds two."""

    def __enter__(self) -> LiveProgress:
        self._lock = threading.RLock()
        self._held: list[str] = []  # lines that came while a question was on screen
        self._live: Any = self._start()
        self._screen = screen_held_by(self.paused)
        self._screen.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._screen.__exit__(None, None, None)
        with self._lock:
            if self._live is not None:
                self._live.update(self._render())
                self._live.__exit__(None, None, None)

    def _start(self) -> Live:
        from rich.live import Live

        live = Live(self._render(), console=self.out.stderr, refresh_per_second=8,
                    transient=False, get_renderable=self._render)
        live.__enter__()
        return live

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        with self._lock:
            live, self._live = self._live, None
        if live is None:  # already paused (a question inside a question)
            yield
            return
        live.transient = True  # stopping erases the table instead of leaving a copy behind
        live.stop()
        try:
            yield
        finally:
            with self._lock:
                self._live = self._start()
                for line in self._held:
                    self._live.console.print(line)
                self._held.clear()

    # what the table does not show: said above it
    SAID: tuple[type[BaseEvent], ...] = (MergeConflictEvent, InterruptEvent,
                                         FallbackSequentialEvent, KeptWorktreeEvent,
                                         BlockedEvent, CommittedEvent)

    def show(self, event: BaseEvent) -> None:
        line = describe(event) if isinstance(event, self.SAID) else None
        with self._lock:
            if self._live is None:
                if line:
                    self._held.append(f"[yellow]{escape(line)}[/yellow]")
                return
            if line:
                self._live.console.print(f"[yellow]{escape(line)}[/yellow]")

    def _render(self) -> Group:
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        table = Table(box=None, header_style="bold", pad_edge=False)
        for col in ("Worker", "Groups", "State", "Step", "Last tool", "Tokens", "Cost",
                    "Elapsed"):
            table.add_column(col, justify="right" if col in ("Step", "Tokens", "Cost",
                                                             "Elapsed") else "left")
        styles = {"complete": "green", "merged": "green", "failed": "red", "timeout": "red",
                  "conflict": "red", "partial": "yellow", "interrupted": "yellow",
                  QUEUED: "dim", "passed": "green", "approved": "green",
                  "changes requested": "red", "error": "red"}
        for row in list(self.rows.values()):
            waiting = row.state == QUEUED
            table.add_row(row.batch, ",".join(row.groups),
                          Text(row.state, style=styles.get(row.state.split(" ")[0], "cyan")),
                          "" if waiting else str(row.step), row.tool,
                          "" if waiting else f"{row.tokens:,}",
                          "" if waiting else money(row.cost),
                          "" if waiting else clock(row.elapsed))
        total = max(self.waves_total, 1)
        bar = ProgressBar(total=total, completed=self.waves_done, width=30)
        phase = self.phase or f"Wave {min(self.waves_done + 1, total)}/{total}"
        head = Text(f"{phase}  ", style="bold")
        tokens, cost, unknown, elapsed = self.totals()
        shown = money(cost) + ("+ (some prices unknown)" if unknown and cost is not None else "")
        tail = Text(f"  {tokens:,} tokens · {shown} · {clock(elapsed)}")
        return Group(_line(head, bar, tail), table)


def money(cost: float | None) -> str:
    return "—" if cost is None else f"${cost:.4f}"


def clock(seconds: float) -> str:
    """"42.0s" under a minute, "3m 07s" after (a run's total is watched in minutes)."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m {secs:02d}s" if minutes < 60 else f"{minutes // 60}h {minutes % 60:02d}m"


def _line(*cells: RenderableType) -> Table:
    from rich.table import Table

    grid = Table.grid()
    grid.add_row(*cells)
    return grid


def progress_for(out: Output, pricing: dict[str, Any] | None = None) -> Progress:
    if out.mode == "human":
        return LiveProgress(out, pricing)
    return PlainProgress(out, pricing)
