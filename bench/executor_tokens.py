"""What an executor sends its model: request tokens per call and per finished group.

The same one-group task (write one file, then report) runs through `agentrun run` against the
fake model server on 127.0.0.1: with the built-in loop, with the Claude Code CLI
(`--executor claude-code`) and with the Codex CLI (`--executor codex`, which the server answers
in the Responses API). The server's own record of every request body is counted with the same
tokenizer for all, so the figures compare what each executor puts in front of the model
(system prompt, tool definitions, history), not what any one reports.

    .venv/bin/python bench/executor_tokens.py [--claude DIR] [--codex DIR]
    # DIR holds the `claude` / `codex` binary
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from fake_model_server import FakeModelServer, RecordedRequest, Reply  # noqa: E402
from gitutil import init_repo  # noqa: E402
from runkit import STATE_MD, spec_text  # noqa: E402

from agentrun.providers.tokens import estimate_tokens  # noqa: E402

SPEC = "SPEC-1"
FILE = "src/alpha.txt"
REPORT = {"status": "complete", "summary": "wrote the file", "criteria_met": ["every file exists"],
          "deviations": []}


def builtin_model(request: RecordedRequest) -> Reply:
    turns = sum(1 for m in request.body["messages"] if m["role"] == "assistant")
    if turns == 0:
        return Reply(tool_calls=[{"name": "write_file",
                                  "arguments": {"path": FILE, "content": "made\n"}}])
    return Reply(tool_calls=[{"name": "submit_result", "arguments": REPORT}])


def cli_model(request: RecordedRequest) -> Reply:
    body = request.body
    if not body.get("tools"):
        return Reply(text="ok")
    if len(body["messages"]) == 1:
        cwd = json.dumps(body).split("orking directory: ", 1)[1].split("\\n", 1)[0]
        return Reply(tool_calls=[{"name": "Write", "arguments": {
            "file_path": f"{cwd}/{FILE}", "content": "made\n"}}])
    return Reply(text=f"Done.\n```json\n{json.dumps(REPORT)}\n```")


def codex_model(request: RecordedRequest) -> Reply:
    said = json.dumps(request.body.get("input") or [])
    if "function_call_output" not in said:
        return Reply(tool_calls=[{"name": "exec_command", "arguments": {
            "cmd": f"mkdir -p src && printf 'made\\n' > {FILE}"}}])
    return Reply(text=f"Done.\n```json\n{json.dumps(REPORT)}\n```")


MODELS = {"builtin": builtin_model, "claude-code": cli_model, "codex": codex_model}


def run(executor: str, cli_dir: str | None) -> list[int]:
    """Request tokens of every model call of one run with `executor`."""
    model = MODELS[executor]
    with tempfile.TemporaryDirectory() as tmp, FakeModelServer(responder=model) as server:
        root = init_repo(Path(tmp) / "p", {
            ".specflow/STATE.md": STATE_MD.format(spec=SPEC),
            f".specflow/specs/{SPEC}.md": spec_text(SPEC, [("G1", [], FILE)]),
            ".gitignore": ".specflow/runs/\n"})
        env = {**os.environ, "ANTHROPIC_BASE_URL": server.anthropic_base_url,
               "ANTHROPIC_API_KEY": "bench-key", "OPENAI_BASE_URL": server.openai_base_url,
               "OPENAI_API_KEY": "bench-key"}
        if cli_dir:
            env["PATH"] = f"{cli_dir}{os.pathsep}{env['PATH']}"
        provider, name = ("openai", "gpt-5") if executor == "codex" else \
            ("anthropic", "claude-sonnet-4-6")
        proc = subprocess.run([sys.executable, "-m", "agentrun", "run", SPEC, "--yes", "--json",
                               "--provider", provider, "--model", name,
                               "--executor", executor, "--mode", "orchestrated", "--no-review"],
                              cwd=root, env=env, capture_output=True, text=True, timeout=600)
        status = json.loads(proc.stdout).get("status") if proc.stdout.strip() else None
        if status != "complete":
            sys.exit(f"{executor}: the run ended {status or proc.returncode}: "
                     f"{proc.stderr[-500:]}")
        return [estimate_tokens(r.raw.decode(), "claude-sonnet-4-6").tokens
                for r in server.requests if r.body and r.body.get("tools")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag, folder in (("--claude", "claude-code"), ("--codex", "codex")):
        default = Path.home() / f".cache/agentrun-tests/{folder}/node_modules/.bin"
        parser.add_argument(flag, default=str(default) if default.exists() else None)
    args = parser.parse_args()
    rows = [("builtin", run("builtin", None))]
    for executor, exe, given in (("claude-code", "claude", args.claude),
                                 ("codex", "codex", args.codex)):
        if given or shutil.which(exe):
            rows.append((executor, run(executor, given)))
        else:
            print(f"{executor}: the `{exe}` CLI is not installed (pass --{exe} DIR)")
    print(f"{'executor':<12} {'calls':>5} {'tokens/call':>12} {'tokens/group':>13}")
    for name, calls in rows:
        print(f"{name:<12} {len(calls):>5} {sum(calls) // max(1, len(calls)):>12,} "
              f"{sum(calls):>13,}")


if __name__ == "__main__":
    main()
