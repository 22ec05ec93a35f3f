"""The agent loop: react -> validate -> reflect -> backtrack -> terminate, inside a retry loop.

`Conversation.run` is one fresh context (an attempt, or a sub-agent): call the model, run its
tool calls, classify what went wrong, clean the context when the approach failed, and let the
terminator decide when to stop. `run_agent` wraps attempts in the Ralph retry loop: snapshot
before the first write, validate claimed success, roll back a failed attempt and start the next
one in a fresh conversation that carries the failure.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agentrun.agent.breakers import CircuitBreaker
from agentrun.agent.budget import WARN_AT, TokenTracker
from agentrun.agent.classifier import (
    OK,
    Decision,
    ErrorClassifier,
    Verdict,
    classify_provider_error,
)
from agentrun.agent.context import clean_context
from agentrun.agent.definitions import AgentDefinition
from agentrun.agent.modelcall import Stopped, call_model
from agentrun.agent.prompts import render
from agentrun.agent.retry import Validation, failure_condition, run_validation, tail
from agentrun.agent.runtime import Runtime
from agentrun.agent.subagent import ALWAYS_TOOLS, LoopHooks, Submission
from agentrun.agent.terminator import Limits, Terminator
from agentrun.agent.transcript import Transcript, truncate
from agentrun.errors import AgentrunError, Interrupted
from agentrun.providers.base import Message, Provider, Request, ToolCall, Turn, Usage
from agentrun.providers.errors import ProviderError
from agentrun.tools.base import INVALID_ARGUMENTS, CommandPolicy, ToolContext, ToolResult

WRITE_TOOLS = frozenset({"write_file", "edit_file", "run_command", "spawn_subagent"})


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class AttemptResult:
    """How one conversation ended."""

    stop_reason: str
    status: str
    summary: str
    error: str | None = None
    submission: Submission | None = None
    steps: int = 0
    escalated: bool = False
    last_thought: str = ""
    last_action: str = ""
    observation: str = ""
    validation: Validation | None = None
    snapshot: Any = None  # agentrun.agent.snapshots.Snapshot, taken before the first write
    wrote: bool = False  # a write tool was called


def tool_names_for(agent: AgentDefinition, depth: int = 0) -> list[str]:
    """The agent's tools plus the two every agent has; no `spawn_subagent` below the top."""
    from agentrun.tools.registry import ALL_TOOLS

    names = list(agent.tools) if agent.tools else list(ALL_TOOLS)
    names += [t for t in ALWAYS_TOOLS if t not in names]
    return [t for t in names if not (depth >= 1 and t == "spawn_subagent")]


