"""Running one model turn's tool calls: each call gets exactly one result, and what they say.

The conversation loop (agent/conversation.py) decides what happens next; this module only runs
the calls of one reply (a call after submit_result or a stop is skipped, a command may not
outlive the execution's deadline, the first write takes the snapshot), records each call and
result to the transcript, emits each call's span, and classifies the results into one
`Verdict` for the loop to act on (docs/ARCHITECTURE.md: the built-in loop runs its tool calls
in a sandbox). `ToolTurn` is a part of `Conversation`: the state it reads and writes is the
conversation's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, TypedDict

from agentrun.agent.breakers import CircuitBreaker
from agentrun.agent.classifier import OK, Decision, ErrorClassifier, Verdict, first_line
from agentrun.agent.runtime import Runtime
from agentrun.agent.subagent import ALWAYS_TOOLS, LoopHooks
from agentrun.agent.transcript import truncate
from agentrun.core.errors import Interrupted
from agentrun.core.events import ToolEvent
from agentrun.providers.base import Message, ToolCall, Turn
from agentrun.tools.base import INVALID_ARGUMENTS, ToolResult
from agentrun.tools.registry import Toolset

WRITE_TOOLS = frozenset({"write_file", "edit_file", "run_command", "spawn_subagent"})


class Where(TypedDict):
    """Which conversation an event or a transcript entry is from."""

    agent: str
    depth: int
    attempt: int


class ToolTurn:
    """Runs a turn's tool calls for the conversation that owns the attributes below."""

    rt: Runtime
    where: Where
    tools: Toolset
    hooks: LoopHooks
    classifier: ErrorClassifier
    breaker: CircuitBreaker
    before_write: Callable[[], None] | None
    messages: list[Message]
    failed_ids: list[str]  # failed calls since the last success
    recent_errors: list[dict[str, str]]
    reflection: list[Message]
    refused: str
    wrote: bool
    actions: list[str]
    last_action: str
    observation: str

    def record(self, type: str, **data: Any) -> None:
        self.rt.record(type, **self.where, **data)

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
            self.last_action = f"{call.name}({short_args(call.arguments)})"
            self.observation = truncate(result.content, 2_000)
        if not result.is_error:
            self._note_action(call)
        return result

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


def _skipped(why: str) -> ToolResult:
    return ToolResult(content=f"not executed: {why}", is_error=True, error_kind="skipped",
                      data={"skipped": True})


def short_args(arguments: dict[str, Any], limit: int = 200) -> str:
    """A call's arguments as JSON, cut to `limit` characters."""
    text = json.dumps(arguments, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."
