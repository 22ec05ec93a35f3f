"""OpenAI Chat Completions adapter over the official SDK; also any OpenAI-compatible server
(Ollama, vLLM, LM Studio) through `OPENAI_BASE_URL`.

The SDK is imported on the first call. It makes one request per call: its own retries are off,
and agent/modelcall.py decides whether and when to try again.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from typing import Any

from agentrun.core.secrets import public_url, url_secrets
from agentrun.core.usage import Usage
from agentrun.providers.base import Message, Request, ToolCall, Turn
from agentrun.providers.errors import MalformedResponse, NotConfigured
from agentrun.providers.http import http_client
from agentrun.providers.sdk_errors import ErrorContext, classify, invalid_response
from agentrun.providers.tokens import estimate_request, estimate_tokens
from agentrun.providers.urls import sdk_endpoint

KEY_VAR = "OPENAI_API_KEY"
BASE_URL_VAR = "OPENAI_BASE_URL"
PLACEHOLDER_KEY = "not-needed"  # local servers ignore the key, but the SDK insists on one
_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use",
         "length": "max_tokens", "content_filter": "refusal"}


class OpenAIProvider:
    """Implements `Provider` with `client.chat.completions.create`."""

    name = "openai"

    def __init__(self, model: str, *, api_key: str | None = None, base_url: str | None = None,
                 timeout: float = 600.0, env: Mapping[str, str] | None = None,
                 http_transport: Any = None) -> None:
        env = os.environ if env is None else env
        self.base_url = base_url or env.get(BASE_URL_VAR) or None
        key = api_key or env.get(KEY_VAR) or (PLACEHOLDER_KEY if self.base_url else None)
        if not key:
            raise NotConfigured(f"{KEY_VAR} is not set",
                                f"Export {KEY_VAR}=..., or {BASE_URL_VAR}=http://... for an "
                                f"OpenAI-compatible server (Ollama, vLLM, LM Studio).")
        self.model = model
        self.timeout = timeout
        self._api_key = key
        self._transport = http_transport  # answers instead of the network (providers/http.py)
        self._client: Any = None
        self._sdk: Any = None
        self._lock = threading.Lock()
        secrets = ((() if key == PLACEHOLDER_KEY else (key,))
                   + tuple(url_secrets(self.base_url or "")))
        self._ctx = ErrorContext("openai", model, KEY_VAR, BASE_URL_VAR, self.base_url,
                                 secrets)

    def __repr__(self) -> str:  # never show the key
        shown = public_url(self.base_url) if self.base_url else None
        return f"OpenAIProvider(model={self.model!r}, base_url={shown!r})"

    @property
    def official_api(self) -> bool:
        """True for api.openai.com, which wants `max_completion_tokens` (o-series, gpt-5)."""
        return self.base_url is None or "api.openai.com" in self.base_url

    def _ensure_client(self) -> Any:
        with self._lock:
            if self._client is None:
                import openai

                self._sdk = openai
                http = http_client(openai, self._transport)
                self._client = openai.OpenAI(
                    api_key=self._api_key, **sdk_endpoint(self.base_url),
                    max_retries=0, timeout=self.timeout,  # retries: agent/modelcall.py
                    **({} if http is None else {"http_client": http}))
            return self._client

    def complete(self, request: Request) -> Turn:
        client = self._ensure_client()
        params = build_params(self.model, request, official_api=self.official_api)
        try:
            raw = client.chat.completions.with_raw_response.create(**params)
        except (json.JSONDecodeError, self._sdk.OpenAIError) as exc:
            raise classify(exc, self._sdk, self._ctx) from exc
        try:
            response = raw.parse()
        except (ValueError, self._sdk.APIResponseValidationError) as exc:
            raise invalid_response(self._ctx, raw.status_code,
                                   raw.http_response.content) from exc
        return parse_response(response, self.model, request)


def build_params(model: str, request: Request, *, official_api: bool = True) -> dict[str, Any]:
    """`chat.completions.create` keyword arguments for a neutral request.

    The official API wants `max_completion_tokens` (its reasoning models reject `max_tokens`);
    compatible servers know `max_tokens`.
    """
    params: dict[str, Any] = {"model": model,
                              "messages": translate_messages(request.system, request.messages)}
    params["max_completion_tokens" if official_api else "max_tokens"] = request.max_tokens
    if request.tools:
        params["tools"] = [{"type": "function",
                            "function": {"name": t.name, "description": t.description,
                                         "parameters": t.parameters}}
                           for t in request.tools]
    if request.temperature is not None:
        params["temperature"] = request.temperature
    return params


def translate_messages(system: str, messages: list[Message]) -> list[dict[str, Any]]:
    """Neutral messages → chat messages (`role: tool` answers each assistant tool call).

    Chat has no error flag on tool results, so a failed tool's output is marked in the text.
    """
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for msg in messages:
        if msg.role == "user":
            out.append({"role": "user", "content": msg.content})
        elif msg.role == "tool":
            content = msg.content or "(no output)"
            if msg.is_error and not content.lower().startswith("error"):
                content = f"ERROR: {content}"
            out.append({"role": "tool", "tool_call_id": msg.tool_call_id or "",
                        "content": content})
        else:
            entry: dict[str, Any] = {"role": "assistant", "content": msg.content or None}
            if msg.tool_calls:
                entry["tool_calls"] = [
                    {"id": c.id, "type": "function",
                     "function": {"name": c.name, "arguments": json.dumps(c.arguments or {})}}
                    for c in msg.tool_calls]
            elif not msg.content:
                entry["content"] = ""
            out.append(entry)
    return out


def parse_arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    """Tool call arguments (a JSON string) → (arguments, error); never raises."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, None
    if isinstance(raw, dict):
        return raw, None
    try:
        value = json.loads(raw)
    except (TypeError, ValueError) as exc:
        shown = raw if len(str(raw)) <= 200 else str(raw)[:200] + "..."
        return {}, f"arguments are not valid JSON ({exc}): {shown}"
    if not isinstance(value, dict):
        return {}, f"arguments must be a JSON object, got {type(value).__name__}"
    return value, None