class Conversation:
    """One fresh context: a task, a toolset, and the react-validate-reflect-backtrack loop."""

    def __init__(self, rt: Runtime, agent: AgentDefinition, task_text: str,
                 tool_names: list[str], *, max_steps: int, depth: int = 0, attempt: int = 1,
                 before_write: Callable[[], None] | None = None) -> None:
        from agentrun.tools.registry import Toolset

        self.rt, self.agent, self.max_steps, self.depth = rt, agent, max_steps, depth
        self.where = {"agent": agent.name, "depth": depth, "attempt": attempt}
        self.before_write = before_write
        self.hooks = LoopHooks(rt, agent, tool_names, depth, self._run_child)
        self.tools = Toolset(ToolContext(root=rt.worktree, policy=rt.policy, hooks=self.hooks),
                             tool_names)
        self.specs = self.tools.specs()
        self.messages: list[Message] = [Message(role="user", content=task_text)]
        limits = rt.limits
        self.breaker = CircuitBreaker(limits.reflection_after_errors, limits.max_backtracks)
        self.classifier = ErrorClassifier(self.breaker, limits.stuck_repeats,
                                          limits.denials_before_escalation)
        self.steps = 0
        self.failed_ids: list[str] = []  # failed calls since the last success
        self.recent_errors: list[dict[str, str]] = []
        self.reflection: list[Message] = []  # the forced reflection exchange
        self.reflection_text = ""
        self.reflecting = False
        self.warned: set[int] = set()
        self.confirmed_at = 0
        self.actions: list[str] = []  # what was done, for a graceful summary
        self.wrote = False
        self.last_thought = self.last_action = self.observation = ""

    # -- the loop -------------------------------------------------------------------------------

    def run(self) -> AttemptResult:
        while True:
            reason = self.rt.terminator.check(self.steps, self.breaker.failed_steps,
                                              self.breaker.backtracks, self.max_steps)
            if reason is None and not self.confirm_long_task():
                reason = "interrupted"
            if reason:
                return self.stop(reason)
            self.warn_budget()
            turn = self.react()
            if isinstance(turn, AttemptResult):
                return turn
            if self.reflecting:
                self.reflected(turn)
                continue
            if not turn.tool_calls:
                if turn.stop_reason == "max_tokens":
                    self.messages += [turn.as_message(), Message(role="user", content=(
                        "Your reply was cut off by the output limit. Continue where you "
                        "stopped."))]
                    continue
                return self.finish(turn)
            verdict = self.validate(turn)
            if self.hooks.submission is not None:
                return self.submitted()
            stopped = self.reflect(verdict)
            if stopped:
                return stopped

    # -- react ----------------------------------------------------------------------------------

    def react(self) -> Turn | AttemptResult:
        request = Request(system=self.agent.system_prompt, messages=list(self.messages),
                          tools=[] if self.reflecting else self.specs, agent=self.agent.name,
                          group=self.rt.group)
        try:
            turn = call_model(self.rt, request, **self.where)
        except Stopped as exc:
            return self.stop(exc.reason)
        except ProviderError as exc:
            verdict = classify_provider_error(exc, work_done=self.wrote)
            self.record("decision", source="provider", decision=verdict.decision.value,
                        reason=verdict.reason, error_type=type(exc).__name__)
            return self.stop("error", error=verdict.reason,
                             escalated=verdict.decision is Decision.ESCALATE)
        self.steps += 1
        cumulative = self.rt.tracker.add(turn.usage)
        self.record("model_turn", step=self.steps, text=turn.text, reflection=self.reflecting,
                    tool_calls=[_call_dict(c) for c in turn.tool_calls],
                    stop_reason=turn.stop_reason, usage=turn.usage.to_dict(),
                    cumulative_tokens=cumulative)
        self.rt.emit({"type": "step", "step": self.steps, "tokens": cumulative,
                      "tool": turn.tool_calls[0].name if turn.tool_calls else None,
                      **self.where})
        if turn.text.strip():
            self.last_thought = turn.text.strip()
        return turn

    # -- validate -------------------------------------------------------------------------------

    def validate(self, turn: Turn) -> Verdict:
        """Run every call (each gets exactly one result message) and classify the results."""
        self.messages.append(turn.as_message())
        verdict, failed = OK, []
        for call in turn.tool_calls:
            result = self.execute(call)
            self.messages.append(Message(role="tool", content=result.content, name=call.name,
                                         tool_call_id=call.id, is_error=result.is_error))
            self.record("tool_result", id=call.id, name=call.name, is_error=result.is_error,
                        error_kind=result.error_kind, content=result.content)
            if result.data and result.data.get("skipped"):
                continue
            failed.append(result.is_error)
            if result.is_error:
                self.failed_ids.append(call.id)
                self.recent_errors.append({"tool": call.name,
                                           "error": _first_line(result.content)})
            else:
                self.failed_ids, self.recent_errors, self.reflection = [], [], []
            call_verdict = self.classifier.tool_result(call, result)
            if result.is_error or call_verdict.decision is not Decision.CONTINUE:
                self.record("decision", source="tool", call=call.id,
                            decision=call_verdict.decision.value, reason=call_verdict.reason)
            verdict = verdict.worse(call_verdict)
        if failed:
            self.breaker.record_step(all(failed))
        return verdict

    def execute(self, call: ToolCall) -> ToolResult:
        self.record("tool_call", id=call.id, name=call.name, arguments=call.arguments)
        if self.hooks.submission is not None:
            return _skipped("submit_result already ended this attempt")
        stop = self.rt.stop_requested()
        if stop:
            return _skipped(f"the run is stopping ({stop})")
        if call.arguments_error:
            return ToolResult.error(INVALID_ARGUMENTS,
                                    f"the arguments of {call.name} could not be read "
                                    f"({call.arguments_error}); send one JSON object")
        if call.name in WRITE_TOOLS:
            self.wrote = True
            if self.before_write is not None:
                self.before_write()
        try:
            result = self.tools.call(call.name, call.arguments)
        except Interrupted:
            self.rt.cancel.set()
            return _skipped("the run was interrupted")
        if call.name not in ALWAYS_TOOLS:  # bookkeeping calls say nothing about the approach
            self.last_action = f"{call.name}({_short_args(call.arguments)})"
            self.observation = truncate(result.content, 2_000)
        if not result.is_error:
            self._note_action(call)
        return result

    # -- reflect and backtrack ------------------------------------------------------------------

    def reflect(self, verdict: Verdict) -> AttemptResult | None:
        decision = verdict.decision
        if decision is Decision.ESCALATE:
            if self.rt.confirm(f"{verdict.reason}. Let the agent continue?"):
                self.classifier.forgive_denials()
                self.record("escalation_allowed", reason=verdict.reason)
                return None
            return self.stop("error", error=f"escalated: {verdict.reason}", escalated=True)
        if decision is Decision.FAIL_GRACEFULLY:
            return self.stop("error", error=verdict.reason)
        if decision is Decision.BACKTRACK:
            self.backtrack(verdict)
        elif self.breaker.should_reflect():
            self.force_reflection()
        return None

    def force_reflection(self) -> None:
        """Circuit breaker level 1: the next model call has no tools; it must explain first."""
        errors = self.recent_errors[-self.rt.limits.reflection_after_errors:]
        prompt = Message(role="user", content=render(
            "reflection", {"count": len(errors), "errors": errors}, self.rt.project_root))
        self.messages.append(prompt)
        self.reflection.append(prompt)
        self.breaker.reflection_forced()
        self.reflecting = True
        self.record("reflection_forced", consecutive_errors=self.breaker.consecutive_errors)

    def reflected(self, turn: Turn) -> None:
        if turn.tool_calls:  # no tools were offered: the calls are not run, nor kept
            self.record("reflection_calls_ignored", calls=[c.name for c in turn.tool_calls])
        self.reflection_text = turn.text.strip()
        answer = Message(role="assistant", content=self.reflection_text or "(no reflection)")
        resume = Message(role="user", content="Continue the task, applying your reflection.")
        self.messages += [answer, resume]
        self.reflection += [answer, resume]
        self.reflecting = False

    def backtrack(self, verdict: Verdict) -> None:
        """Replace the failed approach with a short summary, keeping calls and results paired."""
        self.classifier.backtracked()
        removed = set(self.failed_ids) | set(verdict.call_ids)
        calls = [c for m in self.messages for c in m.tool_calls if c.id in removed]
        approach = ", ".join(dict.fromkeys(f"`{c.name}({_short_args(c.arguments, 60)})`"
                                           for c in calls[-3:])) or "(the last approach)"
        summary = render("backtrack", {
            "backtracks": self.breaker.backtracks, "max_backtracks": self.breaker.max_backtracks,
            "approach": approach, "reason": verdict.reason,
            "reflection": self.reflection_text}, self.rt.project_root)
        before = len(self.messages)
        self.messages = clean_context(self.messages, removed, summary, drop=self.reflection)
        self.record("backtrack", n=self.breaker.backtracks, reason=verdict.reason,
                    removed_calls=sorted(removed), messages_before=before,
                    messages_after=len(self.messages), summary=summary)
        self.failed_ids, self.recent_errors, self.reflection = [], [], []
        self.reflection_text = ""

    # -- budget and confirmation ----------------------------------------------------------------

    def warn_budget(self) -> None:
        """Tell the model once per threshold (70%, 90%) that its budget is running out."""
        tracker = self.rt.tracker
        crossed = [t for t in WARN_AT if tracker.percent >= t and t not in self.warned]
        if not crossed or self.reflecting or tracker.exhausted:
            return
        self.warned.update(crossed)
        status = tracker.status()
        self.messages.append(Message(role="user", content=render(
            "budget_warning", status, self.rt.project_root)))
        self.record("budget_warning", **status)

    def confirm_long_task(self) -> bool:
        """Interactive runs only: after every N steps ask whether to go on."""
        every = self.rt.limits.confirm_after_steps
        if (not self.rt.interactive or self.depth or every <= 0 or self.steps == 0
                or self.steps % every or self.confirmed_at == self.steps):
            return True
        self.confirmed_at = self.steps
        return self.rt.confirm(f"{self.agent.name} has taken {self.steps} steps. Continue?")

    # -- endings --------------------------------------------------------------------------------

    def finish(self, turn: Turn) -> AttemptResult:
        """The model ended its turn without tools: accepted as done, without a submission."""
        self.messages.append(turn.as_message())
        self.record("terminator", stop_reason="completed", how="end_turn")
        return self._result("completed", "complete", turn.text.strip())

    def submitted(self) -> AttemptResult:
        sub = self.hooks.submission
        assert sub is not None
        self.record("terminator", stop_reason="completed", how="submit_result",
                    status=sub.status)
        return self._result("completed", sub.status, sub.summary, error=sub.error,
                            submission=sub)

    def stop(self, reason: str, error: str | None = None,
             escalated: bool = False) -> AttemptResult:
        error = error or self._stop_error(reason)
        self.record("terminator", stop_reason=reason, error=error)
        done = "; ".join(self.actions[-10:])
        summary = f"Stopped ({reason}) after {self.steps} steps."
        if done:
            summary += f" Done: {done}."
        if self.last_thought:
            summary += f" Last note: {truncate(self.last_thought, 300)}"
        return self._result(reason, "blocked" if escalated else "failed", summary,
                            error=error, escalated=escalated)

    def _stop_error(self, reason: str) -> str:
        limits, tracker = self.rt.limits, self.rt.tracker
        if reason == "max_steps":
            return f"reached the step limit ({self.max_steps}) before finishing"
        if reason == "timeout":
            return f"ran out of time (limit {limits.max_duration_s:g}s)"
        if reason == "budget":
            return f"token budget exhausted ({tracker.used} of {tracker.budget} tokens)"
        if reason == "circuit_breaker":
            if self.breaker.tripped:
                return f"circuit breaker: {self.breaker.backtracks} backtracks, the approach " \
                       f"is beyond recovery"
            return f"circuit breaker: {self.breaker.failed_steps} consecutive failed steps"
        if reason == "interrupted":
            return "interrupted"
        return reason

    def _result(self, reason: str, status: str, summary: str, **extra: Any) -> AttemptResult:
        return AttemptResult(stop_reason=reason, status=status, summary=summary,
                             steps=self.steps, last_thought=self.last_thought,
                             last_action=self.last_action, observation=self.observation,
                             wrote=self.wrote, **extra)

    # -- helpers --------------------------------------------------------------------------------

    def record(self, type: str, **data: Any) -> None:
        self.rt.record(type, **self.where, **data)

    def _note_action(self, call: ToolCall) -> None:
        args = call.arguments
        if call.name in ("write_file", "edit_file"):
            verb = "wrote" if call.name == "write_file" else "edited"
            self.actions.append(f"{verb} {args.get('path', '?')}")
        elif call.name == "run_command":
            self.actions.append(f"ran `{truncate(str(args.get('command', '')), 80)}`")
        elif call.name == "spawn_subagent":
            self.actions.append(f"ran sub-agent {args.get('agent', '?')}")

    def _run_child(self, agent: AgentDefinition, text: str, names: list[str], max_steps: int,
                   depth: int) -> AttemptResult:
        child = Conversation(self.rt, agent, text, names, max_steps=max_steps, depth=depth,
                             attempt=self.where["attempt"])
        return child.run()


