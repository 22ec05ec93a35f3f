"""One conversation: react -> validate -> reflect -> backtrack, until the terminator stops it.

`Conversation.run` is one fresh context (an attempt of the retry loop, or a sub-agent): call
the model, run its tool calls (agent/toolturn.py: each gets exactly one result), classify what
went wrong, force a reflection or clean a failed approach out of the context, and let the
terminator decide when to stop (agent/endings.py turns the ending into the attempt's outcome).
Policies live in their own modules; this file only drives the turns and wires them in order.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from agentrun.agent.breakers import CircuitBreaker
from agentrun.agent.budget import WARN_AT
from agentrun.agent.classifier import Decision, ErrorClassifier, Verdict, classify_provider_error
from agentrun.agent.context import clean_context
from agentrun.agent.definitions import AgentDefinition
from agentrun.agent.endings import Endings
from agentrun.agent.modelcall import Stopped, call_model
from agentrun.agent.prompts import render
from agentrun.agent.results import AttemptOutcome
from agentrun.agent.runtime import Runtime
from agentrun.agent.subagent import ALWAYS_TOOLS, LoopHooks
from agentrun.agent.toolturn import ToolTurn, Where, short_args
from agentrun.agent.transcript import truncate
from agentrun.core.events import StepEvent, TruncatedEvent, UsageCounts
from agentrun.providers.base import Message, Request, ToolCall, Turn
from agentrun.providers.errors import ProviderError
from agentrun.tools.base import ToolContext
from agentrun.tools.names import ALL_TOOLS
from agentrun.tools.registry import Toolset

MAX_TRUNCATIONS = 3  # replies in a row cut off at the output limit before the attempt stops


def tool_names_for(agent: AgentDefinition) -> list[str]:
    """A top-level agent's tools plus the two every agent has (sub-agents: `LoopHooks`)."""
    names = list(agent.tools) if agent.tools else list(ALL_TOOLS)
    return names + [t for t in ALWAYS_TOOLS if t not in names]


class Conversation(ToolTurn, Endings):
    """One fresh context: a task, a toolset, and the react-validate-reflect-backtrack loop."""

    def __init__(self, rt: Runtime, agent: AgentDefinition, task_text: str,
                 tool_names: list[str], *, max_steps: int, depth: int = 0, attempt: int = 1,
                 before_write: Callable[[], None] | None = None,
                 output: type[BaseModel] | None = None) -> None:
        self.rt, self.agent, self.max_steps, self.depth = rt, agent, max_steps, depth
        self.attempt = attempt
        self.where = Where(agent=agent.name, depth=depth, attempt=attempt)
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
        approach = ", ".join(dict.fromkeys(f"`{c.name}({short_args(c.arguments, 60)})`"
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

    # -- helpers --------------------------------------------------------------------------------

    def _run_child(self, agent: AgentDefinition, text: str, names: list[str], max_steps: int,
                   depth: int) -> AttemptOutcome:
        child = Conversation(self.rt, agent, text, names, max_steps=max_steps, depth=depth,
                             attempt=self.attempt)
        return child.run()


def _call_dict(call: ToolCall) -> dict[str, Any]:
    data: dict[str, Any] = {"id": call.id, "name": call.name, "arguments": call.arguments}
    if call.arguments_error:
        data["arguments_error"] = call.arguments_error
    return data
