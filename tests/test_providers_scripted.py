"""The scripted provider: script lookup, cursors, faults, usage, validation, thread safety."""

from __future__ import annotations

import json
import threading
import time

import pytest

from agentrun.core.errors import BadInput
from agentrun.providers.base import Message, Provider, Request
from agentrun.providers.errors import (
    AuthenticationFailed,
    BadRequest,
    ConnectionFailed,
    MalformedResponse,
    ModelTimeout,
    RateLimited,
    ServerError,
)
from agentrun.providers.scripted import EXHAUSTED_TEXT, ScriptedProvider


def req(text: str = "hello", *, agent: str = "", group: str = "") -> Request:
    return Request(system="sys", messages=[Message("user", text)], agent=agent, group=group)


def test_is_a_provider():
    p = ScriptedProvider([])
    assert isinstance(p, Provider)
    assert p.name == "scripted" and p.model == "scripted"


def test_plain_list_replays_in_order_then_exhausts():
    p = ScriptedProvider([
        {"text": "I'll create the module",
         "tool_calls": [{"name": "write_file",
                         "arguments": {"path": "src/a.py", "content": "print(1)\n"}}]},
        {"text": "done"},
    ])
    t1 = p.complete(req())
    assert t1.text == "I'll create the module"
    assert t1.stop_reason == "tool_use"
    assert [(c.id, c.name, c.arguments) for c in t1.tool_calls] == [
        ("call_default_1", "write_file", {"path": "src/a.py", "content": "print(1)\n"})]
    t2 = p.complete(req())
    assert (t2.text, t2.tool_calls, t2.stop_reason) == ("done", [], "end_turn")
    for _ in range(2):
        t3 = p.complete(req())
        assert (t3.text, t3.tool_calls, t3.stop_reason) == (EXHAUSTED_TEXT, [], "end_turn")


def test_lookup_order_agents_then_groups_then_default():
    p = ScriptedProvider({
        "default": [{"text": "d1"}, {"text": "d2"}],
        "agents": {"spec-auditor": [{"text": "a1"}]},
        "groups": {"G1": [{"text": "g1-1"}, {"text": "g1-2"}], "G3": [{"text": "g3-1"}]},
    })
    assert p.complete(req(agent="spec-auditor", group="G1")).text == "a1"
    assert p.complete(req(agent="worker", group="G1")).text == "g1-1"
    # "G2,G3": G2 has no list, so the first listed id that has one is used
    assert p.complete(req(group="G2, G3")).text == "g3-1"
    assert p.complete(req(group="G1,G3")).text == "g1-2"
    assert p.complete(req(group="G9")).text == "d1"
    assert p.complete(req()).text == "d2"
    assert p.complete(req(agent="spec-auditor")).text == EXHAUSTED_TEXT


def test_each_list_has_its_own_cursor_and_ids():
    call = {"name": "read_file", "arguments": {"path": "x"}}
    p = ScriptedProvider({"groups": {"G1": [{"tool_calls": [call, call]}, {"tool_calls": [call]}],
                                     "G2": [{"tool_calls": [call]}]}})
    ids1 = [c.id for c in p.complete(req(group="G1")).tool_calls]
    ids2 = [c.id for c in p.complete(req(group="G2")).tool_calls]
    ids3 = [c.id for c in p.complete(req(group="G1")).tool_calls]
    assert ids1 == ["call_G1_1", "call_G1_2"]
    assert ids2 == ["call_G2_1"]
    assert ids3 == ["call_G1_3"]


def test_explicit_tool_call_id_and_stop_reason_are_kept():
    p = ScriptedProvider([{"text": "cut", "stop_reason": "max_tokens",
                           "tool_calls": [{"id": "toolu_1", "name": "x"}]}])
    turn = p.complete(req())
    assert turn.stop_reason == "max_tokens"
    assert turn.tool_calls[0].id == "toolu_1" and turn.tool_calls[0].arguments == {}


def test_no_script_at_all_exhausts_immediately():
    p = ScriptedProvider({"groups": {"G1": [{"text": "x"}]}})
    assert p.complete(req(group="G2")).text == EXHAUSTED_TEXT


@pytest.mark.parametrize("fault, error", [
    ("rate_limit", RateLimited), ("server_error", ServerError), ("timeout", ModelTimeout),
    ("connection", ConnectionFailed), ("auth", AuthenticationFailed),
    ("bad_request", BadRequest), ("malformed_response", MalformedResponse),
])
def test_faults_raise_matching_provider_error(fault, error):
    p = ScriptedProvider([{"fault": fault}, {"text": "after"}])
    with pytest.raises(error) as info:
        p.complete(req())
    assert info.value.message and info.value.hint
    assert p.complete(req()).text == "after"


