"""`agentrun audit`'s trace: one per command, a span per spec audited, with the auditor's
model and tool calls (its progress events, as spans.py makes a worker's)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

from opentelemetry.trace import Span

from agentrun.core.events import BaseEvent, EventSink, StepEvent, ToolEvent
from agentrun.telemetry.spans import Spans, chat_span, tool_span


class AuditTrace(Spans):
    """`agentrun audit`'s side: one trace per command, its root the audit, one span per spec
    audited (the auditor's attempts' model and tool calls inside it). Specs are audited in
    threads of their own: every span change holds one lock."""

    def __init__(self, specs: list[str], model: Callable[[], tuple[str, str]]) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self._model = model  # (provider, model): resolved when a spec first needs the model
        self.provider = self.model = ""
        name = f"agentrun audit {specs[0]}" if len(specs) == 1 else "agentrun audit"
        self.root = self.start(("audit",), name, None, agentrun__specs=specs)
        self.trace_id = format(self.root.get_span_context().trace_id, "032x")
        self.closed = False

    def _spec(self, spec_id: str) -> Span:
        if not self.model:
            with contextlib.suppress(Exception):  # no model: a spec judged without one
                self.provider, self.model = self._model()
        return self.open.get(("spec", spec_id)) or self.start(
            ("spec", spec_id), f"audit {spec_id}", self.root,
            gen_ai__operation__name="invoke_agent", gen_ai__agent__name="spec-auditor",
            gen_ai__request__model=self.model, gen_ai__provider__name=self.provider,
            agentrun__spec=spec_id)

    def sink(self, spec_id: str) -> EventSink:
        """Where the auditor of `spec_id` says its progress."""
        def on_event(e: BaseEvent) -> None:
            with contextlib.suppress(Exception), self.lock:  # a trace never breaks the audit
                match e:
                    case StepEvent() if e.started is not None:
                        chat_span(self, self._spec(spec_id), e, self.provider, self.model,
                              agentrun__step=e.step)
                    case ToolEvent():
                        tool_span(self, self._spec(spec_id), e)
        return on_event

    def spec_done(self, spec_id: str, status: str, tokens: int, error: str | None) -> None:
        """The verdict on `spec_id` (a spec judged without the model gets its span too)."""
        with contextlib.suppress(Exception), self.lock:
            self._spec(spec_id)
            self.end(("spec", spec_id), failed=error is not None, why=error,
                     agentrun__status=status, agentrun__tokens=tokens, agentrun__error=error)

    def close(self, failed: bool) -> None:
        """End the audit's spans, then push them out, waiting a bounded time."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            self.end_trace(("audit",), failed=failed)
