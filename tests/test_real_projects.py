"""Real projects through `agentrun run` against the fake model server (OpenAI wire format,
usage reported on every reply): worktrees that need a set-up step, a spending cap that holds
across parallel workers and can be raised on `--resume`, and a storm of rate limits."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import yaml
from clirun import agentrun
from fake_model_server import Error, FakeModelServer, RecordedRequest, Reply
from gitutil import init_repo
from runkit import STATE_MD, spec_text

SPEC = "SPEC-77"
MODEL = "fake-model"
USAGE = {"input_tokens": 100, "output_tokens": 20, "cache_read_tokens": 50}
PRICING = {MODEL: {"input": 1000.0, "output": 1000.0}}  # USD per million: $0.17 a call
CALL_USD = 0.17
GROUP_ID = re.compile(r"\bG\d+\b")
# an untracked, ignored marker that only a set-up step creates
NEEDS_SETUP = "test -f gen/ok"
SETUP = "mkdir -p gen && echo ready > gen/ok"
COPIED_SETUP = f"grep -q TOKEN=fixture .env.test && {SETUP}"  # needs the copied file


def group_of(request: RecordedRequest) -> str:
    messages = (request.body or {}).get("messages") or []
    first = next((str(m.get("content")) for m in messages if m.get("role") == "user"), "")
    found = GROUP_ID.search(first)
    return found.group(0) if found else "?"


def turns_done(request: RecordedRequest) -> int:
    return sum(1 for m in (request.body or {}).get("messages") or []
               if m.get("role") == "assistant")


class TwoTurns:
    """Each group writes its file, then submits; every reply reports USAGE."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files
        self.groups: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Reply | Error:
        group = group_of(request)
        with self.lock:
            self.groups.append(group)
        if turns_done(request) == 0:
            call = {"name": "write_file",
                    "arguments": {"path": self.files[group], "content": f"# {group}\n"}}
        else:
            call = {"name": "submit_result", "arguments": {
                "status": "complete", "summary": "done", "criteria_met": ["every file exists"],
                "deviations": []}}
        return Reply(tool_calls=[call], usage=USAGE)


def project(root: Path, groups: list[tuple[str, list[str], str]],
            config: dict[str, Any] | None = None) -> Path:
    return init_repo(root, {
        "README.md": "# fixture\n",
        ".gitignore": ".specflow/runs/\ngen/\n.env.test\n",
        ".specflow/PROJECT.md": "# Project\n",
        ".specflow/STATE.md": STATE_MD.format(spec=SPEC),
        ".specflow/config.yaml": yaml.safe_dump({"pricing": PRICING, **(config or {})}),
        f".specflow/specs/{SPEC}.md": spec_text(SPEC, groups),
    })


def run(root: Path, server: FakeModelServer, *args: str):
    return agentrun("run", SPEC, "--provider", "openai", "--model", MODEL, "--yes", "--json",
                    "--max-retries", "0", "--no-review", *args, cwd=root,
                    env={"OPENAI_BASE_URL": server.openai_base_url})


TWO = [("G1", [], "src/a.py"), ("G2", [], "src/b.py")]


def test_validation_that_needs_a_set_up_step_passes_only_with_setup_command(tmp_path):
    files = {g: p for g, _, p in TWO}
    bare = project(tmp_path / "bare", TWO, {"validation_command": NEEDS_SETUP})
    with FakeModelServer(responder=TwoTurns(files)) as server:
        proc = run(bare, server)
    # without set-up the command fails on the base commit already: stopped before any worker
    assert proc.returncode == 1, proc.stderr
    assert "fails on the base commit" in proc.json["error"]["message"]
    assert not server.requests

    ready = project(tmp_path / "ready", TWO, {"validation_command": NEEDS_SETUP,
                                              "setup_command": COPIED_SETUP,
                                              "worktree_copy": [".env.test"]})
    (ready / ".env.test").write_text("TOKEN=fixture\n")
    with FakeModelServer(responder=TwoTurns(files)) as server:
        proc = run(ready, server)
    assert proc.returncode == 0, proc.stderr
    result = proc.json
    assert result["status"] == "complete"
    assert [c["ok"] for c in result["integration"]] == [True]  # set up before the check too
    run_dir = Path(result["run_dir"])
    for batch in ("G1", "G2"):
        log = (run_dir / "workers" / batch / "setup.log").read_text()
        assert COPIED_SETUP in log and "exit code 0" in log
    assert (run_dir / "cache" / "pip").parent.is_dir()  # one cache directory for the run


