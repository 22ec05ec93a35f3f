"""Anthropic Messages API adapter (tool use, prompt caching) over the official SDK.

The SDK is imported on the first call, not at import time (it costs ~1.2 s of CPU). It makes
one request per call: its own retries are off (it would sleep whatever `retry-after` says), and
agent/modelcall.py decides whether and when to try again.
"""

from __future__ import annotations

import copy
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from agentrun.core.secrets import public_url, url_secrets
from agentrun.core.usage import Usage
from agentrun.providers.base import Message, Request, ToolCall, Turn
from agentrun.providers.errors import MalformedResponse, NotConfigured
from agentrun.providers.http import http_client
from agentrun.providers.sdk_errors import ErrorContext, classify, invalid_response
from agentrun.providers.urls import sdk_endpoint

KEY_VAR = "ANTHROPIC_API_KEY"
BASE_URL_VAR = "ANTHROPIC_BASE_URL"
_EPHEMERAL = {"type": "ephemeral"}
_STOP = {"end_turn": "end_turn", "stop_sequence": "end_turn", "tool_use": "tool_use",
         "max_tokens": "max_tokens", "refusal": "refusal"}
_THINKING_TYPES = ("thinking", "redacted_thinking")
_REMEMBERED_TURNS = 256

# Given an assistant message, the exact blocks to send for it (or None to translate it).
BlockSource = Callable[[Message], "list[dict[str, Any]] | None"]


class AnthropicProvider:
    """Implements `Provider` with `client.messages.create`.

    Models that think return `thinking` blocks, which the API requires back, unchanged, in the
    assistant turn that made the tool calls. The neutral `Message` has no room for them, so the
    provider remembers each tool-calling turn's blocks by its tool call ids and sends them back
    verbatim when that turn reappears in a later request.
    """

    name = "anthropic"

    def __init__(self, model: str, *, api_key: str | None = None, base_url: str | None = None,
                 timeout: float = 600.0, env: Mapping[str, str] | None = None,
                 http_transport: Any = None) -> None:
        env = os.environ if env is None else env
        key = api_key or env.get(KEY_VAR)
        if not key:
            raise NotConfigured(f"{KEY_VAR} is not set",
                                f"Export {KEY_VAR}=... to use the anthropic provider.")
        self.model = model
        self.base_url = base_url or env.get(BASE_URL_VAR) or None
        self.timeout = timeout
        self._api_key = key
        self._transport = http_transport  # answers instead of the network (providers/http.py)
        self._client: Any = None
        self._sdk: Any = None
        self._lock = threading.Lock()
        self._turn_blocks: OrderedDict[tuple[str, ...], list[dict[str, Any]]] = OrderedDict()
        self._ctx = ErrorContext("anthropic", model, KEY_VAR, BASE_URL_VAR, self.base_url,
                                 (key, *url_secrets(self.base_url or "")))

    def __repr__(self) -> str:  # never show the key
        shown = public_url(self.base_url) if self.base_url else None
        return f"AnthropicProvider(model={self.model!r}, base_url={shown!r})"

    def _ensure_client(self) -> Any:
        with self._lock:
            if self._client is None:
                import anthropic

                self._sdk = anthropic
                http = http_client(anthropic, self._transport)
                self._client = anthropic.Anthropic(
                    api_key=self._api_key, **sdk_endpoint(self.base_url),
                    max_retries=0, timeout=self.timeout,  # retries: agent/modelcall.py
                    **({} if http is None else {"http_client": http}))
            return self._client

    def complete(self, request: Request) -> Turn:
        client = self._ensure_client()
        params = build_params(self.model, request, self._remembered_blocks)
        try:
            raw = client.messages.with_raw_response.create(**params)
        except (json.JSONDecodeError, self._sdk.AnthropicError) as exc:
            raise classify(exc, self._sdk, self._ctx) from exc
        try:
            response = raw.parse()
        except (ValueError, self._sdk.APIResponseValidationError) as exc:
            raise invalid_response(self._ctx, raw.status_code,
                                   raw.http_response.content) from exc
        turn = parse_response(response, self.model)
        self._remember(turn, response)
        return turn

    def _remember(self, turn: Turn, response: Any) -> None:
        """Keep the raw blocks of a tool-calling turn that contains thinking."""
        if not turn.tool_calls:
            return
        blocks = raw_blocks(response.content)
        if not any(b["type"] in _THINKING_TYPES for b in blocks):
            return
        with self._lock:
            self._turn_blocks[tuple(c.id for c in turn.tool_calls)] = blocks
            while len(self._turn_blocks) > _REMEMBERED_TURNS:
                self._turn_blocks.popitem(last=False)

    def _remembered_blocks(self, msg: Message) -> list[dict[str, Any]] | None:
        key = tuple(c.id for c in msg.tool_calls)
        with self._lock:
            blocks = self._turn_blocks.get(key) if key else None
        if blocks is None:
            return None
        text = "\n".join(b["text"] for b in blocks if b["type"] == "text" and b["text"])
        if text != msg.content:
            return None  # the loop rewrote this turn; send what it says now
        return copy.deepcopy(blocks)


