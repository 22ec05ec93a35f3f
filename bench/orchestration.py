"""What orchestration costs: wall time of a parallel run against its critical path.

Builds a throwaway git repository of ~2,000 small committed files with a spec of N independent
task groups, then runs `python -m agentrun run ... --json` in a subprocess, as a user does:

1. orchestrated, scripted provider: N workers in one wave, each making `--calls` model calls
   (write, read, write, read, ..., submit_result) that each take `--latency` seconds;
2. single mode on the same spec: one executor making all N x calls model calls in sequence;
3. orchestrated with `--provider anthropic` through the real SDK against the fake model server
   on 127.0.0.1 (same latency per call), so the workers' processes preload a real SDK.

Everything per worker is derived from the run record: the orchestrator's events
(`.specflow/runs/<id>/events.ndjson`, timestamps `t`) and each worker's progress file. Prints
figures only; the goals of issue 5 are shown next to them.

    .venv/bin/python bench/orchestration.py [--workers 8] [--latency 0.2] [--files 2000]
                                            [--calls 5] [--no-single] [--no-sdk] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # the fake model server lives with the tests

from fake_model_server import FakeModelServer, RecordedRequest, Reply  # noqa: E402

SPEC_ID = "SPEC-BENCH"
USAGE = {"input_tokens": 1500, "output_tokens": 120, "cache_read_tokens": 800,
         "cache_write_tokens": 200}
GOAL_EFFICIENCY = 0.85
GOAL_WORKER_OVERHEAD_S = 0.5
GROUP_IN_PROMPT = re.compile(r"task group\(s\) \*\*([^*]+)\*\*")


# -- the project ------------------------------------------------------------------------------

def repo_file(i: int) -> str:
    return f"pkg{i % 20}/mod{i % 7}/file{i}.txt"


def spec_text(groups: int) -> str:
    rows = "\n".join(f"| G{g} | Create `out/g{g}/result.txt` and `out/g{g}/notes.txt` | — |"
                     for g in range(1, groups + 1))
    return f"""---
id: {SPEC_ID}
type: feature
status: audited
complexity: small
---
# {SPEC_ID}: Orchestration benchmark

## Context

A repository of small text files.

## Task

Each group writes its own two files.

## Requirements

Each group creates its own files under `out/`.

## Acceptance Criteria

- [ ] every group's files exist

## Implementation Tasks

### Task Groups

| Group | Tasks | Dependencies |
|-------|-------|--------------|
{rows}
"""


def tool_turn(group: int, k: int, files: int) -> dict[str, Any]:
    """The k-th tool call of a group: write, read back, write notes, read a repository file."""
    kind = k % 4
    if kind == 0:
        call = {"name": "write_file", "arguments": {
            "path": f"out/g{group}/result.txt", "content": f"group {group} step {k}\n"}}
    elif kind == 1:
        call = {"name": "read_file", "arguments": {"path": f"out/g{group}/result.txt"}}
    elif kind == 2:
        call = {"name": "write_file", "arguments": {
            "path": f"out/g{group}/notes.txt", "content": f"notes of group {group}\n"}}
    else:
        call = {"name": "read_file", "arguments": {"path": repo_file((group * 97 + k) % files)}}
    return {"tool_calls": [call]}


def submit_turn(summary: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "submit_result", "arguments": {
        "status": "complete", "summary": summary,
        "criteria_met": ["every group's files exist"], "deviations": []}}]}


def group_turns(group: int, calls: int, files: int) -> list[dict[str, Any]]:
    """`calls` model turns: calls-1 tool-using turns, then submit_result."""
    return [tool_turn(group, k, files) for k in range(calls - 1)] + \
        [submit_turn(f"group {group} done")]


def make_script(groups: int, calls: int, files: int, latency: float) -> dict[str, Any]:
    """Per-group lists for orchestrated runs; one spec-executor list with every group's turns
    (the same number of model calls, the last one submitting) for single mode."""
    per_group = {f"G{g}": group_turns(g, calls, files) for g in range(1, groups + 1)}
    single: list[dict[str, Any]] = []
    for g in range(1, groups + 1):
        turns = [tool_turn(g, k, files) for k in range(calls - 1)]
        turns.append(tool_turn(g, 1, files) if g < groups else submit_turn("all groups done"))
        single += turns
    for turn in [*single, *(t for ts in per_group.values() for t in ts)]:
        turn["latency_s"] = latency
        turn["usage"] = dict(USAGE)
    return {"groups": per_group, "agents": {"spec-executor": single}}


STATE_MD = f"""# SpecFlow State

