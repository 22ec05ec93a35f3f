"""One conversation: react -> validate -> reflect -> backtrack, until the terminator stops it.

`Conversation.run` is one fresh context (an attempt of the retry loop, or a sub-agent): call
the model, run its tool calls (each gets exactly one result), classify what went wrong, force a
reflection or clean a failed approach out of the context, and let the terminator decide when
to stop. Policies live in their own modules; this file only wires them in order.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, TypedDict

from pydantic import BaseModel

from agentrun.agent.breakers import CircuitBreaker
from agentrun.agent.budget import WARN_AT
from agentrun.agent.classifier import (
    OK,
    Decision,
    ErrorClassifier,
    Verdict,
    classify_provider_error,
    first_line,
)
from agentrun.agent.context import clean_context
from agentrun.agent.definitions import AgentDefinition
from agentrun.agent.modelcall import Stopped, call_model
from agentrun.agent.prompts import render
from agentrun.agent.results import AttemptOutcome
from agentrun.agent.runtime import Runtime
from agentrun.agent.subagent import ALWAYS_TOOLS, LoopHooks
from agentrun.agent.terminator import stop_message
from agentrun.agent.transcript import truncate
from agentrun.core.errors import Interrupted
from agentrun.core.events import StepEvent, ToolEvent, TruncatedEvent, UsageCounts
from agentrun.core.status import Status, StopReason
from agentrun.providers.base import Message, Request, ToolCall, Turn
from agentrun.providers.errors import ProviderError
from agentrun.tools.base import INVALID_ARGUMENTS, ToolContext, ToolResult
from agentrun.tools.names import ALL_TOOLS
from agentrun.tools.registry import Toolset

WRITE_TOOLS = frozenset({"write_file", "edit_file", "run_command", "spawn_subagent"})
MAX_TRUNCATIONS = 3  # replies in a row cut off at the output limit before the attempt stops


def tool_names_for(agent: AgentDefinition) -> list[str]:
    """A top-level agent's tools plus the two every agent has (sub-agents: `LoopHooks`)."""
    names = list(agent.tools) if agent.tools else list(ALL_TOOLS)
    return names + [t for t in ALWAYS_TOOLS if t not in names]


class _Where(TypedDict):
    """Which conversation an event or a transcript entry is from."""

    agent: str
    depth: int
    attempt: int


