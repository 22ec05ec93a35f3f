"""A provider whose replies come from a Python function called with each request.

A script fixes every reply in advance; a function can look at what the model was sent (a tool
result, a nudge, the step number) and answer from it, so a test can assert the model really saw
what the loop claims to send. It runs in-process only: nothing here is picklable or selectable
from the command line.

The function gets the `Request` and returns a `Turn`, or a plain string for a text-only turn.
Whatever it leaves unset is filled in the way the other providers report it: tool call ids,
`stop_reason` ("tool_use" when it calls tools), the model name, and usage (estimated from the
request and reply when the function reports none). To simulate a failed call it raises a
`agentrun.providers.errors.ProviderError`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

from agentrun.core.usage import Usage
from agentrun.providers.base import Request, ToolCall, Turn
from agentrun.providers.tokens import estimate_request, heuristic_tokens

ReplyFunction = Callable[[Request], Turn | str]


class FunctionProvider:
    """Implements `Provider` by calling `reply(request)`; keeps every request it was sent."""

    name = "function"

    def __init__(self, reply: ReplyFunction, model: str = "function") -> None:
        self.reply = reply
        self.model = model
        self.requests: list[Request] = []
        self._lock = threading.Lock()

    def complete(self, request: Request) -> Turn:
        with self._lock:
            self.requests.append(request)
            call_number = len(self.requests)
        reply = self.reply(request)
        turn = Turn(text=reply) if isinstance(reply, str) else reply
        calls = [ToolCall(id=c.id or f"call_fn_{call_number}_{i}", name=c.name,
                          arguments=dict(c.arguments), arguments_error=c.arguments_error)
                 for i, c in enumerate(turn.tool_calls, start=1)]
        stop = "tool_use" if calls and turn.stop_reason == "end_turn" else turn.stop_reason
        usage = turn.usage if turn.usage.total else self._estimate(request, turn.text, calls)
        return Turn(text=turn.text, tool_calls=calls, stop_reason=stop,
                    usage=Usage(**usage.to_dict()), model=turn.model or self.model)

    def _estimate(self, request: Request, text: str, calls: list[ToolCall]) -> Usage:
        written = text + "".join(c.name + json.dumps(c.arguments) for c in calls)
        return Usage(estimate_request(request, self.model).tokens, heuristic_tokens(written))
