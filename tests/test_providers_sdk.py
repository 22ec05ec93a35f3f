"""The anthropic and openai adapters, through the real SDKs, against the fake model server."""

from __future__ import annotations

import ast
import email.utils
import json
import socket
import time
from pathlib import Path

import pytest
from fake_model_server import Error, Raw, Reply, openai_completion_json

from agentrun.providers.anthropic_provider import AnthropicProvider
from agentrun.providers.base import Message, Provider, Request, ToolSpec, Turn
from agentrun.providers.errors import (
    AuthenticationFailed,
    BadRequest,
    ConnectionFailed,
    MalformedResponse,
    ModelTimeout,
    NotConfigured,
    Overloaded,
    RateLimited,
    ServerError,
)
from agentrun.providers.openai_provider import OpenAIProvider
from agentrun.providers.scripted import ScriptedProvider
from agentrun.providers.tokens import estimate_request, estimate_tokens

ANTHROPIC_KEY = "sk-ant-test-SECRET-0123456789"
OPENAI_KEY = "sk-proj-test-SECRET-9876543210"
KEYS = {"anthropic": ANTHROPIC_KEY, "openai": OPENAI_KEY}
FAST_RETRY = {"retry-after": "0.01"}

TOOLS = [
    ToolSpec("read_file", "Read a file in the worktree.",
             {"type": "object", "properties": {"path": {"type": "string"}},
              "required": ["path"]}),
    ToolSpec("write_file", "Write a file in the worktree.",
             {"type": "object", "properties": {"path": {"type": "string"},
                                               "content": {"type": "string"}},
              "required": ["path", "content"]}),
]
FILES = {"a.txt": "hello from a"}


def make(kind: str, server, *, timeout: float = 10.0, model: str | None = None) -> Provider:
    if kind == "anthropic":
        return AnthropicProvider(model or "claude-sonnet-4-6", api_key=ANTHROPIC_KEY,
                                 base_url=server.anthropic_base_url, timeout=timeout, env={})
    if kind == "openai":
        return OpenAIProvider(model or "gpt-4.1", api_key=OPENAI_KEY,
                              base_url=server.openai_base_url, timeout=timeout, env={})
    raise AssertionError(kind)


def run_tool(name: str, args: dict) -> tuple[str, bool]:
    if name == "read_file":
        path = args.get("path", "")
        if path in FILES:
            return FILES[path], False
        return f"error: no such file {path}", True
    return f"error: unknown tool {name}", True


def run_loop(provider: Provider, task: str, max_steps: int = 5) -> tuple[list[Turn], Request]:
    """A minimal agent loop: call, run the requested tools, answer each call, repeat."""
    request = Request(system="You are a careful engineer.", messages=[Message("user", task)],
                      tools=TOOLS, max_tokens=1024, group="G1")
    turns = []
    for _ in range(max_steps):
        turn = provider.complete(request)
        turns.append(turn)
        request.messages.append(turn.as_message())
        if not turn.tool_calls:
            break
        for call in turn.tool_calls:
            output, is_error = run_tool(call.name, call.arguments)
            request.messages.append(Message("tool", output, tool_call_id=call.id,
                                            name=call.name, is_error=is_error))
    return turns, request


CONVERSATION = [
    {"text": "I'll read both files.",
     "tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}},
                    {"name": "read_file", "arguments": {"path": "missing.txt"}}],
     "usage": {"input_tokens": 500, "output_tokens": 40, "cache_write_tokens": 0,
               "cache_read_tokens": 0}},
    {"text": "a.txt says hello; missing.txt does not exist.",
     "usage": {"input_tokens": 60, "output_tokens": 12, "cache_read_tokens": 500,
               "cache_write_tokens": 0}},
]


