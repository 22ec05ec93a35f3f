"""Codex as the executor: the real `codex` CLI against a fake OpenAI Responses server.

The CLI is installed once into a cache folder (npm, pinned version; `.ci/run` does it before
the suite). The fake server streams the Responses API and answers with Codex's own shell tool
(`exec_command`), so the CLI really edits the worktree; agentrun's worker commits, verifies and
merges as for its own loop. Each run drives several groups at once, each scripted differently,
to keep the number of CLI runs small.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import npmcli
import pytest
from clirun import agentrun
from fake_model_server import Error, FakeModelServer, RecordedRequest, Reply
from gitutil import init_repo, run_git
from otlp_receiver import OtlpReceiver
from runkit import STATE_MD, spec_text

CACHE = Path(os.environ.get("AGENTRUN_TEST_CODEX_CACHE")
             or Path.home() / ".cache" / "agentrun-tests" / "codex")
PACKAGE = "@openai/codex@0.169"
API_KEY = "sk-test-key-kept-by-the-proxy"
MODEL = "gpt-5"
SPEC = "SPEC-60"
GROUPS = [("G1", [], "src/alpha.txt"), ("G2", [], "src/beta.txt"),
          ("G3", ["G1", "G2"], "src/gamma.txt")]
USAGE = {"input_tokens": 100, "output_tokens": 20, "cache_read_tokens": 10,
         "cache_write_tokens": 0}
CREATE = re.compile(r"Create `?([\w./-]+\.txt)")
GROUP_COST = (200 * 1.25 + 40 * 10.0 + 20 * 0.125) / 1e6
REASK = "Your result could not be read"


@pytest.fixture(scope="session")
def codex_bin() -> Path:
    """The installed CLI's folder (installed on first use; one install across test workers)."""
    return npmcli.installed(CACHE, "codex", PACKAGE, "Codex")


def env_for(server: FakeModelServer, codex_dir: Path | None) -> dict[str, str]:
    """The server and key, and a PATH with the CLI in `codex_dir` first (None: without it)."""
    return npmcli.path_for({"OPENAI_BASE_URL": server.openai_base_url,
                           "OPENAI_API_KEY": API_KEY}, "codex", codex_dir)


def make_project(root: Path, groups=GROUPS) -> Path:
    return init_repo(root, {
        "README.md": "# fixture\n",
        ".gitignore": ".specflow/runs/\n",
        ".specflow/PROJECT.md": "# Project\n\nA fixture.\n",
        ".specflow/STATE.md": STATE_MD.format(spec=SPEC),
        f".specflow/specs/{SPEC}.md": spec_text(SPEC, groups),
    })


def report(status: str = "complete") -> str:
    data = {"status": status, "summary": "wrote the file", "criteria_met": ["every file exists"],
            "deviations": []}
    return f"Done.\n\n```json\n{json.dumps(data)}\n```\n"


def said(request: RecordedRequest) -> str:
    """Everything the request's conversation holds, as text."""
    return json.dumps((request.body or {}).get("input") or [])


class CodexModel:
    """Answers Codex as a model would: write the group's file with its shell tool, then end
    with the result block. `finals` maps a file to the last messages it ends with instead (a
    CLI that misbehaves), and `errors` to the error or delayed reply its first call gets."""

    def __init__(self, finals: dict[str, list[str]] | None = None,
                 errors: dict[str, Error | Reply] | None = None) -> None:
        self.finals, self.errors = finals or {}, errors or {}
        self.ended: dict[str, int] = {}

    def __call__(self, request: RecordedRequest) -> Reply | Error:
        body = request.body or {}
        if not body.get("tools"):  # a side request: answer briefly
            return Reply(text="ok", usage=USAGE)
        text = said(request)
        target = CREATE.search(text)
        path = target.group(1) if target else "?"
        if path in self.errors:
            return self.errors[path]
        if "function_call_output" not in text:
            return Reply(tool_calls=[{"name": "exec_command", "arguments": {
                "cmd": f"mkdir -p src && printf 'made for {path}\\n' > {path}"}}], usage=USAGE)
        if path in self.finals:
            n = self.ended[path] = self.ended.get(path, 0) + 1
            return Reply(text=self.finals[path][min(n, len(self.finals[path])) - 1], usage=USAGE)
        return Reply(text=report(), usage=USAGE)


def run(root: Path, server: FakeModelServer, codex_dir: Path | None, *extra: str,
        env: dict[str, str] | None = None):
    return agentrun("run", SPEC, "--executor", "codex", "--provider", "openai",
                    "--model", MODEL, "--yes", "--json", "--no-review", *extra,
                    env={**env_for(server, codex_dir), **(env or {})}, cwd=root, timeout=400)