def _skipped(why: str) -> ToolResult:
    return ToolResult(content=f"not executed: {why}", is_error=True, error_kind="skipped",
                      data={"skipped": True})


def _call_dict(call: ToolCall) -> dict[str, Any]:
    data: dict[str, Any] = {"id": call.id, "name": call.name, "arguments": call.arguments}
    if call.arguments_error:
        data["arguments_error"] = call.arguments_error
    return data


def _short_args(arguments: dict[str, Any], limit: int = 200) -> str:
    text = json.dumps(arguments, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _first_line(text: str, limit: int = 200) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "(no output)")
    return line if len(line) <= limit else line[: limit - 3] + "..."


# -- the retry ("Ralph") loop ------------------------------------------------------------------


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
                 interactive=task.interactive, on_event=on_event, sleep=sleep, ask=ask,
                 clock=clock)
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
    outcome = _outcome(results, tracker)
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
        from agentrun.agent.snapshots import take_snapshot

        try:
            snap["snapshot"] = take_snapshot(rt.worktree)
            rt.record("snapshot", attempt=attempt, tree=snap["snapshot"].tree,
                      head=snap["snapshot"].head)
        except (AgentrunError, OSError) as exc:
            rt.record("snapshot_failed", attempt=attempt, error=str(exc))

    conv = Conversation(rt, task.agent, text, names, max_steps=rt.limits.max_steps, depth=0,
                        attempt=attempt, before_write=before_write)
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
    from agentrun.agent.snapshots import take_snapshot

    try:
        now = take_snapshot(rt.worktree)
    except (AgentrunError, OSError):
        return True
    return (now.tree, now.head) != (result.snapshot.tree, result.snapshot.head)


def _rollback(rt: Runtime, result: AttemptResult) -> bool:
    """Restore the worktree before a retry; False (no retry) if that is impossible."""
    if result.snapshot is None:
        return True
    from agentrun.agent.snapshots import restore_snapshot

    try:
        restore_snapshot(rt.worktree, result.snapshot)
    except (AgentrunError, OSError) as exc:
        rt.record("rollback_failed", error=str(exc))
        result.error = f"{result.error}; rollback before retry failed: {exc}"
        return False
    rt.record("rollback", tree=result.snapshot.tree, head=result.snapshot.head)
    return True


def _outcome(results: list[AttemptResult], tracker: TokenTracker) -> AgentOutcome:
    last = results[-1]
    sub = last.submission
    error = last.error
    if error and last.status != "complete" and len(results) > 1:
        error = f"failed after {len(results)} attempts; last error: {error}"
    return AgentOutcome(
        status=last.status, summary=last.summary,
        criteria_met=list(sub.criteria_met) if sub else [],
        deviations=list(sub.deviations) if sub else [],
        error=error, attempts=len(results), steps=sum(r.steps for r in results),
        usage=tracker.usage, stop_reason=last.stop_reason, submitted=sub is not None)

