"""What a run's HTML report shows, read from its record: the run's events
(`.specflow/runs/<id>/events.ndjson`), its result (`result.json`, else the execution state)
and each worker's progress file (in the orchestrator's control directory, run/record.py).

Everything here is read, never trusted: the files hold text that workers and models chose, so
each file is read only up to `MAX_BYTES`, and a line that is not exactly one of the events of
agentrun/core/events/ (a worker's file: one of a worker's own) is skipped. The template
(html.py) escapes every value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from agentrun.core.events import (
    AttemptEndEvent,
    AttemptEvent,
    BaseCheckDoneEvent,
    BaseCheckStartEvent,
    BaseEvent,
    IntegrationFailedEvent,
    IntegrationPassedEvent,
    IntegrationStartEvent,
    MergeConflictEvent,
    MergedEvent,
    ReviewDoneEvent,
    ReviewSkippedEvent,
    ReviewStartEvent,
    StepEvent,
    ToolEvent,
    UsageCounts,
    ValidationEvent,
    WorkerResultEvent,
    WorkerStartEvent,
    parse,
    parse_progress,
)
from agentrun.report.execution_state import RunState

MAX_BYTES = 16 * 1024 * 1024  # of any one file of the record
MAX_SHOWN_TEXT = 4000  # characters of one text shown (an error, a check's output)
RESULT_FILE = "result.json"
E = TypeVar("E", bound=BaseEvent)


def read_events(path: Path, limit: int = MAX_BYTES, *, progress: bool = False
                ) -> list[BaseEvent]:
    """The events of an NDJSON file's first `limit` bytes (nothing when it is missing): a run
    record's, or (`progress`) a worker's own progress events. A line that is not one, exactly,
    is skipped."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit)
    except OSError:
        return []
    read = parse_progress if progress else parse
    out = []
    for line in data.splitlines():
        try:
            out.append(read(line))
        except ValueError:
            continue
    return out


def read_state(run_dir: Path, fallback: Path | None = None) -> RunState | None:
    """The run's result, or the execution state at `fallback` when it is this run's (a run
    that was killed wrote no result)."""
    for path in (run_dir / RESULT_FILE, fallback):
        if path is None or not path.is_file():
            continue
        try:
            with open(path, "rb") as fh:
                state = RunState.from_dict(json.loads(fh.read(MAX_BYTES)))
        except (OSError, ValueError, TypeError):
            continue
        if state.run_id == run_dir.name:
            return state
    return None


def _text(value: Any, limit: int = MAX_SHOWN_TEXT) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[:limit] + " …"


@dataclass
class Bar:
    """One interval on the timeline."""

    kind: str  # attempt | model | tool | validation | merge | check | review | base | setup
    start: float
    end: float
    label: str
    status: str = ""  # ok | failed | ""

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start)


@dataclass
class TimelineRow:
    label: str
    bars: list[Bar] = field(default_factory=list)  # the row's own intervals
    inner: list[Bar] = field(default_factory=list)  # model calls and tools inside them


@dataclass
class AttemptSpan:
    batch: str
    number: int
    start: float
    end: float | None = None
    status: str = ""
    stop_reason: str = ""
    error: str = ""
    retried: bool = False
    model_calls: int = 0
    tools: int = 0


@dataclass
class Report:
    run_id: str
    state: RunState | None
    events: list[BaseEvent]
    progress: dict[str, list[BaseEvent]]
    title: str = ""
    trace_id: str | None = None
    rows: list[TimelineRow] = field(default_factory=list)
    attempts: list[AttemptSpan] = field(default_factory=list)
    start: float = 0.0
    end: float = 0.0

    def of(self, kind: type[E]) -> list[E]:
        return [e for e in self.events if isinstance(e, kind)]

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start)

    @property
    def heading(self) -> str:
        """The spec's id and title; a title that already starts with the id (a spec's
        `# SPEC-7: Title` line) is not prefixed with it again."""
        spec_id = self.state.spec_id if self.state else ""
        if not spec_id:
            return self.title or "Run"
        if not self.title or self.title == spec_id:
            return spec_id
        return self.title if self.title.startswith(f"{spec_id}:") else \
            f"{spec_id}: {self.title}"

    @property
    def reviews(self) -> list[dict[str, Any]]:
        """Each review's verdict, findings and criteria verdicts, every field in place."""
        out = []
        for e in self.of(ReviewDoneEvent):
            out.append({
                "result": _text(e.result, 40), "version": e.version, "error": _text(e.error),
                "tokens": e.tokens, "cost_usd": e.cost_usd, "summary": _text(e.summary),
                "findings": [{k: _text(getattr(f, k)) for k in ("severity", "file", "issue",
                                                                "fix")}
                             for f in e.findings or ()],
                "criteria": [{"criterion": _text(c.criterion, 10),
                              "verdict": _text(c.verdict, 40),
                              "evidence": _text(c.evidence)} for c in e.criteria or ()]})
        return out

    @property
    def base_check(self) -> BaseCheckDoneEvent | None:
        found = self.of(BaseCheckDoneEvent)
        return found[-1] if found else None


def collect(run_dir: Path, control: Path | None = None, *, state_file: Path | None = None,
            title: str = "", trace_id: str | None = None) -> Report:
    """Read the run record in `run_dir` (and the workers' progress under `control`)."""
    events = read_events(run_dir / "events.ndjson")
    progress: dict[str, list[BaseEvent]] = {}
    for base in (run_dir / "workers", *((control / "workers",) if control else ())):
        if not base.is_dir():
            continue
        for folder in sorted(base.iterdir()):
            found = read_events(folder / "progress.ndjson", progress=True)
            if found:
                progress[folder.name] = found
    report = Report(run_dir.name, read_state(run_dir, state_file), events, progress,
                    title=title, trace_id=trace_id)
    times = [e.t for e in events] + [p.t for ps in progress.values() for p in ps]
    report.start, report.end = (min(times), max(times)) if times else (0.0, 0.0)
    _timeline(report)
    return report