@pytest.mark.parametrize("kind", ["scripted", "anthropic", "openai"])
def test_same_tool_conversation_on_every_provider(kind, fake_model_server):
    if kind == "scripted":
        provider: Provider = ScriptedProvider({"groups": {"G1": CONVERSATION}})
    else:
        fake_model_server.queue(*(Reply(text=t["text"], tool_calls=t.get("tool_calls", []),
                                        usage=t["usage"]) for t in CONVERSATION))
        provider = make(kind, fake_model_server)
    turns, request = run_loop(provider, "Summarise a.txt and missing.txt")

    assert [t.stop_reason for t in turns] == ["tool_use", "end_turn"]
    first, final = turns
    assert first.text == "I'll read both files."
    assert [(c.name, c.arguments) for c in first.tool_calls] == [
        ("read_file", {"path": "a.txt"}), ("read_file", {"path": "missing.txt"})]
    assert len({c.id for c in first.tool_calls}) == 2
    assert final.text == "a.txt says hello; missing.txt does not exist."
    assert final.tool_calls == []
    if kind != "scripted":
        assert final.usage.input_tokens == 60 and final.usage.cache_read_tokens == 500
        assert len(fake_model_server.requests) == 2
    # user, assistant(2 calls), tool, tool, assistant
    assert [m.role for m in request.messages] == ["user", "assistant", "tool", "tool",
                                                  "assistant"]


# -- anthropic wire format --------------------------------------------------------------------

