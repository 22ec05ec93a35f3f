"""Attempts above the executor: the Ralph retry loop, the same for every executor.

`run_attempts` runs a task to an outcome. Each attempt is one call of the executor. Around it:
a snapshot of the worktree before the attempt's first write, the validation command as
backpressure when the attempt claims success, and on a retryable failure a rollback to the
snapshot and a new attempt whose task carries the failure (prompts/retry.md).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SerializeAsAny

from agentrun.agent.allowance import Allowance
from agentrun.agent.budget import TokenTracker
from agentrun.agent.conversation import tool_names_for
from agentrun.agent.prompts import render
from agentrun.agent.results import AttemptOutcome
from agentrun.agent.snapshots import Snapshot, restore_snapshot, take_snapshot
from agentrun.agent.transcript import Transcript, emit_safely
from agentrun.core.errors import AgentrunError
from agentrun.core.events import (
    AttemptEndEvent,
    AttemptEvent,
    BaseEvent,
    EventSink,
    ValidationEvent,
)
from agentrun.core.results import Outcome
from agentrun.core.secrets import Redactor
from agentrun.core.status import Status, StopReason
from agentrun.core.usage import Usage
from agentrun.executors.base import AgentTask, Attempt, Budget, Executor
from agentrun.executors.builtin import BuiltinExecutor
from agentrun.providers.base import Provider
from agentrun.sandbox.base import Sandbox
from agentrun.sandbox.local import LocalSandbox
from agentrun.tools.base import CommandPolicy
from agentrun.validation import (
    SELF_REPORTED_RETRIES,
    Validation,
    failure_condition,
    run_validation,
    self_reported_failure,
    tail,
)


class AgentOutcome(Outcome):
    """How a task ended over all its attempts: the last attempt's outcome, with the steps and
    tokens of all of them, and the task's result model if it declared one."""

    submitted: bool = False
    output: SerializeAsAny[BaseModel] | None = None  # the task's result model, validated


def run_agent(task: AgentTask, provider: Provider, *, transcript: Transcript | None = None,
              cancel: threading.Event | None = None,
              on_event: EventSink | None = None,
              clock: Callable[[], float] = time.monotonic,
              sleep: Callable[[float], None] | None = None,
              ask: Callable[[str], bool] | None = None,
              sandbox: Sandbox | None = None) -> AgentOutcome:
    """Run `task` with the built-in executor and `provider` as its model.

    `clock` and `sleep` are injectable for tests; `ask` answers yes/no questions in interactive
    runs (by default: the terminal, and never when stdin is not a TTY).
    """
    sandbox = sandbox if sandbox is not None else LocalSandbox()
    executor = BuiltinExecutor(provider, sandbox, sleep=sleep, ask=ask)
    return run_attempts(task, executor, sandbox, transcript=transcript, cancel=cancel,
                        on_event=on_event, clock=clock)


def run_attempts(task: AgentTask, executor: Executor, sandbox: Sandbox, *,
                 transcript: Transcript | None = None, cancel: threading.Event | None = None,
                 on_event: EventSink | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 allowance: Allowance | None = None) -> AgentOutcome:
    """Run `task` to an outcome with `executor`: attempts, validation (in `sandbox`), rollback
    and retries included; `allowance`: the worker's share of the run's spending cap."""
    limits = task.limits
    budget = Budget(TokenTracker(limits.token_budget), started=clock(),
                    max_duration_s=limits.max_duration_s,
                    cancel=cancel if cancel is not None else threading.Event(), clock=clock,
                    allowance=allowance)
    run = _Run(task, executor, sandbox, budget,
               transcript if transcript is not None else Transcript(None), on_event)
    return run.all_attempts()