def build_params(model: str, request: Request,
                 blocks_for: BlockSource | None = None) -> dict[str, Any]:
    """The `messages.create` keyword arguments for a neutral request.

    Cache breakpoints (3 of the 4 allowed): the system prompt, the last tool definition and the
    last block of the latest message, so each step of a loop re-reads the prefix from cache.
    """
    params: dict[str, Any] = {"model": model, "max_tokens": request.max_tokens,
                              "messages": translate_messages(request.messages, blocks_for)}
    if request.system:
        params["system"] = [{"type": "text", "text": request.system,
                             "cache_control": dict(_EPHEMERAL)}]
    if request.tools:
        tools = [{"name": t.name, "description": t.description, "input_schema": t.parameters}
                 for t in request.tools]
        tools[-1]["cache_control"] = dict(_EPHEMERAL)
        params["tools"] = tools
    if request.temperature is not None:
        params["temperature"] = request.temperature
    last = params["messages"][-1]["content"][-1] if params["messages"] else None
    if last is not None and last["type"] not in _THINKING_TYPES:
        last["cache_control"] = dict(_EPHEMERAL)
    return params


def translate_messages(messages: list[Message],
                       blocks_for: BlockSource | None = None) -> list[dict[str, Any]]:
    """Neutral messages → Anthropic turns.

    Consecutive user-side entries (tool results and user text) become one user message whose
    `tool_result` blocks come first, as the API requires; assistant tool calls become
    `tool_use` blocks.
    """
    out: list[dict[str, Any]] = []
    pending_results: list[dict[str, Any]] = []
    pending_text: list[dict[str, Any]] = []

    def flush_user() -> None:
        if pending_results or pending_text:
            out.append({"role": "user", "content": pending_results + pending_text})
            pending_results.clear()
            pending_text.clear()

    for msg in messages:
        if msg.role == "tool":
            pending_results.append({"type": "tool_result", "tool_use_id": msg.tool_call_id or "",
                                    "content": _said(msg.content) or "(no output)",
                                    "is_error": bool(msg.is_error)})
        elif msg.role == "user":
            pending_text.append({"type": "text", "text": _said(msg.content) or "(empty)"})
        else:
            blocks: list[dict[str, Any]] = (blocks_for(msg) if blocks_for else None) or []
            if blocks:
                flush_user()
                out.append({"role": "assistant", "content": blocks})
                continue
            if _said(msg.content):
                blocks.append({"type": "text", "text": msg.content})
            for call in msg.tool_calls:
                blocks.append({"type": "tool_use", "id": call.id, "name": call.name,
                               "input": call.arguments or {}})
            if not blocks:
                continue  # the API rejects empty assistant content; nothing was said
            flush_user()
            out.append({"role": "assistant", "content": blocks})
    flush_user()
    return out


def parse_response(response: Any, model: str) -> Turn:
    """An SDK `Message` → `Turn`; a response without content or usage is malformed."""
    content = getattr(response, "content", None)
    usage = getattr(response, "usage", None)
    if not isinstance(content, list) or usage is None:
        raise MalformedResponse("anthropic returned a response without `content` or `usage`",
                                "Check that ANTHROPIC_BASE_URL points at an Anthropic API.")
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in content:
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(getattr(block, "text", "") or "")
        elif kind == "tool_use":
            args = getattr(block, "input", None)
            if isinstance(args, dict):
                calls.append(ToolCall(id=block.id, name=block.name, arguments=args))
            else:
                calls.append(ToolCall(id=block.id, name=block.name, arguments={},
                                      arguments_error="tool input is not a JSON object"))
    stop = _STOP.get(getattr(response, "stop_reason", None) or "", "other")
    if calls and stop == "other":
        stop = "tool_use"
    return Turn(
        text="\n".join(t for t in texts if _said(t)),
        tool_calls=calls,
        # one of the Literal's values (_STOP's, or set above): its dict types it as str
        stop_reason=stop,  # type: ignore[arg-type]
        usage=Usage(input_tokens=_int(getattr(usage, "input_tokens", 0)),
                    output_tokens=_int(getattr(usage, "output_tokens", 0)),
                    cache_read_tokens=_int(getattr(usage, "cache_read_input_tokens", 0)),
                    cache_write_tokens=_int(getattr(usage, "cache_creation_input_tokens", 0))),
        model=getattr(response, "model", None) or model,
    )


def _said(text: str | None) -> str:
    """`text`, or "" when it holds only whitespace: the API refuses such text blocks, and a
    model's "\\n\\n" before a tool call says nothing."""
    return text if text and text.strip() else ""


def raw_blocks(content: list[Any]) -> list[dict[str, Any]]:
    """Response blocks as request blocks, thinking signatures included, in their order."""
    out: list[dict[str, Any]] = []
    for block in content:
        kind = getattr(block, "type", None)
        if kind == "thinking":
            out.append({"type": "thinking", "thinking": getattr(block, "thinking", ""),
                        "signature": getattr(block, "signature", "")})
        elif kind == "redacted_thinking":
            out.append({"type": "redacted_thinking", "data": getattr(block, "data", "")})
        elif kind == "text" and _said(getattr(block, "text", "")):
            out.append({"type": "text", "text": block.text})
        elif kind == "tool_use":
            args = getattr(block, "input", None)
            out.append({"type": "tool_use", "id": block.id, "name": block.name,
                        "input": args if isinstance(args, dict) else {}})
    return out


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
