"""Recording a session as a script, and replaying it with the scripted provider."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading

import pytest
import yaml
from fake_model_server import Error, Reply

from agentrun.core.errors import BadInput
from agentrun.provider_choice import ProviderConfig, create_provider
from agentrun.providers.base import Message, Request, Turn
from agentrun.providers.errors import ProviderError, RateLimited, ServerError
from agentrun.providers.recording import RecordingProvider, reset_recording, script_key
from agentrun.providers.scripted import ScriptedProvider

SCRIPT = {
    "default": [{"text": "default one"}],
    "agents": {"spec-auditor": [
        {"text": "Auditing.", "tool_calls": [{"name": "read_file", "arguments": {"path": "S.md"}}],
         "usage": {"input_tokens": 900, "output_tokens": 30, "cache_read_tokens": 0,
                   "cache_write_tokens": 900}},
        {"text": "Looks executable.", "usage": {"input_tokens": 40, "output_tokens": 8,
                                                "cache_read_tokens": 900,
                                                "cache_write_tokens": 0}},
    ]},
    "groups": {
        "G1": [
            {"fault": "rate_limit", "retry_after": 2, "repeat": 2},
            {"tool_calls": [{"name": "write_file",
                             "arguments": {"path": "src/a.py", "content": "print(1)\n"}},
                            {"name": "run_command", "arguments": {"command": "pytest -q"}}]},
            {"fault": "malformed_arguments",
             "tool_calls": [{"name": "edit_file", "arguments": {"path": "x"}}]},
            {"text": "G1 done", "stop_reason": "max_tokens"},
        ],
        "G2": [{"fault": "server_error"}, {"text": "G2 done — ünïcode ✓"}],
    },
}

CALLS = [("", ""), ("spec-auditor", ""), ("spec-auditor", ""), ("worker", "G1"),
         ("worker", "G1"), ("worker", "G1"), ("worker", "G1"), ("worker", "G2,G3"),
         ("worker", "G2"), ("worker", "G1"), ("", "")]


def session(provider) -> list[Turn | str]:
    """Drive a fixed sequence of requests; a fault shows up as its error class name."""
    out: list[Turn | str] = []
    for i, (agent, group) in enumerate(CALLS):
        request = Request(system="s", messages=[Message("user", f"step {i}")], agent=agent,
                          group=group)
        try:
            out.append(provider.complete(request))
        except ProviderError as exc:
            out.append(f"{type(exc).__name__} retry_after={exc.retry_after}")
    return out


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_record_then_replay_gives_identical_turns(tmp_path, suffix):
    path = tmp_path / f"session{suffix}"
    original = session(RecordingProvider(ScriptedProvider(SCRIPT), path))
    replayed = session(ScriptedProvider.from_file(path))

    assert replayed == original
    assert original[3:5] == ["RateLimited retry_after=2.0"] * 2
    assert original[7] == "ServerError retry_after=None"
    g1_calls = original[5]
    assert isinstance(g1_calls, Turn)
    assert [c.id for c in g1_calls.tool_calls] == ["call_G1_1", "call_G1_2"]
    malformed = original[6]
    assert malformed.tool_calls[0].arguments == {} and malformed.tool_calls[0].arguments_error
    assert (original[9].text, original[9].stop_reason) == ("G1 done", "max_tokens")
    assert original[-1].text == "(script exhausted)"


def test_recorded_file_is_keyed_by_group_then_agent_then_default(tmp_path):
    path = tmp_path / "rec.yaml"
    session(RecordingProvider(ScriptedProvider(SCRIPT), path))
    data = yaml.safe_load(path.read_text())
    assert set(data) == {"default", "agents", "groups"}
    assert list(data["agents"]) == ["spec-auditor"]
    assert set(data["groups"]) == {"G1", "G2"}  # "G2,G3" was recorded under its first id
    assert data["groups"]["G1"][0] == {"fault": "rate_limit", "retry_after": 2.0}
    assert data["agents"]["spec-auditor"][0]["usage"]["cache_write_tokens"] == 900
    assert data["groups"]["G1"][2]["tool_calls"][0]["id"] == "call_G1_1"


def test_file_is_written_after_every_call_and_atomically(tmp_path):
    path = tmp_path / "rec.json"
    rec = RecordingProvider(ScriptedProvider([{"text": "a"}, {"text": "b"}]), path)
    rec.complete(Request(system="", messages=[]))
    assert json.loads(path.read_text())["default"][0]["text"] == "a"
    rec.complete(Request(system="", messages=[]))
    assert [t["text"] for t in json.loads(path.read_text())["default"]] == ["a", "b"]
    # no temp files left; only the lock sidecar that recording processes share
    assert sorted(p.name for p in tmp_path.iterdir()) == [".rec.json.lock", "rec.json"]


def test_worker_processes_recording_into_one_file_keep_every_turn(tmp_path):
    path = tmp_path / "shared.yaml"
    code = textwrap.dedent("""
        import sys
        from agentrun.providers.base import Request
        from agentrun.providers.recording import RecordingProvider
        from agentrun.providers.scripted import ScriptedProvider
        group = sys.argv[1]
        script = {"groups": {group: [{"text": f"{group}-{i}"} for i in range(25)]}}
        rec = RecordingProvider(ScriptedProvider(script), sys.argv[2])
        for _ in range(25):
            rec.complete(Request(system="", messages=[], group=group))
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code, g, str(path)],
                              stderr=subprocess.PIPE, text=True) for g in ("G1", "G2", "G3")]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    data = yaml.safe_load(path.read_text())
    for g in ("G1", "G2", "G3"):
        assert [t["text"] for t in data["groups"][g]] == [f"{g}-{i}" for i in range(25)]


