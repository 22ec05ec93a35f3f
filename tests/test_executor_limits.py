"""The real `claude` CLI held to the limits agentrun's own loop keeps: the stuck-loop breaker,
the token budget, the step limit and the run's spending cap, read from its stream (and its key
proxy) as it runs; the CLI is stopped when one is reached, and the group says which.

Each group of a run is scripted to its own fault, and the fake server's record of each group's
requests shows the fault met the intended call."""

from __future__ import annotations

import threading

from fake_model_server import FakeModelServer, RecordedRequest, Reply
from test_executor_claude_code import USAGE, asked, claude_bin, make_project, run

__all__ = ["claude_bin"]  # the fixture, used by name

LOOP = "/dev/null/agentrun/loop.txt"  # a Write that fails the same way every time


class Faulty:
    """Per group, by the file its task names: `loop` writes where no write can succeed,
    `costly` reports 60,000 input tokens a reply, `endless` writes a new file every turn."""

    def __init__(self, kinds: dict[str, str], usage: dict[str, int] | None = None,
                 meet: bool = False) -> None:
        self.kinds, self.usage = kinds, usage or USAGE
        self.calls: dict[str, int] = {}  # tool-carrying requests per file
        self.meet = meet  # first calls wait until every group's CLI has called
        self.lock = threading.Condition()

    def __call__(self, request: RecordedRequest) -> Reply:
        task = asked(request)
        if task is None:  # a side request (a title, a summary): answer briefly
            return Reply(text="ok", usage=USAGE)
        file, cwd = task.file, task.cwd
        with self.lock:
            n = self.calls[file] = self.calls.get(file, 0) + 1
            self.lock.notify_all()
            if self.meet:
                self.lock.wait_for(lambda: set(self.kinds) <= set(self.calls), timeout=60)
        kind = self.kinds.get(file)
        if kind == "refuses":
            return Reply(text="I can't help with that.", stop_reason="refusal", usage=USAGE)
        usage = {"input_tokens": 60_000, "output_tokens": 20} if kind == "costly" \
            else self.usage
        path = LOOP if kind == "loop" else f"{cwd or '.'}/{file}"
        if kind in ("costly", "endless") and n > 1:
            path = path.replace(".txt", f"_{n}.txt")
        content = "again\n" if kind == "loop" else f"call {n}\n"
        return Reply(tool_calls=[{"name": "Write", "arguments": {
            "file_path": path, "content": content}}], usage=usage)


def test_a_looping_a_costly_and_an_endless_cli_are_each_stopped_by_their_limit(tmp_path,
                                                                                 claude_bin):
    """G1 repeats a failing Write, G2's replies cost 60,000 tokens each against the 100,000
    budget, G3 never ends (4 turns allowed), G4's model refuses."""
    root = make_project(tmp_path / "project", [("G1", [], "src/alpha.txt"),
                                                ("G2", [], "src/beta.txt"),
                                                ("G3", [], "src/gamma.txt"),
                                                ("G4", [], "src/delta.txt")])
    model = Faulty({"src/alpha.txt": "loop", "src/beta.txt": "costly",
                    "src/gamma.txt": "endless", "src/delta.txt": "refuses"})
    with FakeModelServer(responder=model) as server:
        proc = run(root, server, claude_bin, "--retries", "0", "--max-steps", "4")
    assert proc.returncode == 1, proc.stderr
    groups = proc.json["groups"]
    loop, costly, endless = groups["G1"], groups["G2"], groups["G3"]
    # G1: stopped at its third identical failure; the fourth call never reached the server
    assert loop["stop_reason"] == "circuit_breaker" and loop["status"] == "failed"
    assert "stuck: `Write` was called 3 times in a row with the same arguments" in loop["error"]
    assert "ENOTDIR" in loop["error"] and model.calls["src/alpha.txt"] == 3
    # G2: stopped when its second reply took it past the budget; its first file is kept
    assert costly["stop_reason"] == "budget" and costly["status"] == "partial"
    assert "token budget exhausted (120" in costly["error"] and "of 100000 tokens" in costly[
        "error"]
    assert model.calls["src/beta.txt"] == 2 and "src/beta.txt" in costly["files_created"]
    # G3: the CLI's own error_max_turns, said as the step limit
    assert endless["stop_reason"] == "max_steps" and endless["status"] == "partial"
    assert endless["error"] == ("reached the step limit (4 turns, the CLI's --max-turns) "
                                "before finishing")
    assert model.calls["src/gamma.txt"] == 4
    # G4: refused at its first call, not asked again
    refused = groups["G4"]
    assert (refused["status"], refused["stop_reason"]) == ("failed", "refusal")
    assert refused["error"] == "the model refused the task: I can't help with that."
    assert model.calls["src/delta.txt"] == 1
    for words in ("stuck: `Write`", "token budget exhausted", "reached the step limit"):
        assert words in proc.stderr


def test_the_spending_cap_stops_cli_workers_at_their_next_model_call(tmp_path, claude_bin):
    """Two CLIs that would never stop, a cap of 6 of their calls (10,000 input tokens at
    $3 per million): no call beyond the one each had in flight."""
    root = make_project(tmp_path / "project", [("G1", [], "src/alpha.txt"),
                                                ("G2", [], "src/beta.txt")])
    model = Faulty({"src/alpha.txt": "endless", "src/beta.txt": "endless"},
                   usage={"input_tokens": 10_000, "output_tokens": 0}, meet=True)
    call_usd = 10_000 * 3.0 / 1e6
    with FakeModelServer(responder=model) as server:
        proc = run(root, server, claude_bin, "--retries", "0",
                   "--max-cost", f"{6 * call_usd}")
    assert proc.returncode == 1, proc.stderr
    doc = proc.json
    assert doc["stop_reason"] == "cost_cap"
    calls = sum(model.calls.values())
    assert 6 <= calls <= 6 + 2, model.calls
    for gid in ("G1", "G2"):
        group = doc["groups"][gid]
        assert (group["status"], group["stop_reason"]) == ("partial", "cost_cap"), group
        assert group["files_created"]
    assert doc["spent_usd"] <= 8 * call_usd + 0.01  # (side requests are small)

