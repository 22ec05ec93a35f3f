"""One model call through an SDK adapter, answered in memory: what the worker pool's server
does once so that no worker's first call does it (agentrun/preload_clients.py).

The call builds what the SDKs make lazily: the process's TLS context (the CA bundle, shared by
every later client: providers/http.py), the pydantic schemas of a reply's types, the SDK's
tracing helpers. No socket is opened and no key is involved.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from agentrun.providers.base import Message, Provider, Request, ToolSpec
from agentrun.providers.http import http_library, memory_transport, tls_context

READ_FILE = ToolSpec("read_file", "Read a file.", {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
ANTHROPIC_REPLY = {
    "id": "msg_warm_up", "type": "message", "role": "assistant", "model": "warm-up",
    "content": [{"type": "text", "text": "ok"},
                {"type": "tool_use", "id": "toolu_warm_up", "name": "read_file",
                 "input": {"path": "README.md"}}],
    "stop_reason": "tool_use", "stop_sequence": None,
    "usage": {"input_tokens": 1, "output_tokens": 1},
}
OPENAI_REPLY = {
    "id": "chatcmpl-warm-up", "object": "chat.completion", "created": 0, "model": "warm-up",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": "ok",
        "tool_calls": [{"id": "call_warm_up", "type": "function", "function": {
            "name": "read_file", "arguments": '{"path": "README.md"}'}}]}}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}


def _anthropic(transport: Any) -> Provider:
    from agentrun.providers.anthropic_provider import AnthropicProvider

    return AnthropicProvider("warm-up", api_key="warm-up", http_transport=transport, env={})


def _openai(transport: Any) -> Provider:
    from agentrun.providers.openai_provider import OpenAIProvider

    return OpenAIProvider("warm-up", api_key="warm-up", http_transport=transport, env={})


# by SDK: its reply to the call, and its adapter answering through a transport
ADAPTERS: dict[str, tuple[dict[str, Any], Callable[[Any], Provider]]] = {
    "anthropic": (ANTHROPIC_REPLY, _anthropic),
    "openai": (OPENAI_REPLY, _openai),
}


def warm_up(sdk_name: str) -> bool:
    """One call through `sdk_name`'s adapter, answered in memory, and the process's TLS context
    made; False if anything was missing (nothing is then inherited; the workers make their
    own, as without a warm-up)."""
    sdk = sys.modules.get(sdk_name)
    reply, make = ADAPTERS[sdk_name]
    library = http_library(sdk) if sdk else None
    transport = memory_transport(sdk, reply) if sdk else None
    if library is None or transport is None:
        return False
    tls_context(library)  # the call itself goes through `transport`, not TLS
    request = Request(system="warm-up", messages=[Message("user", "warm-up")],
                      tools=[READ_FILE], max_tokens=16)
    return bool(make(transport).complete(request).tool_calls)
