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
from agentrun.providers.base import Message, Provider
from agentrun.sandbox.base import Sandbox
from agentrun.tools.base import CommandPolicy

# Set in a worker process when the run asks its workers to wrap up (SIGUSR1: the run reached
# its spending cap); every conversation of the process then tells its model once.
WRAP_UP = threading.Event()
WRAP_UP_MESSAGE = (
    "The run has reached its spending cap and is stopping. Do not start anything new: call "
    "submit_result now with status `partial`, a summary of what is done and what is left, "
    "and the acceptance criteria already met. Work you have written so far is kept.")


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
    on_event: Callable[[dict[str, Any]], None] | None = None
    sleep: Callable[[float], None] | None = None
    ask: Callable[[str], bool] | None = None
    wrapped_up: set[int] = field(default_factory=set)  # conversations told to wrap up

    def record(self, type: str, **data: Any) -> None:
        self.transcript.record(type, **data)

    def emit(self, event: dict[str, Any]) -> None:
        """Progress for the live display (see `emit_safely`)."""
        emit_safely(self.on_event, event, self.transcript)

    def wait(self, seconds: float) -> None:
        """Back off for `seconds`, waking early when cancelled or out of time."""
        if self.sleep is not None:
            self.sleep(seconds)
            return
        self.cancel.wait(max(0.0, min(seconds, self.terminator.time_left())))

    def stop_requested(self) -> str | None:
        """'interrupted' or 'timeout' when the execution must stop right now."""
        if self.cancel.is_set():
            return "interrupted"
        if self.terminator.time_left() <= 0:
            return "timeout"
        return None

    def wrap_up_messages(self, conversation: int) -> list[Message]:
        """The wrap-up message, the first time `conversation` asks after the run asked its
        workers to wrap up; otherwise nothing."""
        if not WRAP_UP.is_set() or conversation in self.wrapped_up:
            return []
        self.wrapped_up.add(conversation)
        self.record("wrap_up", reason="the run reached its spending cap")
        return [Message(role="user", content=WRAP_UP_MESSAGE)]

    def confirm(self, question: str) -> bool:
        """Ask a person, only in an interactive run; CI never waits (the answer is no)."""
        if not self.interactive:
            return False
        if self.ask is not None:
            return self.ask(question)
        return ask_yes_no(question)