def _pairs(events: list[BaseEvent], start: type[BaseEvent], ends: tuple[type[BaseEvent], ...],
           key: str | None) -> list[tuple[Any, Any]]:
    """Each `start` event with the next of `ends` (of the same `key` value, if given)."""
    out: list[tuple[Any, Any]] = []
    open_: list[BaseEvent] = []
    for e in events:
        if isinstance(e, start):
            open_.append(e)
        elif isinstance(e, ends):
            match = next((o for o in open_
                          if key is None or getattr(o, key) == getattr(e, key)), None)
            if match is not None:
                open_.remove(match)
                out.append((match, e))
    out += [(o, None) for o in open_]
    return sorted(out, key=lambda pair: pair[0].t)


def _timeline(report: Report) -> None:
    """The rows: the base check, each worker attempt (its model calls and tools inside), the
    merges, the integration checks and the reviews."""
    end = report.end
    rows = report.rows

    def bar(kind: str, start: float, b: BaseEvent | None, label: str,
            status: str = "") -> Bar:
        return Bar(kind, start, end if b is None else max(b.t, start), label, status)

    base = TimelineRow("base check")
    for a, b in _pairs(report.events, BaseCheckStartEvent, (BaseCheckDoneEvent,), None):
        base.bars.append(bar("base", a.t, b, f"base check: {_text(a.command, 200)}",
                             "" if b is None else "ok" if b.ok else "failed"))
    if base.bars:
        rows.append(base)
    results = {e.batch: e for e in report.of(WorkerResultEvent)}
    for start in report.of(WorkerStartEvent):
        _worker_rows(report, start.batch, start, results.get(start.batch))
    merges = TimelineRow("merges")
    for e in report.events:
        if isinstance(e, MergedEvent | MergeConflictEvent):
            ok = isinstance(e, MergedEvent)
            merges.bars.append(bar("merge", e.started, e, f"merge {_text(e.batch, 100)}"
                                   + ("" if ok else ": conflict"), "ok" if ok else "failed"))
    if merges.bars:
        rows.append(merges)
    checks = TimelineRow("integration checks")
    for a, b in _pairs(report.events, IntegrationStartEvent,
                       (IntegrationPassedEvent, IntegrationFailedEvent), "wave"):
        checks.bars.append(bar("check", a.t, b, f"wave {_text(a.wave, 40)}: integration check",
                               "" if b is None else "ok"
                               if isinstance(b, IntegrationPassedEvent) else "failed"))
    if checks.bars:
        rows.append(checks)
    review = TimelineRow("review")
    for a, b in _pairs(report.events, ReviewStartEvent, (ReviewDoneEvent, ReviewSkippedEvent),
                       None):
        result = _text(b.result, 40) if isinstance(b, ReviewDoneEvent) else ""
        review.bars.append(bar("review", a.t, b, f"review: {result or 'not finished'}",
                               "ok" if result == "APPROVED" else "failed" if b else ""))
    if review.bars:
        rows.append(review)


def _worker_rows(report: Report, batch: str, start: WorkerStartEvent,
                 result: WorkerResultEvent | None) -> None:
    """One row per attempt of `batch`'s worker, from its progress file."""
    events = report.progress.get(batch, [])
    t_end = result.t if result is not None else report.end
    attempts = _pairs(events, AttemptEvent, (AttemptEndEvent,), "attempt")
    if not attempts:  # it never got to an attempt (set-up, a crash): the worker's span
        status = _text(result.status, 40) if result is not None else "running"
        report.rows.append(TimelineRow(batch, [Bar("attempt", start.t, max(start.t, t_end),
                                           f"{batch}: {status}",
                                           "failed" if result else "")]))
        return
    for a, b in attempts:
        begin, number = a.t, a.attempt
        stop = b.t if b is not None else t_end
        status = _text(b.status, 40) if b is not None else ""
        att = AttemptSpan(batch, number, begin, stop, status,
                      _text(b.stop_reason, 40) if b is not None else "",
                      _text(b.error) if b is not None else "",
                      b is not None and b.retry)
        row = TimelineRow(f"{batch} #{number}", [Bar(
            "attempt", begin, max(begin, stop),
            f"{batch} attempt {number}: {status or 'running'}"
            + (f" ({att.stop_reason})" if att.stop_reason and att.stop_reason != "completed"
               else ""), "ok" if status == "complete" else "failed" if b else "")])
        for e in events:
            if not isinstance(e, StepEvent | ToolEvent | ValidationEvent) or e.started is None:
                continue
            began, t = e.started, e.t
            # agentrun's loop says which attempt; a coding-agent CLI's events: by time
            if (e.attempt != number) if e.attempt is not None else not (begin <= began < stop):
                continue
            if isinstance(e, StepEvent):
                att.model_calls += 1
                usage = e.usage or UsageCounts()
                tokens = f"{usage.input_tokens:,} input, {usage.output_tokens:,} output"
                row.inner.append(Bar("model", began, max(began, t),
                                     f"model call {att.model_calls} ({tokens})"))
            elif isinstance(e, ToolEvent):
                att.tools += 1
                row.inner.append(Bar("tool", began, max(began, t), _text(e.name, 80)
                                     + (" (error)" if e.error else ""),
                                     "failed" if e.error else "ok"))
            else:
                row.inner.append(Bar("validation", began, max(began, t),
                                     "validation " + ("passed" if e.ok else "failed"),
                                     "ok" if e.ok else "failed"))
        report.attempts.append(att)
        report.rows.append(row)
