"""What every conversation of one attempt shares: the model, the budget, the clock, the
transcript, cancellation, the sandbox commands run in and the way progress is reported."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrun.agent.budget import TokenTracker
from agentrun.agent.interaction import ask_yes_no
from agentrun.agent.terminator import Limits, Terminator
from agentrun.agent.transcript import Transcript, emit_safely
from agentrun.core.events import BaseEvent, EventSink
from agentrun.providers.base import Provider
from agentrun.sandbox.base import Sandbox
from agentrun.tools.base import CommandPolicy


@dataclass
class Runtime:
    provider: Provider
    limits: Limits
    worktree: Path
    transcript: Transcript
    tracker: TokenTracker
    terminator: Terminator
    cancel: threading.Event
    sandbox: Sandbox
    group: str = ""
    project_root: Path | None = None
    policy: CommandPolicy = field(default_factory=CommandPolicy)
    interactive: bool = False
    on_event: EventSink | None = None
    sleep: Callable[[float], None] | None = None
    ask: Callable[[str], bool] | None = None
    # asked before every model call: None to go ahead, else the stop reason (the spending cap)
    before_call: Callable[[], str | None] | None = None
    # blocks until the worktree's files are checked out (AgentTask.files_ready)
    files_ready: Callable[[], None] | None = None

    def record(self, type: str, **data: Any) -> None:
        self.transcript.record(type, **data)

    def emit(self, event: BaseEvent) -> None:
        """Progress for the live display (see `emit_safely`)."""
        emit_safely(self.on_event, event, self.transcript)

    def wait(self, seconds: float) -> None:
        """Back off for `seconds`, waking early when cancelled or out of time."""
        if self.sleep is not None:
            self.sleep(seconds)
            return
        self.cancel.wait(max(0.0, min(seconds, self.terminator.time_left())))

    def call_refused(self) -> str | None:
        """Why the next model call must not start (see `before_call`), or None."""
        return self.before_call() if self.before_call is not None else None

    def stop_requested(self) -> str | None:
        """'interrupted' or 'timeout' when the execution must stop right now."""
        if self.cancel.is_set():
            return "interrupted"
        if self.terminator.time_left() <= 0:
            return "timeout"
        return None

    def confirm(self, question: str) -> bool:
        """Ask a person, only in an interactive run; CI never waits (the answer is no)."""
        if not self.interactive:
            return False
        if self.ask is not None:
            return self.ask(question)
        return ask_yes_no(question)