class Conversation:
    """One fresh context: a task, a toolset, and the react-validate-reflect-backtrack loop."""

    def __init__(self, rt: Runtime, agent: AgentDefinition, task_text: str,
                 tool_names: list[str], *, max_steps: int, depth: int = 0, attempt: int = 1,
                 before_write: Callable[[], None] | None = None,
                 output: type[BaseModel] | None = None) -> None:
        self.rt, self.agent, self.max_steps, self.depth = rt, agent, max_steps, depth
        self.attempt = attempt
        self.where = _Where(agent=agent.name, depth=depth, attempt=attempt)
        self.before_write = before_write
        self.output = output  # the result model the task declared: submit_result requires it
        self.refused = ""  # why the last submit_result was refused
        self.hooks = LoopHooks(rt, agent, tool_names, depth, self._run_child)
        self.tools = Toolset(ToolContext(root=rt.worktree, policy=rt.policy, hooks=self.hooks,
                                         sandbox=rt.sandbox), tool_names, output=output)
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
        self.nudged = False
        self.truncations = 0  # replies in a row cut off at the output limit
        self.actions: list[str] = []  # what was done, for a graceful summary
        self.wrote = False
        self.last_thought = self.last_action = self.observation = ""

    # -- the loop -------------------------------------------------------------------------------

    def run(self) -> AttemptOutcome:
        while True:
            reason = self.rt.terminator.check(self.steps, self.breaker.failed_steps,
                                              self.breaker.backtracks, self.max_steps)
            if reason is None and not self.confirm_long_task():
                reason = "interrupted"
            if reason:
                return self.stop(reason)
            self.warn_budget()
            turn = self.react()
            if isinstance(turn, AttemptOutcome):
                return turn
            if turn.stop_reason == "refusal":
                return self.declined(turn)
            if self.reflecting:  # a reflection cut short is still a reflection
                self.reflected(turn)
                continue
            if turn.stop_reason == "max_tokens":
                cut = self.truncated(turn)
                if cut is not None:
                    return cut
                continue
            self.truncations = 0
            if not turn.tool_calls:
                if self.should_nudge():
                    self.messages += [turn.as_message(), Message(role="user", content=(
                        "You ended your turn without calling submit_result. If the work is "
                        "done, call submit_result with the status, a summary, the acceptance "
                        "criteria met and any deviations; otherwise continue working."))]
                    self.record("nudge", reason="end_turn without submit_result")
                    continue
                return self.finish(turn)
            verdict = self.validate(turn)
            if self.hooks.submission is not None:
                return self.submitted()
            stopped = self.reflect(verdict)
            if stopped:
                return stopped

    # -- react ----------------------------------------------------------------------------------

    def react(self) -> Turn | AttemptOutcome:
        request = Request(system=self.agent.system_prompt, messages=list(self.messages),
                          tools=[] if self.reflecting else self.specs, agent=self.agent.name,
                          group=self.rt.group)
        started = time.time()  # the call's span in traces and the report's timeline
        try:
            turn = call_model(self.rt, request, **self.where)
        except Stopped as exc:
            return self.stop(exc.reason, error=exc.error)
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
        self.rt.emit(StepEvent(
            step=self.steps, tokens=cumulative,
            usage=UsageCounts(**turn.usage.to_dict()),  # the turn's: the run's spending sums it
            worker_usage=UsageCounts(**self.rt.tracker.usage.to_dict()),  # the display prices it
            tool=turn.tool_calls[0].name if turn.tool_calls else None,
            started=round(started, 3), **self.where))
        if turn.text.strip():
            self.last_thought = turn.text.strip()
        return turn

    # -- validate -------------------------------------------------------------------------------

    def validate(self, turn: Turn) -> Verdict:
        """Run every call (each gets exactly one result message) and classify the results."""
        self.messages.append(turn.as_message())
        verdict, failed = OK, []
        for call in turn.tool_calls:
            started = time.time()
            result = self.execute(call)
            if not (result.data and result.data.get("skipped")):  # a call that ran: its span
                self.rt.emit(ToolEvent(name=call.name, started=round(started, 3),
                                       error=result.is_error, **self.where))
            self.messages.append(Message(role="tool", content=result.content, name=call.name,
                                         tool_call_id=call.id, is_error=result.is_error))
            self.record("tool_result", id=call.id, name=call.name, is_error=result.is_error,
                        error_kind=result.error_kind, content=result.content)
            if result.data and result.data.get("skipped"):
                continue
            failed.append(result.is_error)
            if result.is_error:
                self.failed_ids.append(call.id)
                error = first_line(result.content, 200, "(no output)")
                if call.name == "submit_result":
                    self.refused = "; ".join((result.data or {}).get("problems") or [error])
                self.recent_errors.append({"tool": call.name, "error": error})
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
        arguments = self._within_deadline(call)
        if call.name == "submit_result":  # a result ends up in result files and specs
            arguments = self.rt.transcript.redactor.value(arguments)
        if self.rt.files_ready is not None:  # the first call may come before the checkout ends
            self.rt.files_ready()
        try:
            result = self.tools.call(call.name, arguments)
        except Interrupted:
            self.rt.cancel.set()
            return _skipped("the run was interrupted")
        if call.name not in ALWAYS_TOOLS:  # bookkeeping calls say nothing about the approach
            self.last_action = f"{call.name}({_short_args(call.arguments)})"
            self.observation = truncate(result.content, 2_000)
        if not result.is_error:
            self._note_action(call)
        return result

    # -- replies that are not answers ------------------------------------------------------------

    def declined(self, turn: Turn) -> AttemptOutcome:
        """The model refused: its calls are not run and asking again would get the same."""
        self.messages.append(turn.as_message())
        words = truncate(turn.text.strip(), 500) or "(it gave no reason)"
        self.record("refusal", text=turn.text, calls=[c.name for c in turn.tool_calls])
        return self.stop("refusal", error=f"the model refused the task: {words}")

    def truncated(self, turn: Turn) -> AttemptOutcome | None:
        """The reply was cut off at the output limit. Cut text is continued; a cut tool call
        is not run (its arguments are incomplete, and the calls before it belong to the same
        unfinished reply) and the model is asked for smaller calls. `MAX_TRUNCATIONS` cuts in
        a row end the attempt: the limit is too small for what the model tries to say."""
        self.truncations += 1
        cut = turn.tool_calls[-1].name if turn.tool_calls else None
        where = f"mid tool call `{cut}`" if cut else "mid text"
        self.record("truncated", n=self.truncations, where=where,
                    calls=[c.name for c in turn.tool_calls])
        self.rt.emit(TruncatedEvent(n=self.truncations, where=where, **self.where))
        if self.truncations >= MAX_TRUNCATIONS:
            return self.stop("truncated", error=(
                f"the model's reply was cut off at the output limit {self.truncations} times "
                f"in a row (the last one {where}); nothing of the cut replies was run"))
        if cut:
            text = (f"Your reply was cut off by the output limit while you were writing the "
                    f"call to `{cut}`: its arguments were incomplete, so no call of that reply "
                    f"was run. Send the calls again, each small enough to fit (for example, "
                    f"write a large file in several smaller edits).")
            reply = Message(role="assistant", content=turn.text)
        else:
            text = "Your reply was cut off by the output limit. Continue where you stopped."
            reply = turn.as_message()
        self.messages += [reply, Message(role="user", content=text)]
        return None

    # -- reflect and backtrack ------------------------------------------------------------------

    def reflect(self, verdict: Verdict) -> AttemptOutcome | None:
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

    def should_nudge(self) -> bool:
        """Once per attempt, ask a model that stopped talking to submit its result.

        Its result (status, criteria, deviations) is what the orchestrator reports; a turn
        that just ends loses all of that.
        """
        if self.nudged or "submit_result" not in self.tools.names:
            return False
        self.nudged = True
        return True

    def finish(self, turn: Turn) -> AttemptOutcome:
        """The model ended its turn without tools, also after the nudge. Only a sub-agent's
        reply is its result (its parent reads the summary and judges); a top-level agent's
        result is what it submits, so without one its work is never `complete`."""
        self.messages.append(turn.as_message())
        if self.output is not None:  # the task needs its result model; a reply is not one
            self.record("terminator", stop_reason="completed", how="end_turn")
            why = f"; the last one was refused: {self.refused}" if self.refused else ""
            return self._result(StopReason.COMPLETED, Status.FAILED, turn.text.strip(),
                                error=f"ended without submitting its result (`output`) with "
                                      f"submit_result{why}")
        if self.depth or "submit_result" not in self.tools.names:
            self.record("terminator", stop_reason="completed", how="end_turn")
            return self._result(StopReason.COMPLETED, Status.COMPLETE, turn.text.strip())
        why = f" (the last one was refused: {self.refused})" if self.refused else \
            " (it was asked once to call it)"
        return self.stop("no_result", error=f"the model ended its turn without submitting its "
                                            f"result with submit_result{why}")

    def submitted(self) -> AttemptOutcome:
        sub = self.hooks.submission
        assert sub is not None
        self.record("terminator", stop_reason="completed", how="submit_result",
                    status=sub.status)
        return self._result(StopReason.COMPLETED, Status(sub.status), sub.summary, error=sub.error,
                            submission=sub, criteria_met=sub.criteria_met,
                            deviations=sub.deviations, no_change_needed=sub.no_change_needed)

    def stop(self, reason: str, error: str | None = None,
             escalated: bool = False) -> AttemptOutcome:
        error = error or stop_message(reason, self.rt.limits, self.rt.tracker, self.breaker,
                                      self.max_steps)
        self.record("terminator", stop_reason=reason, error=error)
        done = "; ".join(self.actions[-10:])
        summary = f"Stopped ({reason}) after {self.steps} steps."
        if done:
            summary += f" Done: {done}."
        if self.last_thought:
            summary += f" Last note: {truncate(self.last_thought, 300)}"
        return self._result(StopReason(reason), Status.BLOCKED if escalated else Status.FAILED,
                            summary, error=error, escalated=escalated)

    def _result(self, reason: StopReason, status: Status, summary: str,
                **extra: Any) -> AttemptOutcome:
        return AttemptOutcome(stop_reason=reason, status=status, summary=summary,
                             steps=self.steps, last_thought=self.last_thought,
                             last_action=self.last_action, observation=self.observation,
                             wrote=self.wrote, **extra)

    # -- helpers --------------------------------------------------------------------------------

    def record(self, type: str, **data: Any) -> None:
        self.rt.record(type, **self.where, **data)

    def _within_deadline(self, call: ToolCall) -> dict[str, Any]:
        """A command may not outlive the execution's wall-clock limit."""
        args = call.arguments
        if call.name != "run_command":
            return args
        wanted = args.get("timeout_s") or self.rt.policy.default_timeout_s
        left = self.rt.terminator.time_left()
        if isinstance(wanted, int | float) and not isinstance(wanted, bool) and left < wanted:
            return {**args, "timeout_s": max(0.5, left)}
        return args

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
                   depth: int) -> AttemptOutcome:
        child = Conversation(self.rt, agent, text, names, max_steps=max_steps, depth=depth,
                             attempt=self.attempt)
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
