"""The run's events as spans (GenAI semantic conventions for model and tool calls).

`RunTrace` consumes the orchestrator's events: the run (root), the spec's audit as the run
found it (its status and how many audits it had), the base check, each wave, each group's
worker (from the moment its worktree is made to its verified result), each merge, integration
check, fix and the review, with the reviewer's model and tool calls. `WorkerTrace`
consumes a worker's progress events, in the worker's process: each attempt, model call, tool
call, validation and set-up, as children of the group's span (`AuditTrace`, audit.py, is
`agentrun audit`'s). Spans that other spans hang under start when their start event comes;
the others are made when they end, from the start time the event carries (`started`), so no
span waits on anything but the events.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from agentrun.core.events import (
    AttemptEndEvent,
    AttemptEvent,
    BaseCheckDoneEvent,
    BaseCheckStartEvent,
    BaseEvent,
    DoneEvent,
    FixDoneEvent,
    FixStartEvent,
    IntegrationFailedEvent,
    IntegrationPassedEvent,
    IntegrationStartEvent,
    MergeConflictEvent,
    MergedEvent,
    ReviewDoneEvent,
    ReviewStartEvent,
    ReviewStepEvent,
    ReviewToolEvent,
    RunDoneEvent,
    RunStartEvent,
    SetupDoneEvent,
    SetupStartEvent,
    StartEvent,
    StepEvent,
    ToolEvent,
    ValidationEvent,
    WarningEvent,
    WaveDoneEvent,
    WaveStartEvent,
    WorkerResultEvent,
    WorkerStartEvent,
)
from agentrun.telemetry.export import WORKER_FLUSH_S, pipeline

# an event that spans a time: it ended at `t`, began at `started`
Timed = (StepEvent | ReviewStepEvent | ToolEvent | ReviewToolEvent | MergedEvent
         | MergeConflictEvent | ValidationEvent)

FAILED = {"failed", "aborted", "error", "interrupted", "blocked"}
# the provider a coding-agent CLI calls (its own model calls, read from its stream)
CLI_PROVIDER = {"claude-code": "anthropic", "codex": "openai"}
_PROPAGATOR = TraceContextTextMapPropagator()


def ns(seconds: Any) -> int | None:
    """Epoch seconds (an event's `t` or `started`) as nanoseconds; None if not a number."""
    if isinstance(seconds, int | float) and not isinstance(seconds, bool):
        return int(seconds * 1e9)
    return None


def _attrs(**values: Any) -> dict[str, Any]:
    """Span attributes without the missing ones (text cut to a sane length)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, str):
            value = value[:1000]
        elif isinstance(value, list | tuple):
            value = [str(v)[:200] for v in value][:50]
        elif not isinstance(value, bool | int | float):
            value = str(value)[:1000]
        out[key.replace("__", ".")] = value
    return out


def _usage(event: StepEvent | ReviewStepEvent) -> dict[str, Any]:
    usage = event.usage
    return {"gen_ai.usage.input_tokens": usage and usage.input_tokens,
            "gen_ai.usage.output_tokens": usage and usage.output_tokens,
            "gen_ai.usage.cache_read.input_tokens": usage and usage.cache_read_tokens,
            "gen_ai.usage.cache_creation.input_tokens": usage and usage.cache_write_tokens}


class Spans:
    """What both traces share: the tracer, open spans by key, and spans made whole."""

    def __init__(self) -> None:
        self.pipe = pipeline()
        self.tracer = self.pipe.tracer
        self.open: dict[tuple[str, ...], Span] = {}

    def start(self, key: tuple[str, ...], name: str, parent: Span | Context | None,
              when: Any = None, kind: SpanKind = SpanKind.INTERNAL, **attrs: Any) -> Span:
        context = parent if isinstance(parent, Context) or parent is None else \
            trace.set_span_in_context(parent)
        span = self.tracer.start_span(name, context=context, kind=kind,
                                      attributes=_attrs(**attrs),
                                      start_time=ns(when) or time.time_ns())
        self.open[key] = span
        return span

    def end(self, key: tuple[str, ...], when: Any = None, failed: bool | None = None,
            why: str | None = None, **attrs: Any) -> Span | None:
        span = self.open.pop(key, None)
        if span is None:
            return None
        span.set_attributes(_attrs(**attrs))
        if failed is not None:
            span.set_status(Status(StatusCode.ERROR, (why or "")[:300]) if failed
                            else Status(StatusCode.OK))
        span.end(end_time=ns(when) or time.time_ns())
        return span

    def whole(self, name: str, parent: Span | Context | None, event: Timed,
              kind: SpanKind = SpanKind.INTERNAL, failed: bool | None = None,
              **attrs: Any) -> None:
        """A span that ended at the event's `t`, begun at its `started`."""
        end = ns(event.t) or time.time_ns()
        begin = ns(event.started) or end
        key = ("whole", name, str(id(event)))
        self.start(key, name, parent, begin / 1e9, kind, **attrs)
        self.end(key, max(begin, end) / 1e9, failed)

    def close_all(self, failed: bool = False) -> None:
        for key in sorted(self.open, key=len, reverse=True):  # children before parents
            self.end(key, failed=True if failed else None, why="ended unfinished")

    def end_trace(self, root: tuple[str, ...], when: Any = None, failed: bool = True,
                  why: str = "") -> None:
        """End every open span, the `root` last, then push them out, waiting a bounded
        time."""
        span = self.open.pop(root, None)
        self.close_all(failed)
        if span is not None:
            self.open[root] = span
            self.end(root, when, failed=failed, why=why)
        self.pipe.flush()


def chat_span(spans: Spans, parent: Span | Context | None, event: StepEvent | ReviewStepEvent,
          provider: str, model: str, **attrs: Any) -> None:
    """One model call (`gen_ai.operation.name` chat)."""
    spans.whole(f"chat {model}".strip(), parent, event, SpanKind.CLIENT,
                gen_ai__operation__name="chat", gen_ai__system=provider,
                gen_ai__provider__name=provider, gen_ai__request__model=model,
                **_usage(event), **attrs)


def tool_span(spans: Spans, parent: Span | Context | None,
          event: ToolEvent | ReviewToolEvent) -> None:
    name = event.name or "tool"
    spans.whole(f"execute_tool {name}", parent, event, failed=event.error,
                gen_ai__operation__name="execute_tool", gen_ai__tool__name=name)


class RunTrace(Spans):
    """The orchestrator's side: one trace per run, its root the run itself."""

    def __init__(self, run_id: str, spec_id: str, mode: str, parent: str | None = None) -> None:
        super().__init__()
        self.spec_id = spec_id
        self.root = self.start(("run",), f"agentrun run {spec_id}",
                               _PROPAGATOR.extract({"traceparent": parent}) if parent else None,
                               agentrun__run_id=run_id, agentrun__spec=spec_id,
                               agentrun__mode=mode)
        self.trace_id = format(self.root.get_span_context().trace_id, "032x")
        self.waves: dict[str, Span] = {}
        self.model = ""  # the reviewer's
        self.provider = ""
        self.closed = False

    def parent_for(self, batch: str) -> str:
        """The W3C traceparent of `batch`'s group span (started now, if not yet), which its
        worker continues."""
        span = self.open.get(("group", batch)) or self._group(batch, None)
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, trace.set_span_in_context(span))
        return carrier.get("traceparent", "")

    def _group(self, batch: str, event: WorkerStartEvent | None) -> Span:
        wave = next(reversed(self.waves.values()), None) if self.waves else None
        return self.start(("group", batch), f"group {batch}", wave or self.root,
                          event and event.t, agentrun__batch=batch,
                          agentrun__groups=event and event.groups)

    def on_event(self, e: BaseEvent) -> None:
        with contextlib.suppress(Exception):  # a trace must never break the run
            self._on(e)

    def _on(self, e: BaseEvent) -> None:  # noqa: C901 - one case an event type
        t = e.t
        match e:
            case BaseCheckStartEvent():
                self.start(("base",), "base check", self.root, t,
                           agentrun__command=e.command, agentrun__commit=e.commit)
            case BaseCheckDoneEvent():
                self.end(("base",), t, failed=not e.ok)
            case RunStartEvent():
                self.root.set_attributes(_attrs(agentrun__waves=e.waves,
                                                agentrun__sandbox=e.sandbox))
                if e.audit_status is not None:  # the run's audit gate: what it found
                    self.start(("audit",), f"audit {self.spec_id}", self.root, t,
                               agentrun__audit__status=e.audit_status,
                               agentrun__audit__count=e.audits,
                               agentrun__audited=e.audit_status.lower() == "audited")
                    self.end(("audit",), t)
                if e.aggregate_wave:  # a CI aggregate: one job of the run
                    self.root.update_name(f"agentrun aggregate {self.spec_id} wave "
                                          f"{e.aggregate_wave}")
            case WaveStartEvent():
                self.waves[e.wave] = self.start(("wave", e.wave), f"wave {e.wave}", self.root,
                                                t, agentrun__wave=e.wave,
                                                agentrun__batches=e.batches)
            case WaveDoneEvent():
                self.end(("wave", e.wave), t, failed=bool(e.failed),
                         why=f"failed: {list(e.failed)}", agentrun__failed=e.failed)
            case WorkerStartEvent():
                span = self.open.get(("group", e.batch)) or self._group(e.batch, e)
                span.set_attributes(_attrs(agentrun__groups=e.groups,
                                           agentrun__branch=e.branch))
            case WorkerResultEvent():
                self.end(("group", e.batch), t, failed=e.status in FAILED, why=e.error,
                         agentrun__status=e.status, agentrun__stop_reason=e.stop_reason,
                         agentrun__cost_usd=e.cost_usd, agentrun__tokens=e.tokens,
                         agentrun__commits=e.commits, agentrun__error=e.error)
            case MergedEvent() | MergeConflictEvent():
                parent = next(reversed(self.waves.values()), None) if self.waves else None
                commit, conflicts = (e.commit, None) if isinstance(e, MergedEvent) else \
                    (None, e.conflicts)
                self.whole("merge", parent or self.root, e, failed=conflicts is not None,
                           agentrun__batch=e.batch, agentrun__commit=commit,
                           agentrun__conflicts=conflicts)
            case IntegrationStartEvent():
                self.start(("check", e.wave), "integration check",
                           self.waves.get(e.wave) or self.root, t, agentrun__wave=e.wave,
                           agentrun__command=e.command, agentrun__commit=e.commit)
            case IntegrationPassedEvent():
                self.end(("check", e.wave), t, failed=False)
            case IntegrationFailedEvent():
                self.end(("check", e.wave), t, failed=True,
                         agentrun__culprits=[" + ".join(c) for c in e.culprits])
            case ReviewStartEvent():
                self.model, self.provider = e.model, e.provider
                self.start(("review",), "review", self.root, t, gen_ai__operation__name=
                           "invoke_agent", gen_ai__agent__name="code-reviewer",
                           gen_ai__request__model=self.model)
            case ReviewStepEvent() if e.started is not None:
                chat_span(self, self.open.get(("review",)) or self.root, e, self.provider,
                      self.model)
            case ReviewToolEvent():
                tool_span(self, self.open.get(("review",)) or self.root, e)
            case ReviewDoneEvent():
                self.end(("review",), t, failed=e.result != "APPROVED",
                         why=e.error or e.result, agentrun__result=e.result,
                         agentrun__cost_usd=e.cost_usd, agentrun__tokens=e.tokens,
                         agentrun__findings=len(e.findings or ()))
            case FixStartEvent():
                self.waves[f"fix {e.batch}"] = self.start(("fix", e.batch), f"fix {e.batch}",
                                                          self.root, t, agentrun__batch=e.batch)
            case FixDoneEvent():
                self.waves.pop(f"fix {e.batch}", None)
                self.end(("fix", e.batch), t, failed=e.status != "complete",
                         agentrun__status=e.status)
            case WarningEvent():
                self.root.add_event("warning", _attrs(message=e.message), ns(t) or time.time_ns())
            case RunDoneEvent():
                self.root.set_attributes(_attrs(agentrun__status=e.status,
                                                agentrun__cost_usd=e.cost_usd,
                                                agentrun__tokens=e.tokens))
                self.close(t, failed=e.status != "complete", why=e.status)

    def close(self, when: Any = None, failed: bool = True, why: str = "") -> None:
        """End every open span and the root (an exception or interrupt ends it unfinished),
        then push the spans out, waiting a bounded time."""
        if self.closed:
            return
        self.closed = True
        self.end_trace(("run",), when, failed, why)