def test_codex_workers_run_an_orchestrated_spec(tmp_path, codex_bin):
    root = make_project(tmp_path / "project")
    with FakeModelServer(responder=CodexModel()) as server, OtlpReceiver() as collector:
        proc = run(root, server, codex_bin, "--events", str(tmp_path / "events.ndjson"),
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
        # two model calls (the write, the report), each as the fake server counted it
        assert group["usage"]["input_tokens"] == 200
        assert group["usage"]["cache_read_tokens"] == 20
        # Codex reports no cost: the price table's (gpt-5: $1.25/M input, $10/M output,
        # $0.125/M cached input) for the tokens it reported
        assert group["cost_usd"] == pytest.approx(GROUP_COST, abs=1e-6)
    assert result["cost_usd"] == pytest.approx(3 * GROUP_COST, abs=1e-6)
    assert run_git(root, "status", "--porcelain") == ""
    # each turn's tokens reached the run as it ended (the live display, the spending cap)
    events = [json.loads(line) for line in (tmp_path / "events.ndjson").read_text().splitlines()]
    steps = [e for e in events if e["type"] == "agent_step" and e.get("batch") == "G1"]
    assert "shell" in {e.get("tool") for e in steps}
    assert sum(e.get("usage", {}).get("input_tokens", 0) for e in steps) == 200
    # the CLI called its model through the worker's key proxy: the server got the real key,
    # and no request body (tool results included) and no file the run wrote holds it
    tooled = [r for r in server.requests if (r.body or {}).get("tools")]
    assert tooled and "exec_command" in {t.get("name") for t in tooled[0].body["tools"]}
    assert all(r.path == "/v1/responses" for r in server.requests)
    assert all(r.headers.get("authorization") == f"Bearer {API_KEY}" for r in server.requests)
    assert not [r.path for r in server.requests if API_KEY.encode() in r.raw]
    written = [p for d in (".specflow/runs", ".specflow/execution") for p in
               (root / d).rglob("*") if p.is_file()]
    assert [str(p) for p in written if API_KEY.encode() in p.read_bytes()] == []
    # the run's trace goes on in each Codex worker: its model calls (metered by the key proxy,
    # with their tokens) and its tool calls are spans of its attempt, under the group's span
    spans = {sp.span_id: sp for sp in collector.spans}
    assert {sp.trace_id for sp in spans.values()} == {result["trace_id"]}
    for gid in ("G1", "G2", "G3"):
        group = next(sp for sp in spans.values() if sp.name == f"group {gid}")
        attempt = next(sp for sp in spans.values() if sp.parent_id == group.span_id)
        assert attempt.name.startswith("invoke_agent") and attempt["agentrun.executor"] == "codex"
        inside = [sp for sp in spans.values() if sp.parent_id == attempt.span_id]
        calls = [sp for sp in inside if sp.name.startswith("chat")]
        assert {c["gen_ai.provider.name"] for c in calls} == {"openai"}
        assert sum(c["gen_ai.usage.input_tokens"] for c in calls) == \
            result["groups"][gid]["usage"]["input_tokens"]
        assert "shell" in {sp["gen_ai.tool.name"] for sp in inside
                           if sp.name.startswith("execute_tool")}


def test_a_missing_result_gets_one_follow_up_in_the_same_session(tmp_path, codex_bin):
    """G1 never reports, even when asked again: not complete, its file kept as partial work
    with the reason. G2 reports when asked: complete."""
    root = make_project(tmp_path / "project", GROUPS[:2])
    model = CodexModel(finals={"src/alpha.txt": ["All done, the file is written."],
                               "src/beta.txt": ["The file is written.", report()]})
    with FakeModelServer(responder=model) as server:
        proc = run(root, server, codex_bin, "--retries", "0")
    assert proc.returncode == 1, proc.stderr
    never, late = proc.json["groups"]["G1"], proc.json["groups"]["G2"]
    assert never["status"] == "partial" and never["files_created"] == ["src/alpha.txt"]
    assert "no fenced JSON block" in never["error"]
    assert model.ended["src/alpha.txt"] == 2  # the follow-up got no block either
    assert late["status"] == "complete" and (root / "src/beta.txt").exists()
    # three model calls, counted once: the resumed session reports the first run's again
    assert never["usage"]["input_tokens"] == late["usage"]["input_tokens"] == 300
    # the follow-up continued the conversation: the first run's tool call is in its history
    resumed = [r for r in server.requests if REASK in said(r)]
    assert len(resumed) == 2 and all("function_call_output" in said(r) for r in resumed)


def test_a_cli_error_a_timeout_a_stuck_loop_and_a_refusal_fail_their_groups(tmp_path, codex_bin):
    """One run: G1's CLI gets an API error, G2's model never answers in time, G3's runs the
    same failing command again and again (stopped at the third, by the stuck-loop breaker),
    G4's model refuses (a `refusal` content part, which the CLI drops from its events): a
    refusal in the model's words, not asked again, told apart from G1's error."""
    root = make_project(tmp_path / "project", [*GROUPS[:2], ("G3", [], "src/gamma.txt"),
                                               ("G4", [], "src/delta.txt")])
    loop = Reply(tool_calls=[{"name": "exec_command", "arguments": {
        "cmd": "cat /nonexistent/agentrun.txt"}}], usage=USAGE)
    model = CodexModel(errors={"src/alpha.txt": Error(400, "model zzz-4711 is unknown"),
                               "src/beta.txt": Reply(text="...", delay_s=60),
                               "src/gamma.txt": loop,
                               "src/delta.txt": Reply(refusal="I can't help with that file.",
                                                      usage=USAGE)})
    with FakeModelServer(responder=model) as server:
        proc = run(root, server, codex_bin, "--retries", "0", "--worker-timeout", "8")
    assert proc.returncode == 1, proc.stderr
    groups = proc.json["groups"]
    error, slow, stuck, refused = groups["G1"], groups["G2"], groups["G3"], groups["G4"]
    assert error["status"] == "failed" and error["stop_reason"] == "error"
    assert "the CLI reported an error" in error["error"] and "zzz-4711" in error["error"]
    assert slow["status"] == "failed" and slow["stop_reason"] == "timeout"
    assert (stuck["status"], stuck["stop_reason"]) == ("failed", "circuit_breaker")
    assert "stuck: `shell` was called 3 times in a row" in stuck["error"], stuck["error"]
    assert "No such file" in stuck["error"]
    asked = [r for r in server.requests if (r.body or {}).get("tools") and "gamma" in said(r)]
    assert len(asked) == 3  # the fourth call was never made
    assert (refused["status"], refused["stop_reason"]) == ("failed", "refusal")
    assert refused["error"] == "the model refused the task: I can't help with that file."
    asked = [r for r in server.requests if (r.body or {}).get("tools") and "delta" in said(r)]
    assert len(asked) == 1 and REASK not in said(asked[0])  # a refusal is not asked again


def test_a_missing_or_old_cli_stops_the_run_before_any_worker(tmp_path):
    """Config `executor: codex` chooses it; without the CLI, or with one too old, the run
    stops before any worktree with the install command."""
    root = make_project(tmp_path / "project")
    (root / ".specflow/config.yaml").write_text("executor: codex\n")
    run_git(root, "add", "-A")
    run_git(root, "commit", "-qm", "workers run on codex")
    old = tmp_path / "old"
    old.mkdir()
    (old / "codex").write_text("#!/bin/sh\necho codex-cli 0.100.0\n")
    (old / "codex").chmod(0o755)
    with FakeModelServer(responder=CodexModel()) as server:
        proc = agentrun("run", SPEC, "--provider", "openai", "--model", MODEL, "--yes",
                        "--json", "--no-review", env=env_for(server, None), cwd=root)
        older = run(root, server, old)
        wrong = agentrun("run", SPEC, "--executor", "codex", "--provider", "anthropic",
                         "--yes", "--json", env={"ANTHROPIC_BASE_URL": server.base_url,
                                                 "ANTHROPIC_API_KEY": "k"}, cwd=root)
    assert proc.returncode == 3, proc.stderr
    assert "`codex`) is not installed" in proc.json["error"]["message"]
    assert "npm install -g @openai/codex" in proc.json["error"]["hint"]
    assert older.returncode == 3, older.stderr
    assert "0.100.0" in older.json["error"]["message"]
    assert "0.169 or later" in older.json["error"]["message"]
    assert "npm install -g @openai/codex" in older.json["error"]["hint"]
    assert not server.requests
    assert run_git(root, "worktree", "list").count("\n") == 0  # no worktree was made
    assert wrong.returncode == 2  # Codex calls OpenAI models
    assert "--provider openai" in wrong.json["error"]["hint"]


def test_a_mistyped_executor_is_named_before_anything_else(tmp_path):
    """The flag's value is checked first: not the finished spec or the missing model key."""
    root = make_project(tmp_path / "project")
    spec = root / f".specflow/specs/{SPEC}.md"
    spec.write_text(spec.read_text().replace("status: audited", "status: done"))
    proc = agentrun("run", SPEC, "--executor", "codx", "--yes", "--json", cwd=root)
    assert proc.returncode == 2, proc.stderr
    assert proc.json["error"]["message"] == "invalid --executor 'codx'"
    assert "builtin, claude-code, codex" in proc.json["error"]["hint"]
