"""Through the real Anthropic SDK and a run: text blocks holding only whitespace (which the
API rejects) are not sent back, thinking stays as received, and a garbage response is named
as such."""

from __future__ import annotations

from typing import Any

import pytest
from clirun import agentrun
from fake_model_server import Error, FakeModelServer, Raw, RecordedRequest, Reply
from gitutil import init_repo
from runkit import STATE_MD, spec_text

SPEC = "SPEC-41"
SUBMIT = {"name": "submit_result", "arguments": {
    "status": "complete", "summary": "wrote one.txt", "criteria_met": ["every file exists"],
    "deviations": []}}
WRITE = {"name": "write_file", "arguments": {"path": "one.txt", "content": "1\n"}}


def blank_text_blocks(body: dict[str, Any]) -> list[Any]:
    return [block for message in body.get("messages", []) for block in message["content"]
            if isinstance(block, dict) and block.get("type") == "text"
            and not block.get("text", "").strip()]


class StrictModel:
    """Answers "\\n\\n" and a tool call, then refuses (as the API does) any request holding a
    whitespace-only text block, else submits."""

    def __init__(self, thinking: str | None) -> None:
        self.thinking = thinking

    def __call__(self, request: RecordedRequest) -> Reply | Error:
        body = request.body or {}
        if blank_text_blocks(body):
            return Error(400, "messages: text content blocks must contain non-whitespace text")
        answered = sum(1 for m in body.get("messages", []) if m["role"] == "assistant")
        if answered == 0:
            return Reply(text="\n\n", tool_calls=[WRITE], thinking=self.thinking,
                         usage={"input_tokens": 10, "output_tokens": 5})
        return Reply(tool_calls=[SUBMIT], usage={"input_tokens": 10, "output_tokens": 5})


@pytest.mark.parametrize("thinking", [None, "I should write one.txt."])
def test_whitespace_only_text_is_not_sent_back(tmp_path, thinking):
    root = init_repo(tmp_path / "p", {
        "README.md": "# fixture\n", ".gitignore": ".specflow/runs/\n",
        ".specflow/STATE.md": STATE_MD.format(spec=SPEC),
        f".specflow/specs/{SPEC}.md": spec_text(SPEC, [("G1", [], "one.txt")]),
    })
    with FakeModelServer(responder=StrictModel(thinking)) as server:
        proc = agentrun("run", SPEC, "--provider", "anthropic", "--model", "claude-sonnet-4-6",
                        "--yes", "--json", "--no-review", cwd=root,
                        env={"ANTHROPIC_BASE_URL": server.anthropic_base_url,
                             "ANTHROPIC_API_KEY": "test-key"})
    assert proc.returncode == 0, proc.stderr
    assert proc.json["groups"]["G1"]["status"] == "complete"
    assert (root / "one.txt").read_text() == "1\n"
    second = server.requests[1].body
    assert blank_text_blocks(second) == []
    replayed = second["messages"][1]["content"]
    assert replayed[-1]["type"] == "tool_use" and replayed[-1]["name"] == "write_file"
    if thinking:  # the signed thinking block goes back exactly as it came
        assert replayed[0] == {"type": "thinking", "thinking": thinking,
                               "signature": "sig-msg_1"}


def test_a_garbage_response_is_reported_as_an_invalid_response(tmp_path):
    root = init_repo(tmp_path / "p", {
        "README.md": "# fixture\n", ".gitignore": ".specflow/runs/\n",
        ".specflow/STATE.md": STATE_MD.format(spec=SPEC),
        f".specflow/specs/{SPEC}.md": spec_text(SPEC, [("G1", [], "one.txt")]),
    })
    with FakeModelServer(responder=lambda _: Raw(b"\xff\xfe<html>test-key oops")) as server:
        proc = agentrun("run", SPEC, "--provider", "anthropic", "--model", "claude-sonnet-4-6",
                        "--yes", "--json", "--no-review", "--max-retries", "0", cwd=root,
                        env={"ANTHROPIC_BASE_URL": server.anthropic_base_url,
                             "ANTHROPIC_API_KEY": "test-key"})
    assert proc.returncode == 1, proc.stderr
    error = next(iter(proc.json["groups"].values()))["error"]
    assert "the model server returned an invalid response (HTTP 200)" in error, error
    assert "<html>" in error and "test-key" not in error and "Decode" not in error, error
