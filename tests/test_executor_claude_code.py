"""Claude Code as the executor: the real `claude` CLI against a fake Anthropic server.

The CLI is installed once into a cache folder (npm, pinned major version; `.ci/run` does it
before the suite). The fake server speaks the streaming Messages API and answers with Claude
Code's own tool names, so the CLI really edits the worktree; agentrun's worker commits, verifies
and merges as for its own loop.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import npmcli
import pytest
from clirun import agentrun
from fake_model_server import Error, FakeModelServer, RecordedRequest, Reply
from gitutil import init_repo, run_git
from otlp_receiver import OtlpReceiver
from runkit import STATE_MD, spec_text

CACHE = Path(os.environ.get("AGENTRUN_TEST_CLAUDE_CACHE")
             or Path.home() / ".cache" / "agentrun-tests" / "claude-code")
PACKAGE = "@anthropic-ai/claude-code@2"
API_KEY = "sk-test-key-kept-by-the-proxy"
SPEC = "SPEC-50"
GROUPS = [("G1", [], "src/alpha.txt"), ("G2", [], "src/beta.txt"),
          ("G3", ["G1", "G2"], "src/gamma.txt")]
USAGE = {"input_tokens": 100, "output_tokens": 20, "cache_read_tokens": 0,
         "cache_write_tokens": 0}
CREATE = re.compile(r"Create `?([\w./-]+\.txt)")
CWD = re.compile(r"[Ww]orking directory: (/[^\s\"\\]+)")


@dataclass
class Task:
    """What a Claude Code request works on: its conversation, the file its task creates ("?"
    when none is named) and the working directory the CLI told the model."""

    messages: list[dict[str, Any]]
    file: str
    cwd: str | None


def asked(request: RecordedRequest) -> Task | None:
    """The task of a tool-carrying request; None for the CLI's side requests (a title)."""
    body = request.body or {}
    if not body.get("tools"):
        return None
    messages = body.get("messages") or []
    first = text_of(messages[0].get("content")) if messages else ""
    target, cwd = CREATE.search(first), CWD.search(json.dumps(body))
    return Task(messages, target.group(1) if target else "?", cwd.group(1) if cwd else None)


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    """The installed CLI's folder (installed on first use; one install across test workers)."""
    return npmcli.installed(CACHE, "claude", PACKAGE, "Claude Code")


def env_for(server: FakeModelServer, claude_dir: Path | None) -> dict[str, str]:
    """The server and key, and a PATH with the CLI in `claude_dir` first (None: without it)."""
    return npmcli.path_for({"ANTHROPIC_BASE_URL": server.anthropic_base_url,
                           "ANTHROPIC_API_KEY": API_KEY}, "claude", claude_dir)


def make_project(root: Path, groups=GROUPS) -> Path:
    return init_repo(root, {
        "README.md": "# fixture\n",
        ".gitignore": ".specflow/runs/\n",
        ".specflow/PROJECT.md": "# Project\n\nA fixture.\n",
        ".specflow/STATE.md": STATE_MD.format(spec=SPEC),
        f".specflow/specs/{SPEC}.md": spec_text(SPEC, groups),
    })


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return " ".join(str(p.get("text", "")) for p in content or [] if isinstance(p, dict))


def report(status: str = "complete", **extra: Any) -> str:
    data = {"status": status, "summary": "wrote the file", "criteria_met": ["every file exists"],
            "deviations": [], **extra}
    return f"Done.\n\n```json\n{json.dumps(data)}\n```\n"


class CliModel:
    """Answers Claude Code as a model would: write the group's file with `Write`, then end
    with the result block. `finals` maps a file to the last messages it ends with instead (a
    CLI that misbehaves), and `errors` to the error or delayed reply its calls get."""

    def __init__(self, finals: dict[str, list[str]] | None = None,
                 errors: dict[str, Error | Reply] | None = None) -> None:
        self.finals, self.errors = finals or {}, errors or {}
        self.ended: dict[str, int] = {}

    def __call__(self, request: RecordedRequest) -> Reply | Error:
        task = asked(request)
        if task is None:  # a side request (a title, a summary): answer briefly
            return Reply(text="ok", usage=USAGE)
        messages, file, cwd = task.messages, task.file, task.cwd
        if file in self.errors:
            return self.errors[file]
        last = messages[-1].get("content") if messages else None
        answered = isinstance(last, list) and any(
            isinstance(p, dict) and p.get("type") == "tool_result" for p in last)
        if file != "?" and cwd and not answered and len(messages) == 1:
            path = f"{cwd}/{file}"
            return Reply(tool_calls=[{"name": "Write", "arguments": {
                "file_path": path, "content": f"made for {file}\n"}}], usage=USAGE)
        if file in self.finals:
            n = self.ended[file] = self.ended.get(file, 0) + 1
            return Reply(text=self.finals[file][min(n, len(self.finals[file])) - 1], usage=USAGE)
        return Reply(text=report(), usage=USAGE)