## Current Position

- **Active Specification:** {SPEC_ID}
- **Status:** audited

## Execution Status

| Spec | Run | Mode | Progress | Updated |
|------|-----|------|----------|---------|

## Warnings

| Date | Specification | Warning |
|------|---------------|---------|
"""


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def build_template(root: Path, files: int, groups: int, calls: int, latency: float) -> None:
    """The project every run starts from (copied per run)."""
    root.mkdir(parents=True)
    for i in range(files):
        path = root / repo_file(i)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"file {i}\n" + "".join(f"line {n} of file {i}\n" for n in range(20)))
    extra = {
        ".gitignore": ".specflow/runs/\n",
        "README.md": "# benchmark project\n",
        ".specflow/PROJECT.md": "# Project\n\nA benchmark fixture.\n",
        ".specflow/STATE.md": STATE_MD,
        f".specflow/specs/{SPEC_ID}.md": spec_text(groups),
        ".specflow/script.yaml": yaml.safe_dump(make_script(groups, calls, files, latency),
                                                sort_keys=False),
    }
    for rel, text in extra.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "init", "-q", "-b", "main")
    for key, value in (("user.name", "bench"), ("user.email", "bench@example.invalid"),
                       ("commit.gpgsign", "false")):
        git(root, "config", key, value)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")


# -- running ----------------------------------------------------------------------------------

@dataclass
class Run:
    label: str
    wall_s: float
    launched: float  # time.time() just before the subprocess started
    exited: float
    exit_code: int
    result: dict[str, Any]
    events: list[dict[str, Any]]
    progress: dict[str, list[dict[str, Any]]]  # batch -> the worker's progress events
    stderr: str
    requests: int = 0  # model requests the fake server answered (SDK run)
    critical_path_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    def first(self, kind: str, **match: Any) -> dict[str, Any] | None:
        return next((e for e in self.events if e["type"] == kind and
                     all(e.get(k) == v for k, v in match.items())), None)

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]


def run_cli(project: Path, label: str, args: list[str], env_extra: dict[str, str],
            timeout: float) -> Run:
    env = {k: v for k, v in os.environ.items() if k not in (
        "AGENTRUN_DEBUG", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL",
        "OPENAI_BASE_URL", "AGENTRUN_PROVIDER", "AGENTRUN_MODEL")}
    env.update({"CI": "1", **env_extra})
    launched = time.time()
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "agentrun", "run", SPEC_ID, *args, "--yes",
                           "--json"], cwd=project, env=env, capture_output=True, text=True,
                          timeout=timeout)
    wall = time.perf_counter() - start
    exited = time.time()
    try:
        result = json.loads(proc.stdout)
    except ValueError:
        raise SystemExit(f"{label}: agentrun printed no JSON (exit {proc.returncode}):\n"
                         f"{proc.stderr[-3000:]}") from None
    run_dir = Path(result["run_dir"])
    events = [json.loads(line) for line in
              (run_dir / "events.ndjson").read_text().splitlines() if line.strip()]
    progress = {}
    for wdir in sorted((run_dir / "workers").iterdir()):
        path = wdir / "progress.ndjson"
        progress[wdir.name] = ([json.loads(x) for x in path.read_text().splitlines() if x]
                               if path.exists() else [])
    run = Run(label, wall, launched, exited, proc.returncode, result, events, progress,
              proc.stderr)
    if proc.returncode != 0 or result.get("status") != "complete":
        bad = {g: (v.get("status"), v.get("error")) for g, v in result.get("groups", {}).items()
               if v.get("status") != "complete"}
        run.notes.append(f"run ended {result.get('status')} (exit {proc.returncode}): {bad}")
    return run


def fresh_copy(template: Path, work: Path, name: str) -> Path:
    target = work / name
    shutil.copytree(template, target, symlinks=True)
    return target


def anthropic_responder(groups: int, calls: int, files: int, latency: float):
    """Answer each Messages request by its group (named in the first user message) and by how
    many assistant turns the conversation already has."""
    turns = {f"G{g}": group_turns(g, calls, files) for g in range(1, groups + 1)}

    def respond(request: RecordedRequest) -> Reply:
        body = request.body or {}
        messages = body.get("messages") or []
        first = messages[0]["content"] if messages else ""
        text = first if isinstance(first, str) else " ".join(
            b.get("text", "") for b in first if isinstance(b, dict))
        found = GROUP_IN_PROMPT.search(text)
        group = found.group(1).split(",")[0].strip() if found else ""
        done = sum(1 for m in messages if m.get("role") == "assistant")
        script = turns.get(group, [])
        if done >= len(script):
            return Reply(text="nothing left to do", usage=USAGE, delay_s=latency)
        return Reply(tool_calls=script[done]["tool_calls"], usage=USAGE, delay_s=latency)

    return respond


# -- analysis ---------------------------------------------------------------------------------

def seconds(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


@dataclass
class WorkerFigures:
    batch: str
    spawn_gap_s: float | None  # previous worker_start (or wave_start) -> this worker_start
    startup_s: float | None  # worker_start -> the worker's first progress event
    agent_s: float | None  # first progress event -> the worker's "done" event
    collect_s: float | None  # "done" -> the orchestrator's worker_result
    merge_s: float | None  # previous merge (or last worker_result) -> this worker's merge


def per_worker(run: Run) -> list[WorkerFigures]:
    starts = run.all("worker_start")
    results = {e["batch"]: e for e in run.all("worker_result")}
    merges = run.all("merged")
    merged_at = {e["batch"]: e["t"] for e in merges}
    last_result = max((e["t"] for e in results.values()), default=None)
    wave_start = run.first("wave_start")
    out = []
    prev = wave_start["t"] if wave_start else None
    for ev in starts:
        batch = ev["batch"]
        prog = run.progress.get(batch, [])
        first = prog[0]["t"] if prog else None
        done = next((p["t"] for p in prog if p.get("type") == "done"), None)
        res = results.get(batch)
        out.append(WorkerFigures(batch, seconds(prev, ev["t"]), seconds(ev["t"], first),
                                 seconds(first, done),
                                 seconds(done, res["t"] if res else None), None))
        prev = ev["t"]
    prev_merge = last_result
    for m in merges:
        for w in out:
            if w.batch == m["batch"]:
                w.merge_s = seconds(prev_merge, merged_at[m["batch"]])
        prev_merge = m["t"]
    return out


@dataclass
class Phases:
    cli_start_s: float  # process launch -> run_start (imports, plan, preflight, lock)
    wave_s: float  # wave_start -> wave_done (worktrees, workers, merges, cleanup)
    spawn_all_s: float  # wave_start -> last worker_start
    workers_s: float  # last worker_start -> last worker_result
    merges_s: float  # last worker_result -> last merge
    cleanup_s: float  # last merge -> wave_done (worktree removal)
    report_s: float  # wave_done -> run_done (spec summary, STATE.md, commit)
    exit_s: float  # run_done -> process exit (final JSON, interpreter shutdown)

    @property
    def fixed_s(self) -> float:
        """Overhead that does not depend on the number of workers or the model's latency."""
        return self.cli_start_s + self.report_s + self.exit_s