class WorkerTrace(Spans):
    """A worker's side: its attempts and everything in them, under its group's span."""

    def __init__(self, traceparent: str, *, batch: str, provider: str, model: str,
                 executor: str) -> None:
        super().__init__()
        self.parent = _PROPAGATOR.extract({"traceparent": traceparent})
        self.batch = batch
        self.provider = CLI_PROVIDER.get(executor, provider)
        self.model = model
        self.executor = executor
        self.closed = False

    def _attempt(self) -> Span | Context:
        found = [s for k, s in self.open.items() if k[0] == "attempt"]
        return found[-1] if found else self.parent

    def on_event(self, e: BaseEvent) -> None:
        with contextlib.suppress(Exception):  # a trace must never break the worker
            self._on(e)

    def _on(self, e: BaseEvent) -> None:
        t = e.t
        match e:
            case StartEvent():
                self.model = e.model or self.model
            case SetupStartEvent():
                self.start(("setup",), "worktree set-up", self.parent, t,
                           agentrun__command=e.command)
            case SetupDoneEvent():
                self.end(("setup",), t)
            case AttemptEvent():
                self.start(("attempt", str(e.attempt)), f"invoke_agent {e.agent or 'worker'}",
                           self.parent, t, gen_ai__operation__name="invoke_agent",
                           gen_ai__agent__name=e.agent, gen_ai__request__model=self.model,
                           gen_ai__provider__name=self.provider, agentrun__batch=self.batch,
                           agentrun__attempt=e.attempt, agentrun__executor=self.executor)
            case AttemptEndEvent():
                self.end(("attempt", str(e.attempt)), t, failed=e.status != "complete",
                         why=e.error, agentrun__status=e.status,
                         agentrun__stop_reason=e.stop_reason, agentrun__retry=e.retry)
            case StepEvent() if e.started is not None:
                chat_span(self, self._attempt(), e, self.provider, self.model,
                      agentrun__step=e.step)
            case ToolEvent():
                tool_span(self, self._attempt(), e)
            case ValidationEvent():
                self.whole("validation", self._attempt(), e, failed=not e.ok,
                           agentrun__condition=e.condition)
            case DoneEvent():
                self.close(failed=False)

    def close(self, failed: bool = True) -> None:
        if self.closed:
            return
        self.closed = True
        self.close_all(failed)
        self.pipe.flush(WORKER_FLUSH_S)