def test_later_recorders_append_until_reset(tmp_path):
    path = tmp_path / "rec.yaml"
    RecordingProvider(ScriptedProvider([{"text": "one"}]), path).complete(Request("", []))
    RecordingProvider(ScriptedProvider([{"text": "two"}]), path).complete(Request("", []))
    assert [t["text"] for t in yaml.safe_load(path.read_text())["default"]] == ["one", "two"]
    reset_recording(path)
    assert not path.exists()
    reset_recording(path)  # nothing to remove is fine
    RecordingProvider(ScriptedProvider([{"text": "three"}]), path).complete(Request("", []))
    assert [t["text"] for t in yaml.safe_load(path.read_text())["default"]] == ["three"]


def test_recording_into_a_file_that_is_not_a_script_is_bad_input(tmp_path):
    path = tmp_path / "notes.yaml"
    path.write_text("just: [unclosed\n")
    rec = RecordingProvider(ScriptedProvider([{"text": "x"}]), path)
    with pytest.raises(BadInput) as info:
        rec.complete(Request("", []))
    assert str(path) in info.value.message and "--record" in info.value.hint
    assert path.read_text() == "just: [unclosed\n"  # left as it was


def test_concurrent_recording_keeps_every_turn(tmp_path):
    path = tmp_path / "rec.yaml"
    script = {"groups": {f"G{g}": [{"text": f"G{g}-{i}"} for i in range(10)] for g in range(4)}}
    rec = RecordingProvider(ScriptedProvider(script), path)

    def worker(g):
        for _ in range(10):
            rec.complete(Request(system="", messages=[], group=f"G{g}"))

    threads = [threading.Thread(target=worker, args=(g,)) for g in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    data = yaml.safe_load(path.read_text())
    for g in range(4):
        assert [t["text"] for t in data["groups"][f"G{g}"]] == [f"G{g}-{i}" for i in range(10)]


def test_script_key():
    assert script_key(Request("", [], agent="a", group=" G2 , G3")) == ("groups", "G2")
    assert script_key(Request("", [], agent="a")) == ("agents", "a")
    assert script_key(Request("", [])) == ("default", "")


def test_create_provider_records_a_real_sdk_session(tmp_path, fake_model_server):
    fake_model_server.queue(
        Reply(text="calling", usage={"input_tokens": 10, "output_tokens": 3,
                                     "cache_read_tokens": 5},
              tool_calls=[{"name": "write_file", "arguments_json": "{broken"},
                          {"name": "read_file", "arguments": {"path": "a"}}]),
        Error(500, "down"),
        Reply(text="final"),
    )
    cfg = ProviderConfig("openai", "gpt-4.1", fake_model_server.openai_base_url, 0, 10.0, "test")
    path = tmp_path / "live.yaml"
    live = create_provider(cfg, record=path, env={"OPENAI_API_KEY": "sk-test-recording"})
    assert isinstance(live, RecordingProvider) and live.name == "openai"

    request = Request(system="s", messages=[Message("user", "go")], group="G1")
    first = live.complete(request)
    with pytest.raises(ServerError):
        live.complete(request)
    last = live.complete(request)

    replay = ScriptedProvider.from_file(path, model="gpt-4.1")
    assert replay.complete(request) == first
    with pytest.raises(ServerError):
        replay.complete(request)
    assert replay.complete(request) == last
    assert first.tool_calls[0].arguments_error and first.usage.cache_read_tokens == 5
    assert "sk-test-recording" not in path.read_text()


def test_rate_limit_without_retry_after_is_recorded_plainly(tmp_path):
    path = tmp_path / "r.yaml"
    rec = RecordingProvider(ScriptedProvider([{"fault": "rate_limit"}]), path)
    with pytest.raises(RateLimited):
        rec.complete(Request("", []))
    assert yaml.safe_load(path.read_text()) == {"default": [{"fault": "rate_limit"}]}


def test_recordings_are_redacted_like_transcripts(tmp_path, monkeypatch):
    key = "sk-proj-RECORDEDSECRET0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    path = tmp_path / "rec.yaml"
    rec = RecordingProvider(ScriptedProvider([
        {"text": f"the key is {key}, or in part {key[5:25]}",
         "tool_calls": [{"name": "write_file", "arguments": {"path": ".env",
                                                             "content": f"KEY={key}\n"}}]}]),
        path)
    rec.complete(Request(system="", messages=[]))
    text = path.read_text()
    assert key not in text and key[5:25] not in text and "[REDACTED]" in text
