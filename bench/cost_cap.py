"""How far a run goes past its spending cap, per worker, and how long its workers take to stop.

Builds a throwaway repository with a spec of `--waves` waves of `--workers` independent groups
each (every group depends on one of the wave before), and runs `python -m agentrun run --json
--max-cost CAP` in a subprocess, as a user does, with `--provider openai` against the fake
model server on 127.0.0.1: every reply takes `--latency` seconds and reports the same usage,
so every call costs the same. Each worker writes a file per call for `--calls - 1` calls,
then submits. A model that is told to wrap up (older versions asked running workers to) submits
`partial` at once; with `--ignore-wrap-up` it carries on whatever it is told. The cap is set at
`--cap-waves` waves' cost (between one wave's and the whole spec's), or at `--cap-calls`
calls, so it is reached while a wave's workers are in flight.

`--src DIR` runs the agentrun found in DIR (a checkout of another version, e.g. from
`git archive REV | tar -x -C DIR`) instead of this one, to compare before and after.

Prints the cap, what the run spent, the overshoot in USD and in model calls, per worker the
calls answered after the cap was reached, and the stop: from the `cost_cap` event to the last
running worker's result.

    .venv/bin/python bench/cost_cap.py [--workers 4] [--waves 3] [--calls 4] [--latency 0.2]
        [--cap-waves 1.5 | --cap-calls N] [--ignore-wrap-up] [--src DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # the fake model server lives with the tests

from fake_model_server import FakeModelServer, RecordedRequest, Reply  # noqa: E402
from gitutil import init_repo  # noqa: E402
from runkit import STATE_MD, spec_text  # noqa: E402

SPEC_ID = "SPEC-CAP"
MODEL = "fake-model"
USAGE = {"input_tokens": 800, "output_tokens": 200}
PRICING = {MODEL: {"input": 100.0, "output": 100.0}}  # USD per million tokens
CALL_USD = 1000 * 100.0 / 1e6  # $0.10 a call
GROUP_ID = re.compile(r"\bG\d+\b")
WRAP_UP = "reached its spending cap and is stopping"  # in the run's wrap-up message


class Worker:
    """Each group writes one file per call, then submits after `calls` calls (or when told
    to wrap up, if it `obeys`); the time of every call is kept."""

    def __init__(self, calls: int, latency: float, obeys: bool) -> None:
        self.calls, self.latency, self.obeys = calls, latency, obeys
        self.times: list[tuple[str, float]] = []  # (group, when) of every call
        self.lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Reply:
        messages = (request.body or {}).get("messages") or []
        first = next((str(m.get("content")) for m in messages if m.get("role") == "user"), "")
        found = GROUP_ID.search(first)
        group = found.group(0) if found else "G0"
        with self.lock:
            self.times.append((group, time.time()))
        done = sum(1 for m in messages if m.get("role") == "assistant")
        told = self.obeys and any(WRAP_UP in str(m.get("content")) for m in messages)
        if told:
            call = {"name": "submit_result", "arguments": {
                "status": "partial", "summary": "wrapped up", "criteria_met": [],
                "deviations": []}}
        elif done < self.calls - 1:
            call = {"name": "write_file", "arguments": {"path": f"src/{group}_{done}.py",
                                                        "content": f"# {group} {done}\n"}}
        else:
            call = {"name": "submit_result", "arguments": {
                "status": "complete", "summary": "done",
                "criteria_met": ["every file exists"], "deviations": []}}
        return Reply(tool_calls=[call], usage=USAGE, delay_s=self.latency)


def build(root: Path, workers: int, waves: int) -> None:
    groups = []
    for w in range(waves):
        for i in range(workers):
            n = w * workers + i + 1
            deps = [f"G{n - workers}"] if w else []
            groups.append((f"G{n}", deps, f"src/G{n}_0.py"))
    init_repo(root, {
        "README.md": "# bench\n",
        ".gitignore": ".specflow/runs/\n",
        ".specflow/PROJECT.md": "# Project\n",
        ".specflow/STATE.md": STATE_MD.format(spec=SPEC_ID),
        ".specflow/config.yaml": yaml.safe_dump({"pricing": PRICING}),
        f".specflow/specs/{SPEC_ID}.md": spec_text(SPEC_ID, groups),
    })


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--waves", type=int, default=3)
    parser.add_argument("--calls", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--cap-waves", type=float, default=1.5)
    parser.add_argument("--cap-calls", type=float)
    parser.add_argument("--ignore-wrap-up", action="store_true")
    parser.add_argument("--src", type=Path, default=REPO)
    args = parser.parse_args()
    wave_usd = args.workers * args.calls * CALL_USD
    cap = round(args.cap_calls * CALL_USD if args.cap_calls else args.cap_waves * wave_usd, 6)
    model = Worker(args.calls, args.latency, obeys=not args.ignore_wrap_up)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        build(root, args.workers, args.waves)
        with FakeModelServer(responder=model) as server:
            env = {**os.environ, "CI": "1", "OPENAI_BASE_URL": server.openai_base_url,
                   "OPENAI_API_KEY": "bench", "PYTHONPATH": str(args.src.resolve())}
            started = time.monotonic()
            proc = subprocess.run(
                [sys.executable, "-m", "agentrun", "run", SPEC_ID, "--provider", "openai",
                 "--model", MODEL, "--yes", "--json", "--no-review", "--max-retries", "0",
                 "--max-parallel", str(args.workers), "--max-cost", f"{cap}"],
                cwd=root, env=env, capture_output=True, text=True, timeout=600)
            wall = time.monotonic() - started
        if not proc.stdout.strip():
            sys.exit(f"the run printed no result (exit {proc.returncode}):\n{proc.stderr}")
        result = json.loads(proc.stdout)
        events = [json.loads(line) for line in
                  (Path(result["run_dir"]) / "events.ndjson").read_text().splitlines()]
    spent = result["spent_usd"]
    capped = next((e for e in events if e["type"] == "cost_cap"), None)
    print(f"spending cap ({args.src}): {args.workers} workers a wave, {args.waves} waves, "
          f"{args.calls} calls a worker at ${CALL_USD:.2f}, {args.latency:g} s a call, the "
          f"model {'ignores' if args.ignore_wrap_up else 'follows'} a wrap-up message")
    print(f"  one wave costs:   ${wave_usd:.2f}; the whole spec ${wave_usd * args.waves:.2f}")
    print(f"  cap:              ${cap:.2f} ({cap / CALL_USD:g} calls)")
    print(f"  spent:            ${spent:.2f} ({len(model.times)} model calls), exit "
          f"{proc.returncode}, stop_reason {result['stop_reason']}, {wall:.1f} s")
    if capped is None:
        print("  the cap was not reached")
        return
    over = spent - cap
    running = capped["running"]
    after = [g for g, t in model.times if t > capped["t"]]
    print(f"  overshoot:        ${over:.2f} = {over / CALL_USD:.1f} model call(s) "
          f"({len(after)} call(s) answered after the cap was reached, {len(running)} "
          f"worker(s) running then)")
    for batch in running:
        n = after.count(batch)
        group = result["groups"].get(batch, {})
        print(f"    worker {batch}: {n} call(s) after the cap (${n * CALL_USD:.2f}), ended "
              f"{group.get('status')} ({group.get('stop_reason')})")
    ends = [e["t"] for e in events if e["type"] == "worker_result" and e["batch"] in running]
    if ends:
        print(f"  stop:             {max(ends) - capped['t']:.2f} s from the cap to the last "
              f"of {len(running)} running worker(s)' result")
    counts = result["counts"]
    print(f"  groups:           {', '.join(f'{n} {s}' for s, n in sorted(counts.items()))}")


if __name__ == "__main__":
    main()
