"""What an executor sends its model: request tokens per call and per finished group.

The same one-group task (write one file, then report) runs twice through `agentrun run` against
the fake Anthropic server on 127.0.0.1: once with the built-in loop, once with the Claude Code
CLI (`--executor claude-code`). The server's own record of every request body is counted with
the same tokenizer for both, so the figures compare what each executor puts in front of the
model (system prompt, tool definitions, history), not what either one reports.

    .venv/bin/python bench/executor_tokens.py [--claude DIR]   # DIR holds the `claude` binary
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


def run(executor: str, claude_dir: str | None) -> list[int]:
    """Request tokens of every model call of one run with `executor`."""
    model = cli_model if executor == "claude-code" else builtin_model
    with tempfile.TemporaryDirectory() as tmp, FakeModelServer(responder=model) as server:
        root = init_repo(Path(tmp) / "p", {
            ".specflow/STATE.md": STATE_MD.format(spec=SPEC),
            f".specflow/specs/{SPEC}.md": spec_text(SPEC, [("G1", [], FILE)]),
            ".gitignore": ".specflow/runs/\n"})
        env = {**os.environ, "ANTHROPIC_BASE_URL": server.anthropic_base_url,
               "ANTHROPIC_API_KEY": "bench-key"}
        if claude_dir:
            env["PATH"] = f"{claude_dir}{os.pathsep}{env['PATH']}"
        proc = subprocess.run([sys.executable, "-m", "agentrun", "run", SPEC, "--yes", "--json",
                               "--provider", "anthropic", "--model", "claude-sonnet-4-6",
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
    default = Path.home() / ".cache/agentrun-tests/claude-code/node_modules/.bin"
    parser.add_argument("--claude", default=str(default) if default.exists() else None)
    args = parser.parse_args()
    rows = [("builtin", run("builtin", None))]
    if args.claude or shutil.which("claude"):
        rows.append(("claude-code", run("claude-code", args.claude)))
    else:
        print("claude-code: the `claude` CLI is not installed (pass --claude DIR)")
    print(f"{'executor':<12} {'calls':>5} {'tokens/call':>12} {'tokens/group':>13}")
    for name, calls in rows:
        print(f"{name:<12} {len(calls):>5} {sum(calls) // max(1, len(calls)):>12,} "
              f"{sum(calls):>13,}")


if __name__ == "__main__":
    main()
