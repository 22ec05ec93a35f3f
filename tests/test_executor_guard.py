"""The gate of a CLI's model calls (executors/guard.py) judges each call on the tool results it
carries, not only on what the CLI's stream has been read to say so far.

The CLI's stdout and its model calls are two channels, read by two threads: the call that
carries the third identical failure can reach the key proxy before the line that reports it
has been read. Here that order is made on purpose, without load: the executor's own guard,
its own stream reader fed the CLI's stream-json lines by hand, the real key proxy and the fake
model server. A request body is untrusted (whatever holds the proxy's token can send one), so
the bodies a hostile client sends neither break the proxy nor buy the CLI another round.
"""

from __future__ import annotations

import http.client
import json
import time
from pathlib import Path
from typing import Any

from agent_fixtures import make_task
from fake_model_server import FakeModelServer, Reply

from agentrun.agent.budget import TokenTracker
from agentrun.agent.transcript import Transcript
from agentrun.core.status import StopReason
from agentrun.executors import claude_code, codex
from agentrun.executors.base import Attempt, Budget
from agentrun.executors.guard import CliGuard, CliToolResult
from agentrun.executors.headless import Cli, CliExecutor, CliStream
from agentrun.executors.keyproxy import ANTHROPIC, OPENAI, KeyProxy
from agentrun.sandbox.local import LocalSandbox

KEY = "sk-real-key-held-by-the-proxy"
USAGE = {"input_tokens": 100, "output_tokens": 20}
LOOP = "/dev/null/agentrun/loop.txt"
# what the real CLI reports for a Write there (its stream-json `user` event and its request)
ENOTDIR = ("<tool_use_error>Error calling tool (Write): ENOTDIR: not a directory, statx "
           f"'{LOOP}'</tool_use_error>")
STUCK = "stuck: `Write` was called 3 times in a row with the same arguments"


def held(executor: CliExecutor, stream_type: type[CliStream],
         tmp_path: Path) -> tuple[CliGuard, Any, Transcript]:
    """The guard the executor holds an attempt to, and its reader of the CLI's stream."""
    transcript = Transcript()
    attempt = Attempt(text="Create src/alpha.txt", number=1, max_attempts=1, tools=[],
                      budget=Budget(TokenTracker(10**6), time.monotonic(), 60.0),
                      transcript=transcript)
    guard = executor.guard(make_task(tmp_path), attempt)
    stream = stream_type(emit=lambda _e: None, record=transcript.record, group="G1",
                         guard=guard)
    return guard, stream, transcript


def line(event: dict[str, Any]) -> bytes:
    return json.dumps(event).encode() + b"\n"


def write(n: int) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{n}", "name": "Write",
            "input": {"file_path": LOOP, "content": "again\n"}}


def failed(n: int, call: str | None = None) -> dict[str, Any]:
    return {"type": "tool_result", "content": ENOTDIR, "is_error": True,
            "tool_use_id": call or f"toolu_{n}"}