class _Run:
    """The attempts of one task and what they share."""

    def __init__(self, task: AgentTask, executor: Executor, sandbox: Sandbox, budget: Budget,
                 transcript: Transcript,
                 on_event: EventSink | None) -> None:
        self.task, self.executor, self.sandbox, self.budget = task, executor, sandbox, budget
        self.transcript, self.on_event = transcript, on_event
        self.worktree = Path(task.worktree)
        self.policy = task.command_policy or CommandPolicy()
        self.tools = tool_names_for(task.agent)

    def all_attempts(self) -> AgentOutcome:
        task, limits = self.task, self.task.limits
        max_attempts = 1 + limits.retries if limits.retry_on_failure else 1
        self.record("run_start", agent=task.agent.name, group=task.group, tools=self.tools,
                    limits=limits.to_dict(), validation_command=task.validation_command,
                    **self.executor.describe())
        results: list[AttemptOutcome] = []
        text = task.task
        self_retries = 0
        for number in range(1, max_attempts + 1):
            result, validation, snapshot = self.attempt(text, number, max_attempts)
            results.append(result)
            condition = failure_condition(result.stop_reason, result.status, result.error,
                                          validation)
            gave_up = self_reported_failure(result.stop_reason, result.status,
                                            result.submission is not None, validation)
            retry = (number < max_attempts and condition in limits.retry_conditions
                     and self.budget.stop_requested() is None
                     and not (gave_up and self_retries >= SELF_REPORTED_RETRIES))
            if retry and gave_up:
                self_retries += 1
            self.record("attempt_end", attempt=number, status=result.status,
                        stop_reason=result.stop_reason, error=result.error,
                        condition=condition, retry=retry, steps=result.steps,
                        self_reported=gave_up)
            self.emit(AttemptEndEvent(
                attempt=number, status=result.status, stop_reason=result.stop_reason,
                retry=retry, error=self.transcript.redactor.text(result.error)[:2000]
                if result.error else None))
            if not retry or not self.rollback(result, snapshot):
                break
            text = render("retry", {
                "attempt": number, "max_attempts": max_attempts, "condition": condition,
                "error": result.error or "unknown error", "last_thought": result.last_thought,
                "last_action": result.last_action, "observation": result.observation,
                "original_task": task.task, "validation_command": task.validation_command or "",
            }, task.project_root)
        note = (" (the model reported the failure itself: retried once, not "
                f"{limits.retries} times)" if self_retries and gave_up
                and limits.retries > SELF_REPORTED_RETRIES else "")
        outcome = _outcome(results, self.transcript.redactor, note)
        self.record("outcome", **outcome.model_dump(mode="json"))
        return outcome

    def attempt(self, text: str, number: int,
                max_attempts: int) -> tuple[AttemptOutcome, Validation | None, Snapshot | None]:
        """One attempt, judged: (its outcome, the validation it got, its snapshot)."""
        self.record("attempt_start", attempt=number, max_attempts=max_attempts,
                    agent=self.task.agent.name, task=text)
        self.emit(AttemptEvent(attempt=number, max_attempts=max_attempts,
                               agent=self.task.agent.name))
        snap: dict[str, Any] = {}

        def before_write() -> None:
            if "taken" in snap:
                return
            snap["taken"] = True
            try:
                if number > 1 or self.task.start is None:  # a snapshot that reads the files
                    self.task.files_ready()
                snap["snapshot"] = (self.task.start if number == 1 and self.task.start
                                    is not None else take_snapshot(self.worktree))
                self.record("snapshot", attempt=number, tree=snap["snapshot"].tree,
                            head=snap["snapshot"].head)
            except (AgentrunError, OSError) as exc:
                self.record("snapshot_failed", attempt=number, error=str(exc))

        result = self.executor.run_attempt(self.task, Attempt(
            text=text, number=number, max_attempts=max_attempts, tools=list(self.tools),
            budget=self.budget, transcript=self.transcript, on_event=self.on_event,
            before_write=before_write))
        self.task.files_ready()  # what follows looks at the worktree's files
        snapshot: Snapshot | None = snap.get("snapshot")
        validation = None
        if result.stop_reason == StopReason.COMPLETED and result.status == Status.COMPLETE \
                and self.task.validation_command:
            validation = self.validate(self.task.validation_command, result, number)
        if result.stop_reason != StopReason.COMPLETED and result.status == Status.FAILED \
                and self.changed(result, snapshot):
            result.status = Status.PARTIAL  # fail gracefully: the work so far is kept and reported
        return result, validation, snapshot

    def validate(self, command: str, result: AttemptOutcome, number: int) -> Validation | None:
        """Backpressure: a claim of success counts only if the validation command passes."""
        stop = self.budget.stop_requested()
        if stop:
            result.stop_reason, result.status = StopReason(stop), Status.FAILED
            result.error = f"{stop} before the validation command could run"
            return None
        timeout = max(1.0, min(self.task.limits.validation_timeout_s, self.budget.time_left()))
        started = time.time()
        check = run_validation(self.sandbox, self.worktree, self.policy, command, timeout)
        self.record("validation", attempt=number, command=command, ok=check.ok,
                    condition=check.condition, output=tail(check.output))
        self.emit(ValidationEvent(attempt=number, ok=check.ok, condition=check.condition,
                                  started=round(started, 3)))
        if not check.ok:
            result.status = Status.FAILED
            result.error = check.error
        return check

    def changed(self, result: AttemptOutcome, snapshot: Snapshot | None) -> bool:
        """Did the attempt leave changes (files or commits) behind?"""
        if not result.wrote:
            return False
        if snapshot is None:
            return True  # a write was attempted and nothing tells us otherwise
        try:
            now = take_snapshot(self.worktree)
        except (AgentrunError, OSError):
            return True
        return (now.tree, now.head) != (snapshot.tree, snapshot.head)

    def rollback(self, result: AttemptOutcome, snapshot: Snapshot | None) -> bool:
        """Restore the worktree before a retry; False (no retry) if that is impossible."""
        if snapshot is None:
            if not result.wrote:
                return True  # nothing was written: the worktree is as the attempt found it
            self.record("rollback_failed", error="no snapshot was taken before the first write")
            result.error = f"{result.error}; cannot roll back before a retry (no snapshot)"
            return False
        try:
            restore_snapshot(self.worktree, snapshot)
        except (AgentrunError, OSError) as exc:
            self.record("rollback_failed", error=str(exc))
            result.error = f"{result.error}; rollback before retry failed: {exc}"
            return False
        self.record("rollback", tree=snapshot.tree, head=snapshot.head)
        return True

    def record(self, type: str, **data: Any) -> None:
        self.transcript.record(type, **data)

    def emit(self, event: BaseEvent) -> None:
        """Progress for the live display (see `emit_safely`)."""
        emit_safely(self.on_event, event, self.transcript)


def _outcome(results: list[AttemptOutcome], redactor: Redactor, note: str = "") -> AgentOutcome:
    """The last attempt decides; steps and tokens add up over all of them. Texts that come
    from the model or from command output are redacted: they end up in result files. `note`
    says why the retries stopped early."""
    last = results[-1]
    error = last.error
    if error and last.status != Status.COMPLETE and len(results) > 1:
        error = f"failed after {len(results)} attempts{note}; last error: {error}"
    usage = Usage()
    for result in results:
        usage = usage + result.usage

    def clean(text: str | None) -> str | None:
        return redactor.text(text) if text else text

    return AgentOutcome(**{
        **last.carried(), "summary": redactor.text(last.summary),
        "criteria_met": [redactor.text(c) for c in last.criteria_met],
        "deviations": [redactor.text(d) for d in last.deviations],
        "error": clean(error), "no_change_needed": clean(last.no_change_needed),
        "attempts": len(results), "steps": sum(r.steps for r in results), "usage": usage},
        submitted=last.submission is not None,
        output=last.submission.output if last.submission else None)
