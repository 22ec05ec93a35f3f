"""OpenTelemetry traces of a run, when the environment asks for them.

Off unless a standard variable is set — `OTEL_EXPORTER_OTLP_ENDPOINT`,
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_TRACES_EXPORTER=otlp` (`none` and
`OTEL_SDK_DISABLED=true` keep it off; another exporter or gRPC is said, not traced) — and then
it needs the `otel` extra
(`pip install 'agentrun-specflow[otel]'`). This module imports nothing of OpenTelemetry: a run
without the variables pays nothing, and `agentrun --help` never loads it.

Tracing consumes the run's events; it adds no bookkeeping of its own. The orchestrator's
`RunTrace` turns the run's events into the root span, the base check, waves, groups, merges,
integration checks and the review (with the reviewer's model and tool calls); each worker's
`WorkerTrace` turns the worker's progress events into its attempts, model calls and tool calls,
under its group's span, whose W3C `traceparent` the worker gets in its assignment. Spans go out
in the background (spans.py, export.py); a collector that is down or slow costs a bounded wait
and one warning (`problems`), never the run.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentrun.core.events import BaseEvent, EventSink
    from agentrun.telemetry.audit import AuditTrace
    from agentrun.telemetry.spans import RunTrace, WorkerTrace

EXTRA_HINT = "pip install 'agentrun-specflow[otel]'"
_PROBLEMS: list[str] = []  # what went wrong with tracing in this process, said once each


def configured(env: Mapping[str, str] | None = None) -> bool:
    """Whether the environment asks for traces that agentrun can send: OTLP over HTTP. An
    exporter or protocol it does not speak (`console`, `zipkin`, gRPC) is said once, and the
    run is not traced, rather than sent where nothing listens."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    named = [e.strip() for e in env.get("OTEL_TRACES_EXPORTER", "").lower().split(",")
             if e.strip()]
    endpoint = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or \
        env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if not named and not endpoint or named == ["none"]:
        return False
    others = [e for e in named if e not in ("otlp", "none")]
    if named and "otlp" not in named:
        note_problem(f"OTEL_TRACES_EXPORTER={','.join(named)}: agentrun sends traces over "
                     "OTLP/HTTP only, so the run is not traced; set OTEL_TRACES_EXPORTER=otlp "
                     "and OTEL_EXPORTER_OTLP_ENDPOINT to your collector")
        return False
    if others:
        note_problem(f"OTEL_TRACES_EXPORTER names {', '.join(others)} beside otlp: traces go "
                     "over OTLP/HTTP only")
    protocol = (env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "").strip()
                or env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "").strip()).lower()
    if protocol == "grpc":
        note_problem("OTEL_EXPORTER_OTLP_PROTOCOL=grpc: agentrun sends OTLP over HTTP "
                     "(protobuf), so the run is not traced; set it to http/protobuf and point "
                     "OTEL_EXPORTER_OTLP_ENDPOINT at the collector's HTTP port (4318)")
        return False
    return True


def note_problem(message: str) -> None:
    if message not in _PROBLEMS:
        _PROBLEMS.append(message)


def problems() -> list[str]:
    """What kept traces from being exported in this process (each once), for the command to
    say as warnings; the run itself goes on regardless."""
    export = sys.modules.get("agentrun.telemetry.export")  # loaded only when tracing ran
    found = [*_PROBLEMS, *(export.problems() if export is not None else [])]
    return list(dict.fromkeys(found))


def _spans() -> Any | None:
    """The spans module, or None (with one problem said) when the extra is missing."""
    try:
        from agentrun.telemetry import spans
    except ImportError as exc:
        note_problem(f"tracing is configured (OTEL_* variables) but OpenTelemetry is not "
                     f"installed ({exc.name or exc}): the run is not traced; {EXTRA_HINT}")
        return None
    return spans


def run_trace(run_id: str, spec_id: str, mode: str,
              parent: str | None = None) -> RunTrace | None:
    """The orchestrator's trace of one run (`parent`: the W3C traceparent it continues, a CI
    job's), or None when tracing is off (or cannot be)."""
    if not configured():
        return None
    spans = _spans()
    return spans.RunTrace(run_id, spec_id, mode, parent) if spans else None


def ci_trace_parent(spec_id: str, start_commit: str) -> str:
    """The W3C traceparent that every job of a CI run continues (its workers and aggregates,
    on machines that share nothing live): named by the spec and the run's start commit, so
    each job works it out alone and all their spans are one trace. Its parent span stands for
    the run as a whole and is never sent itself."""
    digest = hashlib.sha256(f"agentrun run {spec_id} {start_commit}".encode()).hexdigest()
    return f"00-{digest[:32]}-{digest[32:48]}-01"


def audit_trace(specs: list[str], model: Callable[[], tuple[str, str]]) -> AuditTrace | None:
    """`agentrun audit`'s trace of the specs it audits (`model`: their provider and model,
    asked when the first needs them), or None when tracing is off."""
    if not configured() or _spans() is None:
        return None
    from agentrun.telemetry.audit import AuditTrace

    return AuditTrace(specs, model)


def worker_trace(traceparent: str | None, *, batch: str, provider: str, model: str,
                 executor: str) -> WorkerTrace | None:
    """A worker's trace, continuing the run's at `traceparent`; None when there is nothing to
    continue or tracing is off."""
    if not traceparent or not configured():
        return None
    spans = _spans()
    if spans is None:
        return None
    trace: WorkerTrace = spans.WorkerTrace(traceparent, batch=batch, provider=provider,
                                           model=model, executor=executor)
    return trace


def tee(sink: EventSink | None, trace: RunTrace | None) -> EventSink | None:
    """`sink`, with `trace` shown every event first (a trace never breaks the run)."""
    if trace is None:
        return sink

    def both(event: BaseEvent) -> None:
        trace.on_event(event)
        if sink is not None:
            sink(event)

    return both


def preload_modules() -> list[str]:
    """What a worker process needs imported before it starts, when tracing is on."""
    return ["agentrun.telemetry.spans"] if configured() else []