def phases(run: Run) -> Phases:
    t = {k: run.first(k)["t"] for k in ("run_start", "wave_start", "wave_done", "run_done")}
    starts = [e["t"] for e in run.all("worker_start")]
    results = [e["t"] for e in run.all("worker_result")]
    merges = [e["t"] for e in run.all("merged")]
    last_start = max(starts) if starts else t["wave_start"]
    last_result = max(results) if results else last_start
    last_merge = max(merges) if merges else last_result
    return Phases(cli_start_s=t["run_start"] - run.launched,
                  wave_s=t["wave_done"] - t["wave_start"],
                  spawn_all_s=last_start - t["wave_start"],
                  workers_s=last_result - last_start,
                  merges_s=last_merge - last_result, cleanup_s=t["wave_done"] - last_merge,
                  report_s=t["run_done"] - t["wave_done"], exit_s=run.exited - t["run_done"])


def median(values: list[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return statistics.median(got) if got else None


def fmt(value: float | None, width: int = 7, unit: str = "") -> str:
    return f"{'—':>{width}}" if value is None else f"{value:{width}.3f}{unit}"


# -- references measured outside a run --------------------------------------------------------

def import_cost(module: str, repeat: int = 3) -> float:
    """Seconds to import `module` in a fresh interpreter (median of `repeat`)."""
    code = (f"import time; t = time.perf_counter(); import {module}; "
            "print(time.perf_counter() - t)")
    samples = [float(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                    text=True, check=True).stdout) for _ in range(repeat)]
    return statistics.median(samples)


def worktree_cost(template: Path, work: Path, repeat: int = 3) -> tuple[float, float]:
    """Median seconds of agentrun's own worktree creation and removal on the bench repo."""
    from agentrun.workspace import create_worktree, remove_worktree

    repo = fresh_copy(template, work, "worktree-ref")
    adds, removes = [], []
    for i in range(repeat):
        start = time.perf_counter()
        wt = create_worktree(repo, work / f"wt-ref-{i}", f"bench/ref{i}", "HEAD")
        adds.append(time.perf_counter() - start)
        start = time.perf_counter()
        remove_worktree(repo, wt)
        removes.append(time.perf_counter() - start)
    return statistics.median(adds), statistics.median(removes)


# -- printing ---------------------------------------------------------------------------------

def print_runs(runs: list[Run], orchestrated: list[Run]) -> None:
    print("\nRuns (wall = the user's command, launch to exit)")
    head = (f"{'run':<34}{'wall s':>8}{'crit. path':>11}{'CP/wall':>9}{'fixed s':>9}"
            f"{'efficiency':>11}{'calls':>7}")
    print(head)
    print("-" * len(head))
    for run in runs:
        fixed = phases(run).fixed_s
        cp = run.critical_path_s
        eff = cp / (run.wall_s - fixed) if run.wall_s > fixed else None
        calls = run.requests or sum(g.get("steps", 0) for g in run.result["groups"].values()
                                    ) // (1 if run in orchestrated else
                                          max(1, len(run.result["groups"])))
        print(f"{run.label:<34}{run.wall_s:8.2f}{cp:11.2f}{cp / run.wall_s:9.2f}{fixed:9.2f}"
              f"{fmt(eff, 11)}{calls:7d}")
    print("efficiency = critical path / (wall - fixed overhead); fixed = CLI start-up to "
          "run_start + report + exit.")
    for run in runs:
        for note in run.notes:
            print(f"  ! {run.label}: {note}")