def test_fault_repeat_raises_n_times_then_moves_on():
    p = ScriptedProvider([{"fault": "rate_limit", "repeat": 3, "retry_after": 1.5},
                          {"text": "ok"}])
    for _ in range(3):
        with pytest.raises(RateLimited) as info:
            p.complete(req())
        assert info.value.retryable and info.value.retry_after == 1.5
    assert p.complete(req()).text == "ok"


def test_malformed_arguments_returns_calls_with_arguments_error():
    p = ScriptedProvider([{"fault": "malformed_arguments",
                           "tool_calls": [{"name": "write_file", "arguments": {"path": "a"}}]}])
    turn = p.complete(req())
    assert turn.stop_reason == "tool_use"
    [call] = turn.tool_calls
    assert call.name == "write_file" and call.arguments == {}
    assert call.arguments_error


def test_usage_given_is_used_verbatim():
    usage = {"input_tokens": 1200, "output_tokens": 80, "cache_read_tokens": 7,
             "cache_write_tokens": 3}
    turn = ScriptedProvider([{"text": "x", "usage": usage}]).complete(req())
    assert turn.usage.to_dict() == usage


def test_usage_partial_fills_zeros():
    turn = ScriptedProvider([{"text": "x", "usage": {"output_tokens": 5}}]).complete(req())
    assert turn.usage.to_dict() == {"input_tokens": 0, "output_tokens": 5,
                                    "cache_read_tokens": 0, "cache_write_tokens": 0}


def test_usage_estimated_from_request_and_turn_when_absent():
    p = ScriptedProvider([{"text": "a" * 40}, {"text": "b"}])
    short = p.complete(Request(system="", messages=[Message("user", "x" * 400)]))
    assert short.usage.input_tokens == 100
    assert short.usage.output_tokens == 10
    longer = p.complete(Request(system="", messages=[Message("user", "x" * 4000)]))
    assert longer.usage.input_tokens == 1000


def test_latency_sleeps_before_reply():
    p = ScriptedProvider([{"text": "slow", "latency_s": 0.15}])
    start = time.monotonic()
    assert p.complete(req()).text == "slow"
    assert time.monotonic() - start >= 0.15


def test_from_file_yaml_and_json(tmp_path):
    y = tmp_path / "s.yaml"
    y.write_text("groups:\n  G1:\n    - text: from yaml\n      tool_calls:\n"
                 "        - name: write_file\n          arguments: {path: a.py, content: \"x\"}\n")
    j = tmp_path / "s.json"
    j.write_text(json.dumps([{"text": "from json"}]))
    ty = ScriptedProvider.from_file(y, model="m").complete(req(group="G1"))
    assert ty.text == "from yaml" and ty.model == "m"
    assert ty.tool_calls[0].arguments == {"path": "a.py", "content": "x"}
    assert ScriptedProvider.from_file(str(j)).complete(req()).text == "from json"


@pytest.mark.parametrize("content, problem", [
    ("text: [unclosed", "not valid YAML"),
    ("42", "must be a list of turns or a mapping"),
    ("", "the script is empty"),
    ("bogus: []", "unknown top-level key"),
    ("groups: [1]", "`groups` must be a mapping"),
    ("groups: {G1: {text: x}}", "`groups.G1` must be a list"),
    ("- 3", "default[0]: a turn must be a mapping"),
    ("- {txt: x}", "unknown key(s) ['txt']"),
    ("- {fault: explode}", "fault 'explode' is not one of"),
    ("- {fault: rate_limit, repeat: 0}", "repeat must be a positive integer"),
    ("- {latency_s: -1}", "latency_s must be a non-negative number"),
    ("- {tool_calls: [{arguments: {}}]}", "tool_calls[0].name must be a non-empty string"),
    ("- {tool_calls: [{name: x, arguments: [1]}]}", "arguments must be a mapping"),
    ("- {usage: {input_tokens: -2}}", "usage.input_tokens must be a non-negative integer"),
    ("- {usage: {tokens: 2}}", "usage: unknown key(s)"),
    ("- {stop_reason: done}", "stop_reason must be one of"),
])
def test_invalid_script_files_raise_bad_input_naming_file_and_problem(tmp_path, content, problem):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(BadInput) as info:
        ScriptedProvider.from_file(path)
    assert str(path) in info.value.message
    assert problem in info.value.message
    assert info.value.hint


def test_invalid_json_and_missing_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[{")
    with pytest.raises(BadInput, match="not valid JSON"):
        ScriptedProvider.from_file(bad)
    with pytest.raises(BadInput, match="not found") as info:
        ScriptedProvider.from_file(tmp_path / "nope.yaml")
    assert "nope.yaml" in info.value.message


def test_concurrent_requests_each_get_a_distinct_turn():
    n = 200
    p = ScriptedProvider([{"text": str(i)} for i in range(n)])
    seen: list[str] = []
    lock = threading.Lock()

    def worker():
        for _ in range(n // 8):
            text = p.complete(req()).text
            with lock:
                seen.append(text)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seen, key=int) == [str(i) for i in range(n)]
