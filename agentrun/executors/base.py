"""The executor seam: what runs one attempt of a task in a worktree.

An executor turns a task text into changes in the worktree and a report of how it went. The
built-in one is agentrun's own tool loop (agent/); an external coding-agent CLI (Claude Code,
Codex) driven headless is another. Everything around an attempt (snapshots, validation,
rollback, retries) lives above this seam in agentrun/attempts.py, so it is the same whichever
executor runs, and nothing here assumes a tool loop of ours.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel

from agentrun.agent.allowance import Allowance
from agentrun.agent.budget import TokenTracker
from agentrun.agent.definitions import AgentDefinition
from agentrun.agent.results import AttemptOutcome
from agentrun.agent.snapshots import Snapshot
from agentrun.agent.terminator import Limits
from agentrun.agent.transcript import Transcript
from agentrun.core.events import EventSink
from agentrun.tools.base import CommandPolicy


def _nothing() -> None:
    return None


@dataclass
class AgentTask:
    """A task for an agent: who works on it, on what, where, and within which limits."""

    agent: AgentDefinition
    task: str
    worktree: Path
    limits: Limits
    group: str = ""
    validation_command: str | None = None
    interactive: bool = False
    project_root: Path | None = None
    command_policy: CommandPolicy | None = None
    # the worktree's state when the caller knows it (a fresh checkout): the first attempt's
    # snapshot then reads no file
    start: Snapshot | None = None
    output: type[BaseModel] | None = None  # the result model submit_result must carry
    # blocks until the worktree's files are there (checked out while the first model call
    # is made, worker.py); every tool call and every look at the worktree waits for it
    files_ready: Callable[[], None] = _nothing


@dataclass
class Budget:
    """What all attempts of a task spend together, so that a retry starts neither the clock
    nor the token count afresh; the flag that stops them all; and the worker's share of the
    run's spending cap (`allowance`, None without a cap)."""

    tokens: TokenTracker
    started: float
    max_duration_s: float
    cancel: threading.Event = field(default_factory=threading.Event)
    clock: Callable[[], float] = time.monotonic
    allowance: Allowance | None = None

    def time_left(self) -> float:
        return self.started + self.max_duration_s - self.clock()

    def stop_requested(self) -> str | None:
        """'interrupted' or 'timeout' when the work must stop right now."""
        if self.cancel.is_set():
            return "interrupted"
        if self.time_left() <= 0:
            return "timeout"
        return None

    def before_call(self) -> str | None:
        """None when a model call may start now; else why not: the run's spending cap (which
        may first wait for a larger allowance), an interrupt, the deadline."""
        if self.allowance is None:
            return self.stop_requested()
        return self.allowance.check(self.tokens.usage, self.stop_requested, self.cancel.wait)


@dataclass
class Attempt:
    """One attempt's brief: the text to work from, and what it shares with the other attempts."""

    text: str  # the task itself, or (on a retry) the task with the last failure fed back
    number: int
    max_attempts: int
    tools: list[str]  # the tool names the agent may use
    budget: Budget
    transcript: Transcript
    on_event: EventSink | None = None  # progress for the live display
    # called before the attempt's first change to the worktree, so that it can be rolled
    # back; an executor that cannot tell when that is calls it before it starts
    before_write: Callable[[], None] = _nothing


class Executor(Protocol):
    def describe(self) -> dict[str, str]:
        """Who runs the attempts ({"provider": ..., "model": ...}), for the transcript."""
        ...

    def run_attempt(self, task: AgentTask, attempt: Attempt) -> AttemptOutcome:
        """Work on `attempt.text` in `task.worktree` until done or stopped; never raise for
        the agent's failures. Charge `attempt.budget.tokens` while spending, and stop when
        `attempt.budget.stop_requested()` says so."""
        ...
