"""The model seam: one request in, one assistant turn out.

Messages use a neutral shape that every adapter translates to its wire format. Nothing here
imports a model SDK; adapters import theirs lazily when first used.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from agentrun.core.usage import Usage

Role = Literal["user", "assistant", "tool"]


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    # Set when the model sent arguments that are not a JSON object; the loop reports it back.
    arguments_error: str | None = None


@dataclass
class Message:
    """One conversation entry.

    user: `content` is the text. assistant: `content` is its text and `tool_calls` its calls.
    tool: the result of the call `tool_call_id` (every assistant tool call must be answered by
    exactly one tool message before the next assistant turn).
    """

    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None  # tool name, on tool messages
    is_error: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        calls = [ToolCall(**c) for c in data.get("tool_calls", [])]
        return cls(**{**data, "tool_calls": calls})


@dataclass
class ToolSpec:
    """A tool as the model sees it: name, description and a JSON schema for its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


# "max_tokens": the reply was cut off at the output limit (its last tool call may be incomplete);
# "refusal": the model declined to answer (its text, if any, says why)
FinishReason = Literal["end_turn", "tool_use", "max_tokens", "refusal", "other"]


@dataclass
class Turn:
    """One assistant reply."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    stop_reason: FinishReason = "end_turn"
    usage: Usage = field(default_factory=Usage)
    model: str = ""

    def as_message(self) -> Message:
        return Message(role="assistant", content=self.text, tool_calls=list(self.tool_calls))


@dataclass
class Request:
    """Everything a provider needs for one call.

    `agent` and `group` say who is asking; real providers ignore them, the scripted provider
    uses them to pick the script for that agent or task group.
    """

    system: str
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    max_tokens: int = 8192
    temperature: float | None = None
    agent: str = ""
    group: str = ""


@runtime_checkable
class Provider(Protocol):
    """A model backend. `complete` raises only `agentrun.providers.errors.ProviderError`s."""

    name: str
    model: str

    def complete(self, request: Request) -> Turn: ...