def test_anthropic_tool_results_paired_and_cache_breakpoints(fake_model_server):
    fake_model_server.queue(*(Reply(text=t["text"], tool_calls=t.get("tool_calls", []),
                                    usage=t["usage"]) for t in CONVERSATION))
    turns, _ = run_loop(make("anthropic", fake_model_server), "Summarise")
    ids = [c.id for c in turns[0].tool_calls]
    first, second = fake_model_server.bodies("anthropic")

    assert first["model"] == "claude-sonnet-4-6" and first["max_tokens"] == 1024
    assert first["system"] == [{"type": "text", "text": "You are a careful engineer.",
                                "cache_control": {"type": "ephemeral"}}]
    assert [t["name"] for t in first["tools"]] == ["read_file", "write_file"]
    assert first["tools"][0]["input_schema"]["required"] == ["path"]
    assert "cache_control" not in first["tools"][0]
    assert first["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert first["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "Summarise", "cache_control": {"type": "ephemeral"}}]}]

    user, assistant, results = second["messages"]
    assert "cache_control" not in user["content"][-1]  # only the latest message carries one
    assert assistant["role"] == "assistant"
    assert assistant["content"][0] == {"type": "text", "text": "I'll read both files."}
    assert [(b["type"], b["id"], b["input"]) for b in assistant["content"][1:]] == [
        ("tool_use", ids[0], {"path": "a.txt"}), ("tool_use", ids[1], {"path": "missing.txt"})]
    assert results["role"] == "user"
    assert [(b["type"], b["tool_use_id"], b["is_error"]) for b in results["content"]] == [
        ("tool_result", ids[0], False), ("tool_result", ids[1], True)]
    assert results["content"][0]["content"] == "hello from a"
    assert results["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert json.dumps(second).count("cache_control") <= 4


def test_anthropic_user_text_after_tool_results_joins_the_same_message(fake_model_server):
    fake_model_server.queue(Reply(text="ok"))
    provider = make("anthropic", fake_model_server)
    from agentrun.providers.base import ToolCall

    provider.complete(Request(system="", messages=[
        Message("user", "go"),
        Message("assistant", "", tool_calls=[ToolCall("t1", "read_file", {"path": "a"})]),
        Message("tool", "", tool_call_id="t1", name="read_file"),
        Message("user", "Budget warning: 10% left."),
    ]))
    [body] = fake_model_server.bodies()
    assert "system" not in body and "tools" not in body
    last = body["messages"][-1]
    assert [b["type"] for b in last["content"]] == ["tool_result", "text"]
    assert last["content"][0]["content"] == "(no output)"
    assert body["messages"][1]["content"] == [
        {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a"}}]


def test_anthropic_usage_and_stop_reason_mapping(fake_model_server):
    fake_model_server.queue(Reply(text="partial", stop_reason="max_tokens",
                                  usage={"input_tokens": 12, "output_tokens": 1024,
                                         "cache_read_tokens": 3000, "cache_write_tokens": 450}))
    turn = make("anthropic", fake_model_server).complete(
        Request(system="s", messages=[Message("user", "x")]))
    assert turn.stop_reason == "max_tokens"
    assert turn.usage.to_dict() == {"input_tokens": 12, "output_tokens": 1024,
                                    "cache_read_tokens": 3000, "cache_write_tokens": 450}
    assert turn.model == "claude-sonnet-4-6"


def test_anthropic_thinking_blocks_go_back_verbatim_with_their_tool_calls(fake_model_server):
    fake_model_server.queue(
        Reply(thinking="I should look at a.txt first.", text="Reading.",
              tool_calls=[{"name": "read_file", "arguments": {"path": "a.txt"}}]),
        Reply(thinking="Now answer.", text="It says hello."),
    )
    turns, _ = run_loop(make("anthropic", fake_model_server), "What does a.txt say?")
    assert turns[0].text == "Reading." and turns[-1].text == "It says hello."
    second = fake_model_server.bodies()[1]
    assistant = second["messages"][1]
    assert assistant["content"] == [
        {"type": "thinking", "thinking": "I should look at a.txt first.", "signature": "sig-msg_1"},
        {"type": "text", "text": "Reading."},
        {"type": "tool_use", "id": turns[0].tool_calls[0].id, "name": "read_file",
         "input": {"path": "a.txt"}},
    ]
    assert second["messages"][2]["content"][0]["type"] == "tool_result"


def test_anthropic_rewritten_turn_is_sent_as_rewritten(fake_model_server):
    fake_model_server.queue(
        Reply(thinking="hmm", text="Reading.",
              tool_calls=[{"name": "read_file", "arguments": {"path": "a.txt"}}]),
        Reply(text="done"),
    )
    provider = make("anthropic", fake_model_server)
    request = Request(system="", messages=[Message("user", "go")])
    turn = provider.complete(request)
    rewritten = turn.as_message()
    rewritten.content = "(summarised)"
    request.messages += [rewritten, Message("tool", "x", tool_call_id=turn.tool_calls[0].id)]
    provider.complete(request)
    blocks = fake_model_server.bodies()[1]["messages"][1]["content"]
    assert [b["type"] for b in blocks] == ["text", "tool_use"]
    assert blocks[0]["text"] == "(summarised)"


# -- openai wire format -----------------------------------------------------------------------

def test_openai_tool_messages_paired(fake_model_server):
    fake_model_server.queue(*(Reply(text=t["text"], tool_calls=t.get("tool_calls", []),
                                    usage=t["usage"]) for t in CONVERSATION))
    turns, _ = run_loop(make("openai", fake_model_server), "Summarise")
    ids = [c.id for c in turns[0].tool_calls]
    first, second = fake_model_server.bodies("openai")

    assert first["messages"] == [{"role": "system", "content": "You are a careful engineer."},
                                 {"role": "user", "content": "Summarise"}]
    assert first["tools"][0] == {"type": "function", "function": {
        "name": "read_file", "description": "Read a file in the worktree.",
        "parameters": TOOLS[0].parameters}}
    # a compatible server (base URL set) gets max_tokens, not max_completion_tokens
    assert first["max_tokens"] == 1024 and "max_completion_tokens" not in first

    assistant, tool1, tool2 = second["messages"][2:]
    assert assistant["role"] == "assistant" and assistant["content"] == "I'll read both files."
    assert [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in assistant["tool_calls"]] == [(ids[0], "read_file", {"path": "a.txt"}),
                                                  (ids[1], "read_file", {"path": "missing.txt"})]
    assert tool1 == {"role": "tool", "tool_call_id": ids[0], "content": "hello from a"}
    assert tool2["tool_call_id"] == ids[1] and tool2["content"].startswith("error: no such")


def test_openai_usage_subtracts_cached_tokens(fake_model_server):
    fake_model_server.queue(
        Reply(text="a", usage={"input_tokens": 200, "cache_read_tokens": 800,
                               "output_tokens": 9}),
        Reply(text="b", usage={"input_tokens": 300, "output_tokens": 4}, cached_details=False),
    )
    provider = make("openai", fake_model_server)
    req = Request(system="", messages=[Message("user", "x")])
    first = provider.complete(req)
    sent = fake_model_server.requests  # the wire said prompt_tokens=1000, cached_tokens=800
    assert sent and first.usage.to_dict() == {"input_tokens": 200, "output_tokens": 9,
                                              "cache_read_tokens": 800, "cache_write_tokens": 0}
    second = provider.complete(req)
    assert second.usage.to_dict() == {"input_tokens": 300, "output_tokens": 4,
                                      "cache_read_tokens": 0, "cache_write_tokens": 0}


def test_openai_missing_usage_is_estimated_from_the_whole_request(fake_model_server):
    body = openai_completion_json("done")
    del body["usage"]  # some OpenAI-compatible servers send none
    fake_model_server.queue(Raw(json.dumps(body).encode()))
    req = Request(system="s", messages=[Message("user", "x")], tools=TOOLS)
    turn = make("openai", fake_model_server).complete(req)
    without_tools = estimate_request(Request(system="s", messages=req.messages), "gpt-4.1")
    assert turn.usage.input_tokens == estimate_request(req, "gpt-4.1").tokens
    assert turn.usage.input_tokens > without_tools.tokens  # tool schemas are read too
    assert turn.usage.output_tokens == estimate_tokens("done", "gpt-4.1").tokens > 0


def test_openai_invalid_tool_argument_json_sets_arguments_error(fake_model_server):
    fake_model_server.queue(Reply(tool_calls=[
        {"name": "write_file", "arguments_json": '{"path": "a.py", "content": "unterminated'},
        {"name": "read_file", "arguments_json": "[1, 2]"},
        {"name": "read_file", "arguments": {"path": "ok.txt"}},
        {"name": "check_token_budget", "arguments_json": ""},
    ]))
    turn = make("openai", fake_model_server).complete(
        Request(system="", messages=[Message("user", "x")], tools=TOOLS))
    bad, not_object, good, empty = turn.tool_calls
    assert turn.stop_reason == "tool_use"
    assert bad.arguments == {} and "not valid JSON" in bad.arguments_error
    assert not_object.arguments == {} and "JSON object" in not_object.arguments_error
    assert good.arguments == {"path": "ok.txt"} and good.arguments_error is None
    assert empty.arguments == {} and empty.arguments_error is None


def test_openai_tool_calls_with_finish_reason_stop_count_as_tool_use(fake_model_server):
    fake_model_server.queue(Reply(tool_calls=[{"name": "read_file", "arguments": {"path": "a"}}],
                                  stop_reason="end_turn"))
    turn = make("openai", fake_model_server).complete(
        Request(system="", messages=[Message("user", "x")]))
    assert turn.stop_reason == "tool_use" and turn.text == ""


def test_openai_error_tool_result_is_marked_and_length_maps_to_max_tokens(fake_model_server):
    from agentrun.providers.base import ToolCall

    fake_model_server.queue(Reply(text="cut", stop_reason="max_tokens"))
    turn = make("openai", fake_model_server).complete(Request(system="", messages=[
        Message("user", "go"),
        Message("assistant", "", tool_calls=[ToolCall("c1", "run_command", {"command": "x"})]),
        Message("tool", "exit status 2", tool_call_id="c1", is_error=True),
    ]))
    assert turn.stop_reason == "max_tokens"
    body = fake_model_server.bodies()[0]
    assert body["messages"][1]["content"] is None
    assert body["messages"][2]["content"] == "ERROR: exit status 2"


def test_openai_base_url_without_key_uses_placeholder(fake_model_server):
    fake_model_server.queue(Reply(text="local"))
    env = {"OPENAI_BASE_URL": fake_model_server.openai_base_url}
    provider = OpenAIProvider("llama3.1", env=env)
    assert provider.complete(Request(system="", messages=[Message("user", "x")])).text == "local"
    assert fake_model_server.requests[0].headers["authorization"] == "Bearer not-needed"


def test_missing_keys_raise_not_configured():
    with pytest.raises(NotConfigured, match="ANTHROPIC_API_KEY"):
        AnthropicProvider("claude-sonnet-4-5", env={})
    with pytest.raises(NotConfigured, match="OPENAI_API_KEY") as info:
        OpenAIProvider("gpt-4o", env={})
    assert "OPENAI_BASE_URL" in info.value.hint


def test_official_openai_api_gets_max_completion_tokens():
    from agentrun.providers.openai_provider import build_params

    params = build_params("o3", Request(system="", messages=[], max_tokens=99))
    assert params["max_completion_tokens"] == 99 and "max_tokens" not in params


# -- errors, both adapters --------------------------------------------------------------------

BOTH = pytest.mark.parametrize("kind", ["anthropic", "openai"])
REQ = Request(system="s", messages=[Message("user", "hi")])


@BOTH
def test_key_is_sent_in_headers_never_in_bodies(kind, fake_model_server):
    fake_model_server.queue(Reply(text="ok"))
    make(kind, fake_model_server).complete(REQ)
    [sent] = fake_model_server.requests
    assert KEYS[kind].encode() not in sent.raw
    assert any(KEYS[kind] in v for v in sent.headers.values())


def test_refusals_and_replies_cut_off_at_the_output_limit_are_named(fake_model_server):
    """Anthropic `stop_reason: refusal` (with or without words), OpenAI `message.refusal` and
    `finish_reason: content_filter`, and a tool call cut off by `length` (its arguments half
    sent)."""
    fake_model_server.queue(Reply(text="I can't help with that.", stop_reason="refusal"),
                            Reply(stop_reason="refusal"),
                            Reply(refusal="I'm sorry, I can't assist with that."),
                            Reply(stop_reason="refusal"),
                            Reply(tool_calls=[{"name": "write_file",
                                               "arguments_json": '{"path": "a.py", "con'}],
                                  stop_reason="max_tokens"))
    anthropic, openai = make("anthropic", fake_model_server), make("openai", fake_model_server)
    turns = [anthropic.complete(REQ), anthropic.complete(REQ),
             *(openai.complete(REQ) for _ in range(3))]
    assert [(t.stop_reason, t.text) for t in turns[:4]] == [
        ("refusal", "I can't help with that."), ("refusal", ""),
        ("refusal", "I'm sorry, I can't assist with that."), ("refusal", "")]
    cut = turns[4]
    assert cut.stop_reason == "max_tokens" and cut.tool_calls[0].arguments_error


@BOTH
def test_the_sdk_never_retries_and_the_wait_asked_for_is_read(kind, fake_model_server):
    """One request per call, whatever the status: agent/modelcall.py alone retries. The wait
    comes from `retry-after` (seconds or an HTTP date) or `retry-after-ms`."""
    later = email.utils.formatdate(time.time() + 3600, usegmt=True)
    fake_model_server.queue(
        Error(429, "slow down", headers={"retry-after": "7"}),
        Error(529, "Overloaded", headers={"retry-after": later}),
        Error(503, "unavailable", headers={"retry-after-ms": "1500"}),
        Error(500, "boom", headers=FAST_RETRY),
        Error(429, "quota spent", headers={"x-should-retry": "false"}))
    provider = make(kind, fake_model_server)
    raised = []
    for _ in range(5):
        with pytest.raises((ServerError, RateLimited)) as info:
            provider.complete(REQ)
        raised.append(info.value)
    assert len(fake_model_server.requests) == 5
    limit, busy, unavailable, boom, spent = raised
    assert type(limit) is RateLimited and limit.retry_after == 7.0 and limit.retryable
    assert limit.message == f"{kind} rate limit (HTTP 429): slow down"
    assert type(busy) is Overloaded and 3590 < busy.retry_after <= 3600
    assert busy.message == f"{kind} is overloaded (HTTP 529): Overloaded"
    assert type(unavailable) is Overloaded and unavailable.retry_after == 1.5
    assert type(boom) is ServerError and boom.retryable and "500" in boom.message
    assert type(spent) is RateLimited and not spent.retryable


def test_only_modelcall_asks_a_provider():
    """Outside the providers (whose wrappers pass a call on), agent/modelcall.py is the one
    module that calls `Provider.complete`: no second layer of retries or waits can grow."""
    package = Path(__file__).resolve().parent.parent / "agentrun"
    callers = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "complete":
                callers.add(path.relative_to(package).as_posix())
    assert "agent/modelcall.py" in callers  # the scan sees the one caller
    assert {c for c in callers if not c.startswith("providers/")} == {"agent/modelcall.py"}


@BOTH
def test_unauthorized_raises_authentication_failed_without_leaking_key(kind, fake_model_server):
    key = KEYS[kind]
    fake_model_server.queue(Error(401, f"invalid x-api-key {key}"))
    with pytest.raises(AuthenticationFailed) as info:
        make(kind, fake_model_server).complete(REQ)
    assert len(fake_model_server.requests) == 1  # not retried
    err = info.value
    assert key not in err.message and key not in (err.hint or "") and key not in str(err)
    assert f"{kind.upper()}_API_KEY" in err.hint
    assert err.exit_code == 3


@BOTH
@pytest.mark.parametrize("status", [400, 404, 422])
def test_rejected_requests_raise_bad_request(kind, status, fake_model_server):
    fake_model_server.queue(Error(status, "model: no such model"))
    with pytest.raises(BadRequest) as info:
        make(kind, fake_model_server).complete(REQ)
    assert "no such model" in info.value.message and not info.value.retryable


@BOTH
@pytest.mark.parametrize("body", [b"{not json", b'{"unexpected": 1}', b"[]"])
def test_malformed_200_body_raises_malformed_response(kind, body, fake_model_server):
    fake_model_server.queue(Raw(body))
    with pytest.raises(MalformedResponse):
        make(kind, fake_model_server).complete(REQ)


@BOTH
def test_connection_refused_raises_connection_failed(kind):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens here now

    class Closed:
        anthropic_base_url = f"http://127.0.0.1:{port}"
        openai_base_url = f"http://127.0.0.1:{port}/v1"

    with pytest.raises(ConnectionFailed) as info:
        make(kind, Closed()).complete(REQ)
    assert f"127.0.0.1:{port}" in info.value.message and info.value.retryable


@BOTH
def test_slow_server_raises_model_timeout(kind, fake_model_server):
    fake_model_server.queue(Reply(text="late", delay_s=1.0))
    with pytest.raises(ModelTimeout):
        make(kind, fake_model_server, timeout=0.2).complete(REQ)


@BOTH
@pytest.mark.parametrize("body", [b"\xff\xfe garbage \x00\x81", b"<html>garbage KEY oops"])
def test_a_garbage_200_body_is_an_invalid_response_with_status_and_first_bytes(
        kind, body, fake_model_server):
    fake_model_server.queue(Raw(body.replace(b"KEY", KEYS[kind].encode())))
    with pytest.raises(MalformedResponse) as info:
        make(kind, fake_model_server).complete(REQ)
    message = info.value.message
    assert message.startswith("the model server returned an invalid response (HTTP 200)")
    assert "garbage" in message and KEYS[kind] not in message, message
    assert "Decode" not in message, message
