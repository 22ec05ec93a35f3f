"""The JSONL transcript: every step recorded, secrets redacted, long text truncated."""

from __future__ import annotations

import json

from agent_fixtures import RecordingProvider, call, make_repo, make_task, submit, turn

from agentrun.agent.transcript import Transcript
from agentrun.attempts import run_agent
from agentrun.core.secrets import REDACTED, Redactor
from agentrun.project import known_secrets
from agentrun.tools import environment
from agentrun.tools.base import CommandPolicy

SECRET = "hunter2-very-secret-value"
SK = "sk-ant-api03-" + "A" * 40


def test_secrets_from_the_environment_and_key_patterns_are_redacted(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_SERVICE_API_KEY", SECRET)
    repo = make_repo(tmp_path)
    path = tmp_path / "run" / "transcript.jsonl"
    script = [
        turn(call("write_file", path="config.txt", content=f"key={SECRET}\n"),
             text=f"Using {SK} for now"),
        turn(call("read_file", path="config.txt")),
        turn(submit("complete", f"configured with {SECRET}")),
    ]
    outcome = run_agent(make_task(repo), RecordingProvider(script),
                        transcript=Transcript(path))
    assert outcome.status == "complete"
    assert outcome.summary == f"configured with {REDACTED}"  # results are files too
    raw = path.read_text()
    assert SECRET not in raw
    assert SK not in raw and "sk-ant-api03" not in raw
    assert REDACTED in raw
    events = [json.loads(line) for line in raw.splitlines()]
    kinds = {e["type"] for e in events}
    assert {"run_start", "attempt_start", "model_turn", "tool_call", "tool_result",
            "terminator", "attempt_end", "outcome"} <= kinds
    read = [e for e in events if e["type"] == "tool_result" and e["name"] == "read_file"][0]
    assert f"key={REDACTED}" in read["content"]
    usage_turn = [e for e in events if e["type"] == "model_turn"][0]
    assert usage_turn["usage"]["input_tokens"] > 0 and usage_turn["cumulative_tokens"] > 0
    assert Transcript(path).read() == events


def test_redactor_patterns():
    redactor = Redactor(["s3cr3t-value"])
    text = ("a s3cr3t-value b sk-proj-abcdefghijklmnopqrstuvwx "
            "Authorization: Bearer abcdefghijklmnopqrstuvwxyz "
            "ghp_abcdefghijklmnopqrstuvwxyz0123 AKIAABCDEFGHIJKLMNOP")
    out = redactor.text(text)
    for leaked in ("s3cr3t-value", "sk-proj", "abcdefghijklmnopqrstuvwxyz", "ghp_",
                   "AKIAABCDEFGHIJKLMNOP"):
        assert leaked not in out
    assert "Bearer [REDACTED]" in out
    assert redactor.value({"k": ["s3cr3t-value", 1]}) == {"k": [REDACTED, 1]}
    assert Redactor().text("sk-short and skill") == "sk-short and skill"


def test_only_secret_looking_variables_are_collected():
    env = {"OPENAI_API_KEY": "abcdefgh", "GH_TOKEN": "tok-123456", "DB_PASSWORD": "pw-123456",
           "X_SECRET": "shhhhhhh", "HOME": "/root", "SHORT_TOKEN": "abc"}
    assert set(known_secrets(env)) == {"abcdefgh", "tok-123456", "pw-123456", "shhhhhhh"}


def test_transcript_redacts_what_run_command_scrubs():
    env = {"AWS_SECRET_ACCESS_KEY": "aws-secret-123", "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock",
           "PATH": "/usr/bin"}
    _child, scrubbed = environment.scrubbed_env(CommandPolicy(), env)
    assert known_secrets(env) == scrubbed == ["aws-secret-123"]


def test_long_text_is_truncated_after_redaction(tmp_path):
    transcript = Transcript(None, secrets=["tail-secret"])
    event = transcript.record("tool_result", content="x" * 10_000 + "tail-secret")
    assert len(event["content"]) < 4_200
    assert "characters truncated" in event["content"]
    assert event["content"].endswith(REDACTED)


def test_unwritable_transcript_does_not_stop_the_agent(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    transcript = Transcript(blocker / "transcript.jsonl")  # a path below a regular file
    transcript.record("x")
    assert transcript.write_error and "cannot write transcript" in transcript.write_error