def asked(n: int) -> bytes:
    """The CLI's stream-json line for its model's n-th reply: a Write."""
    return line({"type": "assistant", "session_id": "s", "message": {
        "id": f"msg_{n}", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": [write(n)], "usage": USAGE}})


def answered(*blocks: dict[str, Any]) -> bytes:
    """The CLI's stream-json line for the tool results it gives its model."""
    return line({"type": "user", "session_id": "s",
                 "message": {"role": "user", "content": list(blocks)}})


def conversation(n: int, *extra: dict[str, Any]) -> bytes:
    """The request the CLI sends after its n-th failed Write (its whole conversation, the
    last block marked for caching as the CLI marks it), `extra` blocks after the last."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Create src/alpha.txt"}]
    for i in range(1, n + 1):
        messages += [{"role": "assistant", "content": [write(i)]},
                     {"role": "user", "content": [failed(i)]}]
    messages[-1]["content"] = [*messages[-1]["content"], *extra]
    messages[-1]["content"][-1] = {**messages[-1]["content"][-1],
                                   "cache_control": {"type": "ephemeral"}}
    return json.dumps({"model": "claude-sonnet-4-6", "max_tokens": 10, "stream": False,
                       "tools": [{"name": "Write"}], "messages": messages}).encode()


def post(proxy: KeyProxy, path: str, body: bytes) -> tuple[int, str]:
    """One model call through the proxy, as the CLI makes it; (status, answer)."""
    port = int(proxy.url.rsplit(":", 1)[1])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", path, body=body, headers={
            "x-api-key": proxy.token, "authorization": f"Bearer {proxy.token}",
            "content-type": "application/json"})
        answer = conn.getresponse()
        return answer.status, answer.read().decode("utf-8", "replace")
    finally:
        conn.close()


def claude(server: FakeModelServer, tmp_path: Path) -> claude_code.ClaudeCodeExecutor:
    return claude_code.ClaudeCodeExecutor(
        Cli("claude", "2.1.0"), "claude-sonnet-4-6", LocalSandbox(), key=KEY,
        upstream=server.anthropic_base_url, config_dir=tmp_path / "config")


def ok(_request: Any) -> Reply:
    return Reply(text="ok", usage=USAGE)


def test_the_call_carrying_the_third_identical_failure_is_not_made_before_its_line_is_read(
        tmp_path):
    with FakeModelServer(responder=ok) as server:
        executor = claude(server, tmp_path)
        guard, stream, transcript = held(executor, claude_code._Stream, tmp_path)
        with KeyProxy(executor.upstream, KEY, ANTHROPIC, gate=guard.before_call) as proxy:
            stream.feed(asked(1) + answered(failed(1)) + asked(2) + answered(failed(2)))
            after_two = post(proxy, "/v1/messages?beta=true", conversation(2))
            stream.feed(asked(3))
            # the CLI sends its third failure before agentrun has read the line that says it
            after_three = post(proxy, "/v1/messages?beta=true", conversation(3))
            stream.feed(answered(failed(3)))  # the line, read late
    # the call after two failures went out (the gate judges, it does not refuse blindly)
    assert after_two[0] == 200 and json.loads(after_two[1])["content"][0]["text"] == "ok"
    status, answer = after_three
    assert status == 400, answer
    assert f"agentrun stopped this model call: {STUCK}" in answer and "ENOTDIR" in answer
    assert len(server.requests) == 1  # the fourth call never reached the server
    assert guard.stop == StopReason.CIRCUIT_BREAKER and STUCK in (guard.error or "")
    halted = [e for e in transcript.events if e["type"] == "cli_halted"]
    assert [e["stop_reason"] for e in halted] == ["circuit_breaker"]
    # the stream's report moved the breakers, each failure once: the late line counted once
    assert guard.breakers.failures == 3 and guard.reported == {"toolu_1", "toolu_2",
                                                               "toolu_3"}


def test_a_hostile_body_neither_breaks_the_proxy_nor_resets_the_breakers(tmp_path):
    """Two failures reported, one short of the breaker: bodies that cannot be read are
    forwarded as they were before; a body that says a call succeeded does not undo the
    failures the stream reported (it would have, had the stream said so: the positive
    control), so the third failure still stops the CLI, and nothing goes out after that."""
    forged_success = {"type": "tool_result", "content": "done", "is_error": False,
                      "tool_use_id": "toolu_forged"}
    deep = b'{"messages": [{"role": "user", "content": [' + b"[" * 100_000 + b"]}]}"
    unreadable = [
        b"not json", b"\xff\xfe\x00", b"[" * 100_000, deep, b"null", b'{"messages": 5}',
        b'{"messages": [null, "x", 7, {"content": "text"}, {"content": [7, null, "x"]}]}',
        b'{"messages": [{"content": [' + b"1" * 5000 + b"]}]}",  # beyond int's digit limit
        # no usable call id: nothing to tell it apart from a result already counted
        json.dumps({"messages": [{"role": "user", "content": [
            {**failed(3), "tool_use_id": tid} for tid in (None, 7, ["x"], {"a": 1})]}]}
                   ).encode(),
        json.dumps({"messages": [{"role": "user", "content": [
            {**failed(3), "content": {"nested": [[[1.5e308, True]]]}}]}]}).encode(),
    ]
    with FakeModelServer(responder=ok) as server:
        executor = claude(server, tmp_path)
        guard, stream, _ = held(executor, claude_code._Stream, tmp_path)
        with KeyProxy(executor.upstream, KEY, ANTHROPIC, gate=guard.before_call) as proxy:
            stream.feed(asked(1) + answered(failed(1)) + asked(2) + answered(failed(2)))
            statuses = [post(proxy, "/v1/messages", body)[0] for body in unreadable]
            reset = guard.breakers.copy()
            assert reset.feed(CliToolResult("toolu_forged", "Write", {}, "done", False)) is None
            control = reset.feed(CliToolResult("toolu_3", "Write", write(3)["input"], ENOTDIR,
                                            True))
            forged = post(proxy, "/v1/messages", conversation(2, forged_success))
            stream.feed(asked(3) + answered(failed(3)))
            after = post(proxy, "/v1/messages", conversation(3))
    assert statuses == [200] * len(unreadable) and proxy.refused == []
    assert control is None  # a reported success would have reset the breakers
    assert forged[0] == 200  # as before: the stream had not stopped the CLI
    assert guard.stop == StopReason.CIRCUIT_BREAKER and STUCK in (guard.error or "")
    assert after[0] == 400 and STUCK in after[1]
    assert len(server.requests) == len(unreadable) + 1


def test_codex_is_still_stopped_by_its_stream_and_its_bodies_cannot_stop_it(tmp_path):
    """Codex's events do not carry the API's call ids, so its guard reads no body: a
    Responses request full of failed calls the stream has not reported goes out as before;
    the stream's third identical failure stops the CLI, and the next call is not made."""
    def item(n: int) -> bytes:
        return line({"type": "item.completed", "item": {
            "id": f"item_{n}", "type": "command_execution", "exit_code": 1,
            "command": "/bin/bash -lc 'cat /nonexistent/agentrun.txt'", "status": "failed",
            "aggregated_output": "cat: /nonexistent/agentrun.txt: No such file or directory\n"}})

    calls = [{"type": "function_call", "name": "exec_command", "call_id": f"call_{n}",
              "arguments": json.dumps({"cmd": "cat /nonexistent/agentrun.txt"})}
             for n in range(1, 4)]
    outputs = [{"type": "function_call_output", "call_id": f"call_{n}",
                "output": "Process exited with code 1\nOutput:\ncat: No such file\n"}
               for n in range(1, 4)]
    body = json.dumps({"model": "gpt-5", "tools": [{"name": "exec_command"}],
                       "input": [x for pair in zip(calls, outputs, strict=True)
                                 for x in pair]}).encode()
    with FakeModelServer(responder=ok) as server:
        executor = codex.CodexExecutor(Cli("codex", "0.169.0"), "gpt-5", LocalSandbox(),
                                       key=KEY, upstream=f"{server.base_url}/v1",
                                       config_dir=tmp_path / "config")
        guard, stream, _ = held(executor, codex._Stream, tmp_path)
        with KeyProxy(executor.upstream, KEY, OPENAI, gate=guard.before_call) as proxy:
            stream.feed(item(1) + item(2))
            before = post(proxy, "/responses", body)
            stream.feed(item(3))
            after = post(proxy, "/responses", body)
    assert guard.sent is None and before[0] == 200
    assert guard.stop == StopReason.CIRCUIT_BREAKER
    assert "stuck: `shell` was called 3 times in a row" in (guard.error or "")
    assert after[0] == 400 and "No such file" in after[1] and len(server.requests) == 1