def test_a_failing_set_up_fails_its_group_before_any_model_call(tmp_path):
    root = project(tmp_path / "p", TWO)
    with FakeModelServer(responder=TwoTurns({g: p for g, _, p in TWO})) as server:
        proc = run(root, server, "--setup", "echo broken-dependency >&2; exit 3")
    assert proc.returncode == 1, proc.stderr
    assert server.requests == []
    for group in proc.json["groups"].values():
        assert group["status"] == "failed"
        assert "set-up command" in group["error"] and "broken-dependency" in group["error"]


def test_worktree_copy_must_name_an_ignored_path_that_exists(tmp_path):
    root = project(tmp_path / "p", TWO, {"worktree_copy": ["node_modules"]})
    proc = agentrun("run", SPEC, "--provider", "openai", "--model", MODEL, "--yes",
                    "--dry-run", cwd=root, env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert proc.returncode == 2
    assert "worktree_copy entry 'node_modules' does not exist" in proc.stderr
    assert "Traceback" not in proc.stderr


CHAIN = [("G1", [], "src/a.py"), ("G2", [], "src/b.py"), ("G3", ["G1"], "src/c.py"),
         ("G4", ["G2"], "src/d.py"), ("G5", ["G3"], "src/e.py")]


def test_spending_cap_stops_after_the_wave_in_flight_and_resume_with_a_higher_cap_finishes(
        tmp_path):
    """Waves cost 4, 4 and 2 calls; a cap of 7 calls is reached in wave 2."""
    root = project(tmp_path / "p", CHAIN)
    files = {g: p for g, _, p in CHAIN}
    cap = 7 * CALL_USD
    with FakeModelServer(responder=TwoTurns(files)) as server:
        proc = run(root, server, "--max-cost", f"{cap}")
    assert proc.returncode == 1, proc.stderr
    result = proc.json
    assert result["stop_reason"] == "cost_cap"
    statuses = {g: v["status"] for g, v in result["groups"].items()}
    assert statuses["G1"] == statuses["G2"] == "complete"
    assert statuses["G3"] in ("complete", "partial") and statuses["G4"] in ("complete",
                                                                            "partial")
    assert statuses["G5"] == "blocked" and "spending cap" in result["groups"]["G5"]["error"]
    assert "G5" not in server.responder.groups  # no worker started after the cap
    spent = result["cost_usd"]
    assert cap <= spent <= cap + 2 * CALL_USD + 1e-9  # at most the calls in flight
    assert any("spending cap" in w for w in result["warnings"])
    assert "Spending cap: $" in proc.stderr  # the pre-run summary

    with FakeModelServer(responder=TwoTurns(files)) as server:
        proc = run(root, server, "--resume", "--max-cost", f"{20 * CALL_USD}")
    assert proc.returncode == 0, proc.stderr
    assert proc.json["status"] == "complete"
    assert "G5" in server.responder.groups and "G1" not in server.responder.groups


class RateLimited(TwoTurns):
    """Every turn of every group is refused five times (429, retry-after) before it works."""

    def __init__(self, files: dict[str, str]) -> None:
        super().__init__(files)
        self.refused: dict[tuple[str, int], int] = {}

    def __call__(self, request: RecordedRequest) -> Reply | Error:
        key = (group_of(request), turns_done(request))
        with self.lock:
            count = self.refused.get(key, 0)
            if count < 5:
                self.refused[key] = count + 1
                return Error(429, "slow down", headers={"retry-after": "0.01"})
        return super().__call__(request)


def test_a_storm_of_rate_limits_across_four_workers_completes(tmp_path):
    four = [("G1", [], "src/a.py"), ("G2", [], "src/b.py"), ("G3", [], "src/c.py"),
            ("G4", [], "src/d.py")]
    root = project(tmp_path / "p", four)
    model = RateLimited({g: p for g, _, p in four})
    with FakeModelServer(responder=model) as server:
        proc = run(root, server)
    assert proc.returncode == 0, proc.stderr
    assert proc.json["status"] == "complete"
    assert sum(model.refused.values()) == 40
    assert len(server.requests) == 40 + 2 * 4