def parse_response(response: Any, model: str, request: Request | None = None) -> Turn:
    """An SDK `ChatCompletion` → `Turn`; a response without choices is malformed."""
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise MalformedResponse("openai returned a response without `choices`",
                                "Check that OPENAI_BASE_URL points at an OpenAI-compatible API.")
    choice = choices[0]
    message = getattr(choice, "message", None)
    if message is None:
        raise MalformedResponse("openai returned a choice without `message`",
                                "Check that OPENAI_BASE_URL points at an OpenAI-compatible API.")
    calls: list[ToolCall] = []
    for i, tc in enumerate(getattr(message, "tool_calls", None) or [], 1):
        fn = getattr(tc, "function", None)
        name = getattr(fn, "name", None) or ""
        args, error = parse_arguments(getattr(fn, "arguments", None))
        calls.append(ToolCall(id=getattr(tc, "id", None) or f"call_{i}", name=name,
                              arguments=args, arguments_error=error))
    text = getattr(message, "content", None) or ""
    finish = getattr(choice, "finish_reason", None) or ""
    stop = _STOP.get(finish, "other")
    if calls and stop not in ("max_tokens", "refusal"):
        stop = "tool_use"  # some compatible servers say "stop" alongside tool calls
    text = text if isinstance(text, str) else str(text)
    refusal = getattr(message, "refusal", None)
    if isinstance(refusal, str) and refusal.strip():  # the model declined, in its own words
        stop, text = "refusal", refusal
    # `stop` is one of the Literal's values (_STOP's, or set above): its dict types it as str
    return Turn(text=text, tool_calls=calls, stop_reason=stop,  # type: ignore[arg-type]
                usage=_usage(getattr(response, "usage", None), model, text, calls, request),
                model=getattr(response, "model", None) or model)


def _usage(usage: Any, model: str, text: str, calls: list[ToolCall],
           request: Request | None) -> Usage:
    if usage is None:
        # Some compatible servers omit usage; estimate so budgets still apply.
        return _estimated_usage(model, text, calls, request)
    prompt = _int(getattr(usage, "prompt_tokens", 0))
    details = getattr(usage, "prompt_tokens_details", None)
    cached = _int(getattr(details, "cached_tokens", 0)) if details is not None else 0
    return Usage(input_tokens=max(0, prompt - cached),
                 output_tokens=_int(getattr(usage, "completion_tokens", 0)),
                 cache_read_tokens=cached)


def _estimated_usage(model: str, text: str, calls: list[ToolCall],
                     request: Request | None) -> Usage:
    out = text + "".join(c.name + json.dumps(c.arguments) for c in calls)
    prompt = estimate_request(request, model).tokens if request is not None else 0
    return Usage(input_tokens=prompt, output_tokens=estimate_tokens(out, model).tokens)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