def print_phases(runs: list[Run]) -> None:
    print("\nWhere the time goes (seconds, from the run's events)")
    cols = ("cli→run_start", "spawn all", "workers", "merges", "cleanup", "report", "exit",
            "wave total")
    print(f"{'run':<34}" + "".join(f"{c:>14}" for c in cols))
    for run in runs:
        p = phases(run)
        vals = (p.cli_start_s, p.spawn_all_s, p.workers_s, p.merges_s, p.cleanup_s,
                p.report_s, p.exit_s, p.wave_s)
        print(f"{run.label:<34}" + "".join(f"{v:14.3f}" for v in vals))
    print("spawn all = wave_start → last worker_start (worktrees are created one after another "
          "before each worker starts); workers = last worker_start → last worker_result.")


def print_workers(run: Run, latency: float, calls: int) -> None:
    figures = per_worker(run)
    print(f"\nPer worker: {run.label} (model wait per worker = {calls} x {latency:g} s = "
          f"{calls * latency:.2f} s)")
    head = (f"{'worker':<8}{'gap→start':>11}{'start-up':>10}{'agent':>9}{'agent-wait':>12}"
            f"{'collect':>9}{'merge':>8}")
    print(head)
    print("-" * len(head))
    for w in figures:
        over = None if w.agent_s is None else w.agent_s - calls * latency
        print(f"{w.batch:<8}{fmt(w.spawn_gap_s, 11)}{fmt(w.startup_s, 10)}{fmt(w.agent_s, 9)}"
              f"{fmt(over, 12)}{fmt(w.collect_s, 9)}{fmt(w.merge_s, 8)}")
    print("gap→start: previous worker_start (wave_start for the first) → this worker_start = "
          "spawning the previous worker + this worktree + assignment; start-up: worker_start → "
          "first progress event; agent-wait: agent time beyond the model latency (tools, "
          "snapshot, commit).")