def run(root: Path, server: FakeModelServer, claude_dir: Path | None, *extra: str,
        executor: str | None = "claude-code", env: dict[str, str] | None = None):
    """`agentrun run` of the fixture spec; `executor=None` leaves the choice to the config."""
    chosen = ["--executor", executor] if executor else []
    return agentrun("run", SPEC, *chosen, "--provider", "anthropic",
                    "--model", "claude-sonnet-4-6", "--yes", "--json", "--no-review", *extra,
                    env={**env_for(server, claude_dir), **(env or {})}, cwd=root, timeout=400)


def test_claude_code_workers_run_an_orchestrated_spec(tmp_path, claude_bin):
    root = make_project(tmp_path / "project")
    with FakeModelServer(responder=CliModel()) as server, OtlpReceiver() as collector:
        proc = run(root, server, claude_bin, "--events", str(tmp_path / "events.ndjson"),
                   env={"OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint})
    assert proc.returncode == 0, proc.stderr
    result = proc.json
    assert result["status"] == "complete"
    assert [set(w["groups"]) for w in result["waves"]] == [{"G1", "G2"}, {"G3"}]
    for gid, _, path in GROUPS:
        assert (root / path).read_text() == f"made for {path}\n"
        group = result["groups"][gid]
        assert group["status"] == "complete" and group["files_created"] == [path]
        assert group["criteria_met"] == ["every file exists"]
        run_git(root, "merge-base", "--is-ancestor", group["commits"][0], "HEAD")
        assert group["usage"]["input_tokens"] > 0
    assert result["cost_usd"] > 0
    assert run_git(root, "status", "--porcelain") == ""
    # each reply's tokens reached the run as they came (the live display, the spending cap)
    events = [json.loads(line) for line in (tmp_path / "events.ndjson").read_text().splitlines()]
    steps = [e for e in events if e["type"] == "agent_step" and e.get("batch") == "G1"]
    assert steps and sum(e.get("usage", {}).get("input_tokens", 0) for e in steps) == \
        result["groups"]["G1"]["usage"]["input_tokens"]
    # the CLI called its model through the worker's key proxy: the server got the real key,
    # and no request body (tool results included) and no file the run wrote holds it
    tooled = [r for r in server.requests if (r.body or {}).get("tools")]
    assert tooled and {t["name"] for t in tooled[0].body["tools"]} >= {"Write", "Bash"}
    assert all(r.headers.get("x-api-key") == API_KEY for r in server.requests)
    assert not [r.path for r in server.requests if API_KEY.encode() in r.raw]
    written = [p for d in (".specflow/runs", ".specflow/execution") for p in
               (root / d).rglob("*") if p.is_file()]
    assert [str(p) for p in written if API_KEY.encode() in p.read_bytes()] == []
    # the run's trace goes on in each worker: the CLI's model calls (read from its stream,
    # with their tokens) and tool calls are spans of its attempt, under the group's span
    spans = {s.span_id: s for s in collector.spans}
    assert {s.trace_id for s in spans.values()} == {result["trace_id"]}
    for gid in ("G1", "G2", "G3"):
        group = next(s for s in spans.values() if s.name == f"group {gid}")
        attempt = next(s for s in spans.values() if s.parent_id == group.span_id)
        assert attempt.name.startswith("invoke_agent") and \
            attempt["agentrun.executor"] == "claude-code"
        inside = [s for s in spans.values() if s.parent_id == attempt.span_id]
        calls = [s for s in inside if s.name.startswith("chat")]
        assert {c["gen_ai.provider.name"] for c in calls} == {"anthropic"}
        assert sum(c["gen_ai.usage.input_tokens"] for c in calls) == \
            result["groups"][gid]["usage"]["input_tokens"]
        assert [s["gen_ai.tool.name"] for s in inside if s.name.startswith("execute_tool")] \
            == ["Write"]


def test_a_missing_result_gets_one_follow_up_in_the_same_session(tmp_path, claude_bin):
    """One run, two groups: G1's CLI never reports, even when asked again: not complete. The
    file it wrote is kept as partial work (the rule for any attempt that fails after writing),
    with the reason. G2's CLI reports late, after the follow-up: accepted, complete."""
    root = make_project(tmp_path / "project", GROUPS[:2])
    model = CliModel(finals={"src/alpha.txt": ["All done, the file is written."],
                             "src/beta.txt": ["The file is written.", report()]})
    with FakeModelServer(responder=model) as server:
        proc = run(root, server, claude_bin, "--retries", "0")
    assert proc.returncode == 1, proc.stderr  # G1 did not complete
    never, late = proc.json["groups"]["G1"], proc.json["groups"]["G2"]
    assert never["status"] == "partial" and never["files_created"] == ["src/alpha.txt"]
    assert never["stop_reason"] == "no_result" and "no fenced JSON block" in never["error"]
    assert model.ended["src/alpha.txt"] == 2  # the follow-up in the same session got none
    assert late["status"] == "complete" and (root / "src/beta.txt").exists()
    assert model.ended["src/beta.txt"] == 2  # accepted from the follow-up
    resumed = [r for r in server.requests if "Your result could not be read"
               in json.dumps((r.body or {}).get("messages", []))]
    # each follow-up continued its conversation
    assert len(resumed) == 2 and all(len(r.body["messages"]) > 2 for r in resumed)


def test_a_cli_error_and_a_timeout_fail_their_groups(tmp_path, claude_bin):
    """One run, two groups: G1's CLI gets an API error, G2's model never answers in time."""
    root = make_project(tmp_path / "project", GROUPS[:2])
    model = CliModel(errors={"src/alpha.txt": Error(400, "model zzz-4711 is unknown"),
                             "src/beta.txt": Reply(text="...", delay_s=60)})
    with FakeModelServer(responder=model) as server:
        proc = run(root, server, claude_bin, "--retries", "0", "--worker-timeout", "8")
    assert proc.returncode == 1, proc.stderr
    error, slow = proc.json["groups"]["G1"], proc.json["groups"]["G2"]
    assert error["status"] == "failed"
    assert "the CLI reported an error" in error["error"]
    assert "zzz-4711" in error["error"]
    assert slow["status"] == "failed" and slow["stop_reason"] == "timeout"


def test_a_missing_cli_stops_the_run_before_any_worker(tmp_path):
    root = make_project(tmp_path / "project")
    with FakeModelServer(responder=CliModel()) as server:
        proc = run(root, server, None)
    assert proc.returncode == 3
    assert "npm install -g @anthropic-ai/claude-code" in proc.json["error"]["hint"]
    assert not server.requests
    assert run_git(root, "worktree", "list").count("\n") == 0  # no worktree was made


def test_claude_code_needs_the_anthropic_provider(tmp_path):
    root = make_project(tmp_path / "project")
    proc = agentrun("run", SPEC, "--executor", "claude-code", "--provider", "openai",
                    "--yes", "--json", env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"},
                    cwd=root)
    assert proc.returncode == 2
    assert "--provider anthropic" in proc.json["error"]["hint"]


def test_an_agent_definition_may_name_the_executor(tmp_path):
    """`executor:` in the workers' agent definition chooses claude-code; a flag still wins."""
    root = make_project(tmp_path / "project")
    packaged = (Path(__file__).parents[1] / "agents/spec-executor-worker.md").read_text()
    override = root / ".specflow/agents/spec-executor-worker.md"
    override.parent.mkdir(parents=True)
    override.write_text(packaged.replace("---\n", "---\nexecutor: claude-code\n", 1))
    run_git(root, "add", "-A")
    run_git(root, "commit", "-qm", "workers run on claude-code")
    with FakeModelServer(responder=CliModel()) as server:
        chosen = run(root, server, None, executor=None)
        flag = run(root, server, None, "--dry-run", executor="builtin")
        override.write_text(packaged.replace("---\n", "---\nexecutor: codez\n", 1))
        run_git(root, "commit", "-qam", "a typo")  # definitions are read from the commit
        wrong = run(root, server, None, "--dry-run", executor="builtin")
    assert chosen.returncode == 3, chosen.stderr  # the definition asked for the missing CLI
    assert "npm install -g @anthropic-ai/claude-code" in chosen.json["error"]["hint"]
    assert flag.returncode == 0, flag.stderr
    assert wrong.returncode == 2, wrong.stderr
    assert "unknown executor 'codez'" in wrong.json["error"]["message"]


def test_a_ci_worker_runs_the_executor_the_config_names(tmp_path, claude_bin):
    """`agentrun worker` (a CI matrix job) works with the config's `executor: claude-code`, as a
    local run does: the CLI writes the file on the batch's branch; without the CLI on PATH the
    job stops (exit 3) before any model call, with the install hint."""
    root = make_project(tmp_path / "project", GROUPS[:1])
    (root / ".specflow/config.yaml").write_text("executor: claude-code\n")
    run_git(root, "add", "-A")
    run_git(root, "commit", "-qm", "workers run on claude-code")
    start = run_git(root, "rev-parse", "HEAD")
    job = ("worker", "--spec", SPEC, "--groups", "G1", "--start-commit", start,
           "--provider", "anthropic", "--model", "claude-sonnet-4-6", "--json")
    with FakeModelServer(responder=CliModel()) as server:
        missing = agentrun(*job, "--out", str(tmp_path / "missing.json"), cwd=root,
                           env=env_for(server, None))
        asked_first, made = len(server.requests), run_git(root, "branch", "--list")
        proc = agentrun(*job, "--out", str(tmp_path / "G1.json"), cwd=root,
                        env=env_for(server, claude_bin), timeout=400)
    assert missing.returncode == 3, missing.stderr
    assert "npm install -g @anthropic-ai/claude-code" in missing.json["error"]["hint"]
    assert asked_first == 0 and made == "* main"  # no call, no branch
    assert proc.returncode == 0, proc.stderr
    result = json.loads((tmp_path / "G1.json").read_text())
    assert result["status"] == "complete" and result["files_created"] == ["src/alpha.txt"]
    # the CLI did the work: its requests carry Claude Code's own tools, not agentrun's
    tools = {t.get("name") for r in server.requests for t in (r.body or {}).get("tools", [])}
    assert "Write" in tools and "write_file" not in tools
    assert run_git(root, "show", f"{result['branch']}:src/alpha.txt") == "made for src/alpha.txt"
