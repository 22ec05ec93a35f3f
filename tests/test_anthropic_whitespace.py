"""Through the real Anthropic SDK and a run: text blocks holding only whitespace (which the
API rejects) are not sent back, thinking stays as received, and a garbage response is named
as such.

One run covers all three cases, one group each, side by side in one wave: G1's model answers
without thinking, G2's with a signed thinking block, G3's server answers garbage every time
(retried with backoff while G1 and G2 work)."""

from __future__ import annotations

import re
import threading
from typing import Any

from clirun import agentrun
from fake_model_server import Error, FakeModelServer, Raw, RecordedRequest, Reply
from gitutil import init_repo
from runkit import STATE_MD, spec_text

SPEC = "SPEC-41"
GROUPS = [("G1", [], "one.txt"), ("G2", [], "two.txt"), ("G3", [], "three.txt")]
THINKING = {"G1": None, "G2": "I should write two.txt."}
GARBAGE = b"\xff\xfe<html>test-key oops"
GROUP_ID = re.compile(r"\bG\d+\b")
INFRA_RETRIES = 1  # a model call's retries on malformed replies (config `request_retries`)


def submit(path: str) -> dict[str, Any]:
    return {"name": "submit_result", "arguments": {
        "status": "complete", "summary": f"wrote {path}", "criteria_met": ["every file exists"],
        "deviations": []}}


def write(path: str) -> dict[str, Any]:
    return {"name": "write_file", "arguments": {"path": path, "content": f"{path}\n"}}


def blank_text_blocks(body: dict[str, Any]) -> list[Any]:
    return [block for message in body.get("messages", []) for block in message["content"]
            if isinstance(block, dict) and block.get("type") == "text"
            and not block.get("text", "").strip()]


def group_of(body: dict[str, Any]) -> str:
    content = next((m["content"] for m in body.get("messages", []) if m["role"] == "user"), "")
    if isinstance(content, list):
        content = " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    found = GROUP_ID.search(content)
    return found.group(0) if found else "?"


class StrictModel:
    """Per group: G3 gets garbage; G1 and G2 get "\\n\\n" and a tool call (G2 with thinking),
    then a refusal (as the API does) of any request holding a whitespace-only text block,
    else a submit. Every request body is kept by group."""

    def __init__(self) -> None:
        self.bodies: dict[str, list[Any]] = {}
        self.lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Reply | Error | Raw:
        body = request.body or {}
        group = group_of(body)
        with self.lock:
            self.bodies.setdefault(group, []).append(body)
        if group == "G3":
            return Raw(GARBAGE)
        if blank_text_blocks(body):
            return Error(400, "messages: text content blocks must contain non-whitespace text")
        path = {"G1": "one.txt", "G2": "two.txt"}[group]
        answered = sum(1 for m in body.get("messages", []) if m["role"] == "assistant")
        if answered == 0:
            return Reply(text="\n\n", tool_calls=[write(path)], thinking=THINKING[group],
                         usage={"input_tokens": 10, "output_tokens": 5})
        return Reply(tool_calls=[submit(path)], usage={"input_tokens": 10, "output_tokens": 5})


def test_whitespace_only_text_is_not_sent_back_and_garbage_is_an_invalid_response(tmp_path):
    root = init_repo(tmp_path / "p", {
        "README.md": "# fixture\n", ".gitignore": ".specflow/runs/\n",
        ".specflow/STATE.md": STATE_MD.format(spec=SPEC),
        ".specflow/config.yaml": f"request_retries: {INFRA_RETRIES}\n",
        f".specflow/specs/{SPEC}.md": spec_text(SPEC, GROUPS),
    })
    model = StrictModel()
    with FakeModelServer(responder=model) as server:
        proc = agentrun("run", SPEC, "--provider", "anthropic", "--model", "claude-sonnet-4-6",
                        "--yes", "--json", "--no-review", "--max-retries", "0", cwd=root,
                        env={"ANTHROPIC_BASE_URL": server.anthropic_base_url,
                             "ANTHROPIC_API_KEY": "test-key"})
    assert proc.returncode == 1, proc.stderr  # G3 failed
    groups = proc.json["groups"]
    assert set(model.bodies) == {"G1", "G2", "G3"}, set(model.bodies)

    # whitespace-only text: G1 and G2 complete, and what went back holds no blank block
    for group, path in (("G1", "one.txt"), ("G2", "two.txt")):
        assert groups[group]["status"] == "complete", groups[group]
        assert (root / path).read_text() == f"{path}\n"
        first, second = model.bodies[group]
        assert blank_text_blocks(second) == []
        replayed = second["messages"][1]["content"]
        assert replayed[-1]["type"] == "tool_use" and replayed[-1]["name"] == "write_file"
    # the signed thinking block goes back exactly as it came; none where none came
    # (the server numbers its messages by request: msg_<n> answers the n-th request)
    n = next(i for i, r in enumerate(server.requests, 1) if r.body is model.bodies["G2"][0])
    assert model.bodies["G2"][1]["messages"][1]["content"][0] == {
        "type": "thinking", "thinking": THINKING["G2"], "signature": f"sig-msg_{n}"}
    assert not [b for b in model.bodies["G1"][1]["messages"][1]["content"]
                if b.get("type") == "thinking"]

    # garbage: the same request retried, then the group fails naming the response
    assert len(model.bodies["G3"]) == 1 + INFRA_RETRIES
    assert all(body == model.bodies["G3"][0] for body in model.bodies["G3"])
    error = groups["G3"]["error"]
    assert groups["G3"]["status"] == "failed", groups["G3"]
    assert "the model server returned an invalid response (HTTP 200)" in error, error
    assert "<html>" in error and "test-key" not in error and "Decode" not in error, error