def summarize(run: Run, latency: float, calls: int, wt_add: float, wt_remove: float,
              sdk_import: float | None) -> None:
    figures = per_worker(run)
    gaps_later = [w.spawn_gap_s for w in figures[2:]]
    startup_first = figures[0].startup_s if figures else None
    startup_later = [w.startup_s for w in figures[1:]]
    p = phases(run)
    n = max(1, len(figures))
    gap = median(gaps_later)
    merge = median([w.merge_s for w in figures])
    collect = median([w.collect_s for w in figures])
    agent_extra = median([None if w.agent_s is None else w.agent_s - calls * latency
                          for w in figures])
    per_worker_overhead = sum(v or 0.0 for v in (gap, median(startup_later), merge, collect)) \
        + p.cleanup_s / n
    print(f"\nSummary: {run.label}")
    print(f"  worktree+spawn per worker (median gap, workers 3..{n}) {fmt(gap)} s   "
          f"(worktree add alone, measured directly: {wt_add:.3f} s; remove {wt_remove:.3f} s)")
    if len(figures) > 1 and figures[1].spawn_gap_s is not None and gap is not None:
        print(f"  orchestrator blocked starting the first worker (gap 2 - median) "
              f"{figures[1].spawn_gap_s - gap:7.3f} s")
    print(f"  start-up of worker 1 (worker_start → first progress)    {fmt(startup_first)} s")
    print(f"  start-up of workers 2..{n} (median, max)                 "
          f"{fmt(median(startup_later))} s, "
          f"{fmt(max((s for s in startup_later if s is not None), default=None))} s")
    if sdk_import is not None:
        print(f"  for comparison: `import anthropic` in a fresh interpreter {sdk_import:7.3f} s")
    print(f"  agent time beyond model latency (median)                {fmt(agent_extra)} s")
    print(f"  collect after a worker ends (median)                    {fmt(collect)} s")
    print(f"  merge per worker (median)                               {fmt(merge)} s")
    print(f"  worktree removal per worker (cleanup / workers)         {p.cleanup_s / n:7.3f} s")
    verdict = "meets" if per_worker_overhead <= GOAL_WORKER_OVERHEAD_S else "misses"
    print(f"  per-worker overhead (worktree+spawn, start-up, collect, merge, removal) "
          f"{per_worker_overhead:.3f} s — {verdict} the goal ≤ {GOAL_WORKER_OVERHEAD_S} s")
    serial = (gap or 0.0) * (n - 1) + (merge or 0.0) * n + p.cleanup_s
    print(f"  serial per-worker work in the orchestrator (spawning, merges, removal) "
          f"{serial:.3f} s of a {p.wave_s:.3f} s wave")
    eff = run.critical_path_s / (run.wall_s - p.fixed_s)
    verdict = "meets" if eff >= GOAL_EFFICIENCY else "misses"
    print(f"  parallel efficiency {eff:.2f} — {verdict} the goal ≥ {GOAL_EFFICIENCY} "
          f"(wall {run.wall_s:.2f} s vs CP/{GOAL_EFFICIENCY} + fixed = "
          f"{run.critical_path_s / GOAL_EFFICIENCY + p.fixed_s:.2f} s)")


