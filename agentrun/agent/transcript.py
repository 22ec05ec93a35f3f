"""The transcript of an execution: one JSON object per line, secrets redacted.

Every model turn, tool call, tool result (truncated), usage figure, classifier and terminator
decision and attempt boundary is appended as it happens, so a crashed worker still leaves a
readable record. With no path the events stay in memory (`events`), which is what tests read.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from agentrun.core.events import BaseEvent, EventSink
from agentrun.core.secrets import REDACTED as REDACTED  # for readers of transcripts
from agentrun.core.secrets import Redactor
from agentrun.project import known_secrets

MAX_TEXT = 4_000  # characters of any one string value kept in the transcript


def truncate(text: str, limit: int = MAX_TEXT) -> str:
    if len(text) <= limit:
        return text
    head = limit * 3 // 4
    tail = limit - head
    return f"{text[:head]}\n... [{len(text) - limit} characters truncated] ...\n{text[-tail:]}"


class Transcript:
    """Append-only JSONL record. Thread-safe; a write failure never stops the agent."""

    def __init__(self, path: Path | None = None, *, secrets: Iterable[str] | None = None,
                 clock: Any = time.time) -> None:
        self.path = Path(path) if path is not None else None
        self.events: list[dict[str, Any]] = []
        self.redactor = Redactor(known_secrets() if secrets is None else secrets)
        self.clock = clock
        self.write_error: str | None = None
        self._lock = threading.Lock()
        if self.path is not None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                self.write_error = f"cannot write transcript {self.path}: {exc}"

    def record(self, type: str, **data: Any) -> dict[str, Any]:
        raw = {"type": type, "ts": round(self.clock(), 3), **data}
        # redact first: a cut must not split a secret
        event: dict[str, Any] = _clip(self.redactor.value(raw))
        line = json.dumps(event, ensure_ascii=False, default=str)
        with self._lock:
            if self.path is None:
                self.events.append(event)
            else:
                try:
                    with self.path.open("a", encoding="utf-8") as fh:
                        fh.write(line + "\n")
                except OSError as exc:  # keep working; the worker reports the problem
                    self.write_error = f"cannot write transcript {self.path}: {exc}"
        return event

    def read(self) -> list[dict[str, Any]]:
        """All events so far (from memory, or parsed back from the file)."""
        if self.path is None:
            return list(self.events)
        if not self.path.exists():
            return []
        with self.path.open(encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]


def _clip(value: Any) -> Any:
    if isinstance(value, str):
        return truncate(value)
    if isinstance(value, Mapping):
        return {k: _clip(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clip(v) for v in value]
    return value


def emit_safely(on_event: EventSink | None, event: BaseEvent,
                transcript: Transcript) -> None:
    """Pass a progress event to the live display; a broken display must not break the work
    (its error goes to the transcript)."""
    if on_event is None:
        return
    try:
        on_event(event)
    except Exception as exc:  # noqa: BLE001 - display code is not ours to crash on
        transcript.record("on_event_error", error=f"{type(exc).__name__}: {exc}")
