"""How a conversation ends: the outcome of a submitted result, a final reply, or a stop.

The conversation loop (agent/conversation.py) decides that an attempt is over; this module
turns the way it ended into the `AttemptOutcome` the worker reads (agent/results.py): a
submitted result, a reply without one (only a sub-agent's reply is its result), or a stop by
the terminator (agent/terminator.py) with a summary of what was done. Each ending is recorded
to the transcript (docs/ARCHITECTURE.md). `Endings` is a part of `Conversation`: the state it
reads is the conversation's.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from agentrun.agent.breakers import CircuitBreaker
from agentrun.agent.results import AttemptOutcome
from agentrun.agent.runtime import Runtime
from agentrun.agent.subagent import LoopHooks
from agentrun.agent.terminator import stop_message
from agentrun.agent.toolturn import Where
from agentrun.agent.transcript import truncate
from agentrun.core.status import Status, StopReason
from agentrun.providers.base import Message, Turn
from agentrun.tools.registry import Toolset


class Endings:
    """The outcomes of the conversation that owns the attributes below."""

    rt: Runtime
    where: Where
    tools: Toolset
    hooks: LoopHooks
    breaker: CircuitBreaker
    output: type[BaseModel] | None
    messages: list[Message]
    depth: int
    max_steps: int
    steps: int
    nudged: bool
    refused: str
    wrote: bool
    actions: list[str]
    last_thought: str
    last_action: str
    observation: str

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
            self._ended(stop_reason="completed", how="end_turn")
            why = f"; the last one was refused: {self.refused}" if self.refused else ""
            return self._result(StopReason.COMPLETED, Status.FAILED, turn.text.strip(),
                                error=f"ended without submitting its result (`output`) with "
                                      f"submit_result{why}")
        if self.depth or "submit_result" not in self.tools.names:
            self._ended(stop_reason="completed", how="end_turn")
            return self._result(StopReason.COMPLETED, Status.COMPLETE, turn.text.strip())
        why = f" (the last one was refused: {self.refused})" if self.refused else \
            " (it was asked once to call it)"
        return self.stop("no_result", error=f"the model ended its turn without submitting its "
                                            f"result with submit_result{why}")

    def submitted(self) -> AttemptOutcome:
        sub = self.hooks.submission
        assert sub is not None
        self._ended(stop_reason="completed", how="submit_result", status=sub.status)
        return self._result(StopReason.COMPLETED, Status(sub.status), sub.summary, error=sub.error,
                            submission=sub, criteria_met=sub.criteria_met,
                            deviations=sub.deviations, no_change_needed=sub.no_change_needed)

    def stop(self, reason: str, error: str | None = None,
             escalated: bool = False) -> AttemptOutcome:
        error = error or stop_message(reason, self.rt.limits, self.rt.tracker, self.breaker,
                                      self.max_steps)
        self._ended(stop_reason=reason, error=error)
        done = "; ".join(self.actions[-10:])
        summary = f"Stopped ({reason}) after {self.steps} steps."
        if done:
            summary += f" Done: {done}."
        if self.last_thought:
            summary += f" Last note: {truncate(self.last_thought, 300)}"
        return self._result(StopReason(reason), Status.BLOCKED if escalated else Status.FAILED,
                            summary, error=error, escalated=escalated)

    def _ended(self, **data: Any) -> None:
        self.rt.record("terminator", **self.where, **data)

    def _result(self, reason: StopReason, status: Status, summary: str,
                **extra: Any) -> AttemptOutcome:
        return AttemptOutcome(stop_reason=reason, status=status, summary=summary,
                             steps=self.steps, last_thought=self.last_thought,
                             last_action=self.last_action, observation=self.observation,
                             wrote=self.wrote, **extra)