# -- main -------------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=8, help="independent groups = workers")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per model call")
    parser.add_argument("--files", type=int, default=2000, help="files in the repository")
    parser.add_argument("--calls", type=int, default=5, help="model calls per worker (>= 2)")
    parser.add_argument("--no-single", action="store_true", help="skip the single-mode run")
    parser.add_argument("--no-sdk", action="store_true", help="skip the anthropic SDK run")
    parser.add_argument("--keep", action="store_true", help="keep the projects for inspection")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per run")
    args = parser.parse_args()
    if args.calls < 2 or args.workers < 2:
        parser.error("--calls and --workers must be at least 2")

    work = Path(tempfile.mkdtemp(prefix="agentrun-bench-orch-"))
    try:
        print(f"agentrun orchestration benchmark · python {platform.python_version()} · "
              f"{os.cpu_count()} cores · {args.files} files · {args.workers} workers · "
              f"{args.calls} calls/worker at {args.latency:g} s")
        template = work / "template"
        build_template(template, args.files, args.workers, args.calls, args.latency)
        sdk_import = None if args.no_sdk else import_cost("anthropic")
        wt_add, wt_remove = worktree_cost(template, work)
        if sdk_import is not None:
            print(f"reference: `import anthropic` in a fresh interpreter {sdk_import:.3f} s")
        print(f"reference: worktree add {wt_add:.3f} s, remove {wt_remove:.3f} s on this repo")

        runs: list[Run] = []
        scripted = ["--provider", "scripted", "--script", ".specflow/script.yaml"]
        orch = run_cli(fresh_copy(template, work, "orchestrated"),
                       f"orchestrated, {args.workers} workers, scripted", scripted, {},
                       args.timeout)
        orch.critical_path_s = args.calls * args.latency
        runs.append(orch)
        orchestrated = [orch]
        if not args.no_single:
            single = run_cli(fresh_copy(template, work, "single"), "single mode, scripted",
                             [*scripted, "--mode", "single"], {}, args.timeout)
            single.critical_path_s = args.workers * args.calls * args.latency
            runs.append(single)
        if not args.no_sdk:
            responder = anthropic_responder(args.workers, args.calls, args.files, args.latency)
            with FakeModelServer(responder) as server:
                sdk = run_cli(fresh_copy(template, work, "anthropic"),
                              f"orchestrated, {args.workers} workers, anthropic",
                              ["--provider", "anthropic", "--model", "claude-sonnet-4-6"],
                              {"ANTHROPIC_BASE_URL": server.anthropic_base_url,
                               "ANTHROPIC_API_KEY": "bench-key"}, args.timeout)
                sdk.requests = len(server.requests)
            sdk.critical_path_s = args.calls * args.latency
            runs.append(sdk)
            orchestrated.append(sdk)

        print_runs(runs, orchestrated)
        if not args.no_single:
            speedup = runs[1].wall_s / orch.wall_s
            print(f"orchestrated vs single: {speedup:.2f}x faster "
                  f"({runs[1].wall_s:.2f} s → {orch.wall_s:.2f} s)")
        print_phases(runs)
        for run in orchestrated:
            print_workers(run, args.latency, args.calls)
            summarize(run, args.latency, args.calls, wt_add, wt_remove, sdk_import)
        if args.keep:
            print(f"\nprojects kept in {work}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
