"""Whole orchestrated runs through the real SDKs: `agentrun run` against the fake model server.

The scripted provider proves the orchestration; these runs prove that the real `anthropic` and
`openai` adapters hold up inside it: worker processes started from the forkserver build their
own SDK clients, talk to a server on 127.0.0.1, and their usage (cache tokens included) is
rolled up into the run's result, while the API key stays out of every request body and every
file the run writes.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

from clirun import agentrun
from fake_model_server import FakeModelServer, RecordedRequest, Reply
from gitutil import init_repo, run_git
from runkit import STATE_MD, spec_text

API_KEY = "test-key"
SPEC = "SPEC-40"
# Two waves of two parallel workers; each dependent reads its dependency's file.
GROUPS = [("G1", [], "src/alpha.py"), ("G2", [], "src/beta.py"),
          ("G3", ["G1"], "src/gamma.py"), ("G4", ["G2"], "src/delta.py")]
READS = {"G1": "src/alpha.py", "G2": "src/beta.py", "G3": "src/alpha.py", "G4": "src/beta.py"}
WAVES = [{"G1", "G2"}, {"G3", "G4"}]
USAGE = {"input_tokens": 100, "output_tokens": 20, "cache_read_tokens": 50,
         "cache_write_tokens": 10}
GROUP_ID = re.compile(r"\bG\d+\b")
MEET_TIMEOUT_S = 30.0


def content_of(group: str) -> str:
    return f"# written by {group}\nMARKER_{group} = True\n"


SUBMIT = {"name": "submit_result", "arguments": {
    "status": "complete", "summary": "wrote the files", "criteria_met": ["every file exists"],
    "deviations": []}}


def group_turns(group: str, path: str) -> list[dict[str, Any]]:
    """What the model does for one group: write its file, read a file, submit."""
    return [
        {"name": "write_file", "arguments": {"path": path, "content": content_of(group)}},
        {"name": "read_file", "arguments": {"path": READS[group]}},
        SUBMIT,
    ]


def assistant_turns(request: RecordedRequest) -> int:
    messages = (request.body or {}).get("messages") or []
    return sum(1 for m in messages if m.get("role") == "assistant")


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


class GroupModel:
    """Answers each request for the group named in its first user message, by the number of
    assistant turns the conversation already holds (works for both wire formats).

    The first request of each group waits until the first request of every other group of its
    wave has arrived too, so a run only gets past it if those workers really run side by side.
    """

    def __init__(self) -> None:
        self.turns = {gid: group_turns(gid, path) for gid, _, path in GROUPS}
        self.arrived: set[str] = set()
        self.met: dict[str, bool] = {}
        self.bodies: dict[str, list[bytes]] = {}  # group -> raw request bodies
        self.cond = threading.Condition()

    def __call__(self, request: RecordedRequest) -> Reply:
        messages = (request.body or {}).get("messages") or []
        first_user = next((text_of(m.get("content")) for m in messages
                           if m.get("role") == "user"), "")
        found = GROUP_ID.search(first_user)
        group = found.group(0) if found else "?"
        with self.cond:
            self.bodies.setdefault(group, []).append(request.raw)
        done = assistant_turns(request)
        if done == 0:
            self._meet(group)
        turns = self.turns.get(group, [])
        if done >= len(turns):
            return Reply(text=f"no more turns for {group}", usage=USAGE)
        return Reply(tool_calls=[turns[done]], usage=USAGE)

    def _meet(self, group: str) -> None:
        wave = next((w for w in WAVES if group in w), {group})
        with self.cond:
            self.arrived.add(group)
            self.cond.notify_all()
            self.met[group] = self.cond.wait_for(lambda: wave <= self.arrived,
                                                 timeout=MEET_TIMEOUT_S)


def make_project(root: Path, groups: list[tuple[str, list[str], str]] = GROUPS) -> Path:
    return init_repo(root, {
        "README.md": "# fixture\n",
        ".gitignore": ".specflow/runs/\n",
        ".specflow/PROJECT.md": "# Project\n\nA fixture.\n",
        ".specflow/STATE.md": STATE_MD.format(spec=SPEC),
        f".specflow/specs/{SPEC}.md": spec_text(SPEC, groups),
    })


def assert_every_group_landed(root: Path, result: dict[str, Any]) -> None:
    assert result["mode"] == "orchestrated" and result["status"] == "complete"
    assert [set(w["groups"]) for w in result["waves"]] == WAVES
    for gid, _, path in GROUPS:
        assert (root / path).read_text() == content_of(gid)
        group = result["groups"][gid]
        assert group["status"] == "complete" and group["files_created"] == [path]
        run_git(root, "merge-base", "--is-ancestor", group["commits"][0], "HEAD")
    assert run_git(root, "status", "--porcelain") == ""


def assert_dependents_saw_their_dependencies(model: GroupModel) -> None:
    """A wave-2 worker's read_file result (sent back to the model) holds wave 1's file."""
    for dependent, dependency in (("G3", "G1"), ("G4", "G2")):
        raws = model.bodies.get(dependent, [])
        assert any(f"MARKER_{dependency}".encode() in raw for raw in raws), dependent


def expected_usage(calls: int, **override: int) -> dict[str, int]:
    return {key: value * calls for key, value in {**USAGE, **override}.items()}


def test_anthropic_sdk_drives_an_orchestrated_run(tmp_path):
    root = make_project(tmp_path / "project")
    model = GroupModel()
    with FakeModelServer(responder=model) as server:
        proc = agentrun("run", SPEC, "--provider", "anthropic",
                        "--model", "claude-sonnet-4-6", "--yes", "--json", "--no-review",
                        env={"ANTHROPIC_BASE_URL": server.anthropic_base_url,
                             "ANTHROPIC_API_KEY": API_KEY}, cwd=root)
    assert proc.returncode == 0, proc.stderr
    result = proc.json
    assert_every_group_landed(root, result)
    # the workers of each wave ran side by side
    assert model.met == {gid: True for gid, _, _ in GROUPS}
    # every model call went through the real SDK to the Messages endpoint, with the key
    assert len(server.requests) == 3 * len(GROUPS)
    assert {r.path for r in server.requests} == {"/v1/messages"}
    assert all(API_KEY in r.headers.get("x-api-key", "") + r.headers.get("authorization", "")
               for r in server.requests)  # (the SDK sends it in one header or the other)
    assert {r.body["model"] for r in server.requests} == {"claude-sonnet-4-6"}
    assert_dependents_saw_their_dependencies(model)
    # usage, cache reads and writes included, per group and rolled up for the run
    for gid, _, _ in GROUPS:
        assert result["groups"][gid]["usage"] == expected_usage(3)
    assert result["usage"] == expected_usage(3 * len(GROUPS))
    assert result["cost_usd"] > 0
    # the key is in no request body and in no file the run wrote
    key = API_KEY.encode()
    assert not [r.path for r in server.requests if key in r.raw]
    written = [p for d in (".specflow/runs", ".specflow/execution") for p in
               (root / d).rglob("*") if p.is_file()]
    assert any(p.name == "transcript.jsonl" for p in written)
    written += [root / ".specflow/STATE.md", root / f".specflow/specs/{SPEC}.md"]
    assert [str(p) for p in written if key in p.read_bytes()] == []


def test_openai_compatible_server_without_a_key(tmp_path):
    root = make_project(tmp_path / "project")
    model = GroupModel()
    with FakeModelServer(responder=model) as server:
        proc = agentrun("run", SPEC, "--provider", "openai", "--yes", "--json", "--no-review",
                        env={"OPENAI_BASE_URL": server.openai_base_url}, cwd=root)
    assert proc.returncode == 0, proc.stderr
    result = proc.json
    assert_every_group_landed(root, result)
    assert model.met == {gid: True for gid, _, _ in GROUPS}
    assert len(server.requests) == 3 * len(GROUPS)
    assert {r.path for r in server.requests} == {"/v1/chat/completions"}
    assert_dependents_saw_their_dependencies(model)
    # Chat Completions usage: cached prompt tokens become cache reads; there are no cache
    # writes on this wire format
    assert result["usage"] == expected_usage(3 * len(GROUPS), cache_write_tokens=0)



class ExecutorModel:
    """Single mode: one conversation; the n-th reply is the n-th tool call of `calls`."""

    def __init__(self, calls: list[dict[str, Any]]) -> None:
        self.calls = calls

    def __call__(self, request: RecordedRequest) -> Reply:
        done = assistant_turns(request)
        if done >= len(self.calls):
            return Reply(text="nothing more to do", usage=USAGE)
        return Reply(tool_calls=[self.calls[done]], usage=USAGE)


def run_single(root: Path, groups: list[tuple[str, list[str], str]]):
    """`--mode single` through the anthropic SDK: write every group's file, then submit."""
    calls = [group_turns(gid, path)[0] for gid, _, path in groups] + [SUBMIT]
    with FakeModelServer(responder=ExecutorModel(calls)) as server:
        proc = agentrun("run", SPEC, "--provider", "anthropic", "--mode", "single",
                        "--model", "claude-sonnet-4-6", "--yes", "--json", "--no-review",
                        env={"ANTHROPIC_BASE_URL": server.anthropic_base_url,
                             "ANTHROPIC_API_KEY": API_KEY}, cwd=root)
    return proc, server


def test_single_mode_runs_groups_that_depend_on_each_other(tmp_path):
    """`--mode single` on a two-wave spec: one executor does all four groups in order, and the
    run's usage is exactly what the server reported.

    G3 depends on G1 and both are in the one single-mode batch; a dependency inside the batch
    must not block it (it once did: "dependency G1, G2 did not complete", nothing ran).
    5 calls of 50 cache reads shared by 4 groups do not divide evenly: rounding each share (as
    the orchestrator once did) records 4 x 62 = 248.
    """
    root = make_project(tmp_path / "project")
    proc, server = run_single(root, GROUPS)
    result = proc.json
    assert result["mode"] == "single"
    assert {g: v["status"] for g, v in result["groups"].items()} == {
        gid: "complete" for gid, _, _ in GROUPS}, proc.stderr
    assert proc.returncode == 0
    calls = len(GROUPS) + 1
    assert len(server.requests) == calls
    for gid, _, path in GROUPS:
        assert (root / path).read_text() == content_of(gid)
    assert result["status"] == "complete"
    assert result["usage"] == expected_usage(calls)
