"""Getting spans to the collector without ever holding up a run.

One pipeline per process: a `TracerProvider` whose `BatchSpanProcessor` (bounded queue) hands
batches, in its own thread, to the OTLP/HTTP exporter with a short timeout and no retries. A
batch that fails — the collector refuses, is down, or does not answer in time — is dropped, and
so is every batch after it in this process: a dead collector is not asked again and again.
`flush` waits a bounded time at the end (none when an export is already stuck), and never joins
a thread stuck on the network. The SDK's own log lines are kept off the terminal; what went
wrong is said once, as a warning of the command (`problems`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

import requests
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

EXPORT_TIMEOUT_S = 3.0  # one export request, retries included (unless OTEL_*_TIMEOUT says)
FLUSH_S = 1.5  # the most the end of a run waits for its last spans to go out
WORKER_FLUSH_S = 0.5  # ... and the end of a worker (it holds up its result)
STUCK_S = 0.3  # an export in flight longer than this at the end: the collector is not answering
QUEUE = 4096  # spans waiting to be sent; past that, new ones are dropped
SCHEDULE_MS = 500

_LOCK = threading.Lock()
_PIPELINE: Pipeline | None = None
_PROBLEMS: list[str] = []


class _LastError(logging.Handler):
    """Keeps the SDK's last complaint (to name it in the warning) instead of printing it."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last = ""
        self.reason = ""  # the last failed request's, in words (_OneTry)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.last = record.getMessage()[:300]
        except Exception:  # noqa: BLE001 - a log line must never break an export
            self.last = str(record.msg)[:300]


_SDK_LOG = _LastError()


def _quiet_sdk() -> None:
    sdk = logging.getLogger("opentelemetry")
    if _SDK_LOG not in sdk.handlers:
        sdk.addHandler(_SDK_LOG)
        sdk.propagate = False


def endpoint() -> str:
    """Where traces go, as the standard variables say (for the warning)."""
    traces = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if traces:
        return traces
    base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or "http://localhost:4318"
    return base.rstrip("/") + "/v1/traces"


def problems() -> list[str]:
    with _LOCK:
        return list(_PROBLEMS)


def _problem(message: str) -> None:
    with _LOCK:
        if message not in _PROBLEMS:
            _PROBLEMS.append(message)


class CollectorError(Exception):
    """The collector could not be reached or did not answer: not a `requests` error, so the
    exporter does not retry it (a run's spans are dropped rather than waited for)."""


class _OneTry(requests.adapters.HTTPAdapter):
    def send(self, *args: Any, **kwargs: Any) -> requests.Response:
        try:
            return super().send(*args, **kwargs)
        except requests.RequestException as exc:
            why = ("it did not answer in time" if isinstance(exc, requests.Timeout) else
                   "the connection was refused (is the collector running?)"
                   if "refused" in str(exc) else f"{type(exc).__name__}")
            _SDK_LOG.reason = why
            raise CollectorError(why) from None


def _session() -> requests.Session:
    session = requests.Session()
    for scheme in ("http://", "https://"):
        session.mount(scheme, _OneTry(max_retries=0))
    return session


class GuardedExporter(SpanExporter):
    """The OTLP exporter, given up on at its first failure (what follows is dropped)."""

    def __init__(self, inner: SpanExporter, where: str) -> None:
        self.inner = inner
        self.where = where
        self.dead = False
        self.sent = 0
        self.busy_since: float | None = None  # when the export in flight started

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.dead:
            return SpanExportResult.FAILURE
        self.busy_since = time.monotonic()
        try:
            result = self.inner.export(spans)
        except Exception as exc:  # noqa: BLE001 - the exporter's trouble is not the run's
            _SDK_LOG.last = f"{type(exc).__name__}: {exc}"[:300]
            result = SpanExportResult.FAILURE
        finally:
            self.busy_since = None
        if result is SpanExportResult.SUCCESS:
            self.sent += len(spans)
            return result
        self.give_up(_SDK_LOG.reason or _SDK_LOG.last or "the export failed")
        return result

    def give_up(self, why: str) -> None:
        if not self.dead:
            self.dead = True
            _problem(f"traces not exported to {self.where}: {why}; agentrun went on without "
                     "them")

    def stuck(self) -> bool:
        busy = self.busy_since
        return busy is not None and time.monotonic() - busy > STUCK_S

    def shutdown(self) -> None:
        self.dead = True

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class Pipeline:
    """This process's tracer provider and the processor that exports its spans."""

    def __init__(self) -> None:
        _quiet_sdk()
        from agentrun import __version__

        timeout = None if (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
                           or os.environ.get("OTEL_EXPORTER_OTLP_TIMEOUT")) else EXPORT_TIMEOUT_S
        self.exporter = GuardedExporter(OTLPSpanExporter(timeout=timeout, session=_session()),
                                        endpoint())
        self.processor = BatchSpanProcessor(self.exporter, max_queue_size=QUEUE,
                                            schedule_delay_millis=SCHEDULE_MS)
        resource = Resource.create({
            "service.name": os.environ.get("OTEL_SERVICE_NAME") or "agentrun",
            "service.version": __version__, "process.pid": os.getpid()})
        # no exit hook: it would join the export thread, however long the collector takes
        self.provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        self.provider.add_span_processor(self.processor)
        self.tracer = self.provider.get_tracer("agentrun", __version__)

    def flush(self, timeout_s: float = FLUSH_S) -> bool:
        """Send what is queued, waiting at most `timeout_s` (not at all when an export is
        stuck already); False (and the collector given up on) when it did not all go out."""
        if self.exporter.dead:
            return False
        if self.exporter.stuck():
            self.exporter.give_up("the collector does not answer")
            return False
        done = threading.Event()

        def push() -> None:
            try:
                self.processor.force_flush()
            finally:
                done.set()

        threading.Thread(target=push, name="agentrun-trace-flush", daemon=True).start()
        if done.wait(timeout_s):
            return not self.exporter.dead
        self.exporter.give_up(f"the collector did not answer within {timeout_s:g} s")
        return False


def pipeline() -> Pipeline:
    global _PIPELINE
    with _LOCK:
        if _PIPELINE is None:
            _PIPELINE = Pipeline()
        return _PIPELINE
