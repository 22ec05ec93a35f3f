"""The agent loop's entry point: attempts of a conversation inside the Ralph retry loop.

`run_agent` runs a task to an outcome. Each attempt is a fresh `Conversation` (see
conversation.py for react -> validate -> reflect -> backtrack). Around it: a snapshot of the
worktree before the attempt's first write, the validation command as backpressure when the
attempt claims success, and on a retryable failure a rollback to the snapshot and a new attempt
whose task carries the failure (prompts/retry.md).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from agentrun.agent.budget import TokenTracker
from agentrun.agent.conversation import Conversation, tool_names_for
from agentrun.agent.definitions import AgentDefinition
from agentrun.agent.prompts import render
from agentrun.agent.results import AttemptResult
from agentrun.agent.retry import failure_condition, run_validation, tail
from agentrun.agent.runtime import Runtime
from agentrun.agent.snapshots import Snapshot, restore_snapshot, take_snapshot
from agentrun.agent.terminator import Limits, Terminator
from agentrun.agent.transcript import Redactor, Transcript
from agentrun.errors import AgentrunError
from agentrun.providers.base import Provider, Usage
from agentrun.tools.base import CommandPolicy


@dataclass
class AgentTask:
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


@dataclass
class AgentOutcome:
    status: str  # complete | partial | failed | blocked
    summary: str
    criteria_met: list[str]
    deviations: list[str]
    error: str | None
    attempts: int
    steps: int
    usage: Usage
    stop_reason: str  # completed|max_steps|timeout|budget|circuit_breaker|error|interrupted
    submitted: bool
    output: BaseModel | None = None  # the task's result model, validated

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_agent(task: AgentTask, provider: Provider, *, transcript: Transcript | None = None,
              cancel: threading.Event | None = None,
              on_event: Callable[[dict[str, Any]], None] | None = None,
              clock: Callable[[], float] = time.monotonic,
              sleep: Callable[[float], None] | None = None,
              ask: Callable[[str], bool] | None = None) -> AgentOutcome:
    """Run `task` to an outcome: attempts, validation, rollback and retries included.

    `clock` and `sleep` are injectable for tests; `ask` answers yes/no questions in interactive
    runs (by default: the terminal, and never when stdin is not a TTY).
    """
    limits = task.limits
    tracker = TokenTracker(limits.token_budget)
    cancel = cancel if cancel is not None else threading.Event()
    rt = Runtime(provider=provider, limits=limits, worktree=Path(task.worktree),
                 transcript=transcript if transcript is not None else Transcript(None),
                 tracker=tracker, cancel=cancel, group=task.group,
                 terminator=Terminator(limits, tracker, started=clock(), clock=clock,
                                       cancelled=cancel.is_set),
                 project_root=task.project_root, policy=task.command_policy or CommandPolicy(),
                 interactive=task.interactive, on_event=on_event, sleep=sleep, ask=ask)
    names = tool_names_for(task.agent)
    max_attempts = 1 + limits.max_retries if limits.retry_on_failure else 1
    rt.record("run_start", agent=task.agent.name, group=task.group, tools=names,
              limits=limits.to_dict(), validation_command=task.validation_command,
              provider=getattr(provider, "name", "?"), model=getattr(provider, "model", "?"))
    results: list[AttemptResult] = []
    text = task.task
    for attempt in range(1, max_attempts + 1):
        result = _run_attempt(rt, task, text, names, attempt, max_attempts)
        results.append(result)
        condition = failure_condition(result.stop_reason, result.status, result.error,
                                      result.validation)
        retry = (attempt < max_attempts and condition in limits.retry_conditions
                 and rt.stop_requested() is None)
        rt.record("attempt_end", attempt=attempt, status=result.status,
                  stop_reason=result.stop_reason, error=result.error, condition=condition,
                  retry=retry, steps=result.steps)
        rt.emit({"type": "attempt_end", "attempt": attempt, "status": result.status,
                 "stop_reason": result.stop_reason, "retry": retry})
        if not retry or not _rollback(rt, result):
            break
        text = render("retry", {
            "attempt": attempt, "max_attempts": max_attempts, "condition": condition,
            "error": result.error or "unknown error", "last_thought": result.last_thought,
            "last_action": result.last_action, "observation": result.observation,
            "original_task": task.task, "validation_command": task.validation_command or "",
        }, task.project_root)
    outcome = _outcome(results, tracker, rt.transcript.redactor)
    rt.record("outcome", **outcome.to_dict())
    return outcome


def _run_attempt(rt: Runtime, task: AgentTask, text: str, names: list[str], attempt: int,
                 max_attempts: int) -> AttemptResult:
    rt.record("attempt_start", attempt=attempt, max_attempts=max_attempts,
              agent=task.agent.name, task=text)
    rt.emit({"type": "attempt", "attempt": attempt, "max_attempts": max_attempts,
             "agent": task.agent.name})
    snap: dict[str, Any] = {}

    def before_write() -> None:
        if "taken" in snap:
            return
        snap["taken"] = True
        try:
            snap["snapshot"] = (task.start if attempt == 1 and task.start is not None
                                else take_snapshot(rt.worktree))
            rt.record("snapshot", attempt=attempt, tree=snap["snapshot"].tree,
                      head=snap["snapshot"].head)
        except (AgentrunError, OSError) as exc:
            rt.record("snapshot_failed", attempt=attempt, error=str(exc))

    conv = Conversation(rt, task.agent, text, names, max_steps=rt.limits.max_steps, depth=0,
                        attempt=attempt, before_write=before_write, output=task.output)
    result = conv.run()
    result.snapshot = snap.get("snapshot")
    if result.stop_reason == "completed" and result.status == "complete" \
            and task.validation_command:
        _validate(rt, task.validation_command, result, attempt)
    if result.stop_reason != "completed" and result.status == "failed" \
            and _changed(rt, result):
        result.status = "partial"  # fail gracefully: the work so far is kept and reported
    return result


def _validate(rt: Runtime, command: str, result: AttemptResult, attempt: int) -> None:
    """Backpressure: a claim of success counts only if the validation command passes."""
    stop = rt.stop_requested()
    if stop:
        result.stop_reason, result.status = stop, "failed"
        result.error = f"{stop} before the validation command could run"
        return
    timeout = max(1.0, min(rt.limits.validation_timeout_s, rt.terminator.time_left()))
    check = run_validation(rt.worktree, rt.policy, command, timeout)
    result.validation = check
    rt.record("validation", attempt=attempt, command=command, ok=check.ok,
              condition=check.condition, output=tail(check.output))
    if not check.ok:
        result.status = "failed"
        result.error = check.error


def _changed(rt: Runtime, result: AttemptResult) -> bool:
    """Did the attempt leave changes (files or commits) behind?"""
    if not result.wrote:
        return False
    if result.snapshot is None:
        return True  # a write was attempted and nothing tells us otherwise
    try:
        now = take_snapshot(rt.worktree)
    except (AgentrunError, OSError):
        return True
    return (now.tree, now.head) != (result.snapshot.tree, result.snapshot.head)


def _rollback(rt: Runtime, result: AttemptResult) -> bool:
    """Restore the worktree before a retry; False (no retry) if that is impossible."""
    if result.snapshot is None:
        if not result.wrote:
            return True  # nothing was written: the worktree is as the attempt found it
        rt.record("rollback_failed", error="no snapshot was taken before the first write")
        result.error = f"{result.error}; cannot roll back before a retry (no snapshot)"
        return False
    try:
        restore_snapshot(rt.worktree, result.snapshot)
    except (AgentrunError, OSError) as exc:
        rt.record("rollback_failed", error=str(exc))
        result.error = f"{result.error}; rollback before retry failed: {exc}"
        return False
    rt.record("rollback", tree=result.snapshot.tree, head=result.snapshot.head)
    return True


def _outcome(results: list[AttemptResult], tracker: TokenTracker,
             redactor: Redactor) -> AgentOutcome:
    """The last attempt decides; steps and tokens add up over all of them. Texts that come
    from the model or from command output are redacted: they end up in result files."""
    last = results[-1]
    sub = last.submission
    error = last.error
    if error and last.status != "complete" and len(results) > 1:
        error = f"failed after {len(results)} attempts; last error: {error}"
    return AgentOutcome(
        status=last.status, summary=redactor.text(last.summary),
        criteria_met=[redactor.text(c) for c in sub.criteria_met] if sub else [],
        deviations=[redactor.text(d) for d in sub.deviations] if sub else [],
        error=redactor.text(error) if error else None, attempts=len(results),
        steps=sum(r.steps for r in results), usage=tracker.usage,
        stop_reason=last.stop_reason, submitted=sub is not None,
        output=sub.output if sub else None)
