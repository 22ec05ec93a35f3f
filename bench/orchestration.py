"""What orchestration costs: wall time of a parallel run against its critical path.

Builds a throwaway git repository of ~2,000 small committed files with a spec of N independent
task groups, then runs `python -m agentrun run ... --json` in a subprocess, as a user does:

1. orchestrated, scripted provider: N workers in one wave, each making `--calls` model calls
   (write, read, write, read, ..., submit_result) that each take `--latency` seconds;
2. single mode on the same spec: one executor making all N x calls model calls in sequence;
3. orchestrated through a real SDK (`--sdk anthropic`, `openai` or both) against the fake model
   server on 127.0.0.1 (same latency per call), so the workers' processes preload a real SDK.
   The SDK's own import is a one-time cost no ordering can always hide: the figures print it.

Everything per worker is derived from the run record: the orchestrator's events
(`.specflow/runs/<id>/events.ndjson`, timestamps `t`) and each worker's progress file. The
events do not say when a worktree's creation starts, so "worktree" is the gap between two
worker_start events (it includes starting the previous worker: milliseconds once the
forkserver runs) next to a direct measurement on the same repository. Prints figures only, with
the goals next to them (parallel efficiency ≥ 0.85: wall time within 1/0.85 of the critical
path, fixed start-up and report aside). The machine is shared: use --repeat.

`--src DIR` measures the agentrun in DIR (a checkout of another version); `--before DIR`
measures that version too, its runs taking turns with this one's on the same projects, and
prints the two side by side (medians):

    .venv/bin/python bench/orchestration.py --workers 6 --calls 3 --latency 1.5 --no-single \
        --repeat 3 --before /path/to/older/checkout

    .venv/bin/python bench/orchestration.py [--workers 8] [--latency 0.2] [--files 2000]
        [--calls 5] [--repeat 1] [--no-single] [--sdk anthropic,openai] [--no-sdk] [--keep]
        [--dir /dev/shm]
        [--src DIR] [--before DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # the fake model server lives with the tests

from fake_model_server import FakeModelServer, RecordedRequest, Reply  # noqa: E402

SPEC_ID = "SPEC-BENCH"
# 1,000 tokens a call: single mode's 40 calls stay inside the default budget of 100,000
USAGE = {"input_tokens": 600, "output_tokens": 100, "cache_read_tokens": 250,
         "cache_write_tokens": 50}
CORES = os.cpu_count() or 1
GOAL_EFFICIENCY = 0.85
GOAL_WORKER_OVERHEAD_S = 0.5
GROUP_ID = re.compile(r"\bG\d+\b")  # the first one in a worker's task names its group


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
    cpu_s: float | None = None  # CPU seconds of the whole process tree (forkserver included)
    critical_path_s: float = 0.0
    requests: int | None = None  # model requests the fake server answered (SDK runs)
    notes: list[str] = field(default_factory=list)
    sdk: str | None = None  # the real SDK the workers called the fake server through

    def first(self, kind: str) -> dict[str, Any] | None:
        return next((e for e in self.events if e["type"] == kind), None)

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]

    @property
    def model_calls(self) -> int:
        """Model turns the workers reported (one `step` progress event each)."""
        return sum(1 for events in self.progress.values() for e in events
                   if e.get("type") == "step")


def become_subreaper() -> bool:
    """Adopt orphaned descendants (Linux), so the forkserver, which outlives the CLI, and the
    workers it reaped count in this process's children's CPU time."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


SUBREAPER = become_subreaper()


def reap_orphans() -> None:
    """Wait for adopted descendants (the forkserver exits once the CLI has exited)."""
    deadline = time.monotonic() + 10
    while SUBREAPER and time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.02)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_cli(project: Path, label: str, args: list[str], env_extra: dict[str, str],
            timeout: float, src: Path = REPO) -> Run:
    """`python -m agentrun run SPEC ... --yes --json` as a user runs it, plus its run record."""
    env = {k: v for k, v in os.environ.items() if k not in (
        "AGENTRUN_DEBUG", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL",
        "OPENAI_BASE_URL", "AGENTRUN_PROVIDER", "AGENTRUN_MODEL")}
    env.update({"CI": "1", "PYTHONPATH": str(src), **env_extra})  # the version measured
    cpu_before = children_cpu()
    launched = time.time()
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "agentrun", "run", SPEC_ID, *args, "--yes",
                           "--json"], cwd=project, env=env, capture_output=True, text=True,
                          timeout=timeout)
    wall = time.perf_counter() - start
    exited = time.time()
    reap_orphans()
    cpu = children_cpu() - cpu_before
    try:
        result = json.loads(proc.stdout)
        run_dir = Path(result["run_dir"])
    except (ValueError, KeyError):
        raise SystemExit(f"{label}: agentrun printed no run result (exit {proc.returncode}):"
                         f"\n{proc.stderr[-3000:]}") from None
    events = [json.loads(line) for line in
              (run_dir / "events.ndjson").read_text().splitlines() if line.strip()]
    progress = {}
    # the orchestrator keeps workers' progress in the git dir, out of every worker's reach
    control = project / ".git" / "agentrun" / "runs" / run_dir.name / "workers"
    for wdir in sorted(control.iterdir() if control.is_dir() else []):
        path = wdir / "progress.ndjson"
        progress[wdir.name] = ([json.loads(x) for x in path.read_text().splitlines() if x]
                               if path.exists() else [])
    run = Run(label, wall, launched, exited, proc.returncode, result, events, progress,
              cpu_s=cpu if SUBREAPER else None)
    if proc.returncode != 0 or result.get("status") != "complete":
        bad = {g: (v.get("status"), v.get("error")) for g, v in result.get("groups", {}).items()
               if v.get("status") != "complete"}
        run.notes.append(f"run ended {result.get('status')} (exit {proc.returncode}): {bad}")
    return run


def fresh_copy(template: Path, work: Path, name: str) -> Path:
    """A copy of the template project. `git status` then refreshes the copy's index (the
    files' inodes changed), as in a user's repository: with a stale index every `git worktree
    add` costs several times more."""
    target = work / name
    shutil.copytree(template, target, symlinks=True)
    git(target, "status", "--porcelain")
    return target


SDK_MODELS = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-4.1"}


def sdk_env(sdk: str, server: FakeModelServer) -> dict[str, str]:
    """The environment pointing `sdk` at the fake server."""
    if sdk == "openai":
        return {"OPENAI_BASE_URL": server.openai_base_url, "OPENAI_API_KEY": "bench-key"}
    return {"ANTHROPIC_BASE_URL": server.anthropic_base_url, "ANTHROPIC_API_KEY": "bench-key"}


def responder(groups: int, calls: int, files: int, latency: float):
    """Answer each request (Messages or Chat Completions) by its group, named in the first user
    message, and by how many assistant turns the conversation already has, after `latency`
    seconds."""
    turns = {f"G{g}": group_turns(g, calls, files) for g in range(1, groups + 1)}

    def respond(request: RecordedRequest) -> Reply:
        messages = (request.body or {}).get("messages") or []
        first = next((m.get("content") for m in messages if m.get("role") == "user"), "")
        text = first if isinstance(first, str) else " ".join(
            str(b.get("text", "")) for b in first or [] if isinstance(b, dict))
        found = GROUP_ID.search(text)
        group = found.group(0) if found else ""
        done = sum(1 for m in messages if m.get("role") == "assistant")
        script = turns.get(group, [])
        if done >= len(script):
            return Reply(text="nothing left to do", usage=USAGE, delay_s=latency)
        return Reply(tool_calls=script[done]["tool_calls"], usage=USAGE, delay_s=latency)

    return respond


# -- analysis ---------------------------------------------------------------------------------

def seconds(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


def median(values: list[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return statistics.median(got) if got else None


@dataclass
class WorkerFigures:
    batch: str
    gap_s: float | None  # previous worker_start (wave_start for the first) -> worker_start
    startup_s: float | None  # worker_start -> the worker's first progress event
    agent_s: float | None  # first progress event -> the worker's "done" event
    first_call_s: float | None  # the first model call's time beyond the model latency
    collect_s: float | None  # "done" -> the orchestrator's worker_result
    merge_s: float | None  # its worker_result or the previous merge, the later -> its merge


def per_worker(run: Run, latency: float) -> list[WorkerFigures]:
    results = {e["batch"]: e["t"] for e in run.all("worker_result")}
    wave_start = run.first("wave_start")
    out = []
    prev = wave_start["t"] if wave_start else None
    for ev in run.all("worker_start"):
        prog = run.progress.get(ev["batch"], [])
        first = prog[0]["t"] if prog else None
        done = next((p["t"] for p in prog if p.get("type") == "done"), None)
        attempt = next((p["t"] for p in prog if p.get("type") == "attempt"), None)
        step = next((p["t"] for p in prog if p.get("type") == "step"), None)
        call = seconds(attempt, step)
        out.append(WorkerFigures(ev["batch"], seconds(prev, ev["t"]), seconds(ev["t"], first),
                                 seconds(first, done), None if call is None else call - latency,
                                 seconds(done, results.get(ev["batch"])), None))
        prev = ev["t"]
    # batches land in group order as soon as they can: a merge starts when its worker's
    # result is in and the previous batch has landed (merged, worktree removed)
    prev_merge: float | None = None
    by_batch = {w.batch: w for w in out}
    for m in run.all("merged"):
        ready = max((t for t in (results.get(m["batch"]), prev_merge) if t is not None),
                    default=None)
        if m["batch"] in by_batch:
            by_batch[m["batch"]].merge_s = seconds(ready, m["t"])
        prev_merge = m["t"]
    return out


@dataclass
class Phases:
    cli_start_s: float  # process launch -> run_start (imports, plan, preflight, run lock)
    spawn_all_s: float  # wave_start -> last worker_start (worktrees + starting workers)
    workers_s: float  # last worker_start -> last worker_result
    merges_s: float  # last worker_result -> last merge
    cleanup_s: float  # last merge -> wave_done (worktree removal)
    report_s: float  # wave_done -> run_done (spec summary, STATE.md, commit)
    exit_s: float  # run_done -> process exit (final JSON, interpreter shutdown)
    wave_s: float  # wave_start -> wave_done

    @property
    def fixed_s(self) -> float:
        """Overhead that depends on neither the number of workers nor the model's latency."""
        return self.cli_start_s + self.report_s + self.exit_s


def phases(run: Run) -> Phases:
    t = {k: (run.first(k) or {}).get("t", run.launched)
         for k in ("run_start", "wave_start", "wave_done", "run_done")}
    starts = [e["t"] for e in run.all("worker_start")]
    last_start = max(starts, default=t["wave_start"])
    last_result = max((e["t"] for e in run.all("worker_result")), default=last_start)
    last_merge = max((e["t"] for e in run.all("merged")), default=last_result)
    return Phases(cli_start_s=t["run_start"] - run.launched,
                  spawn_all_s=last_start - t["wave_start"], workers_s=last_result - last_start,
                  merges_s=last_merge - last_result, cleanup_s=t["wave_done"] - last_merge,
                  report_s=t["run_done"] - t["wave_done"], exit_s=run.exited - t["run_done"],
                  wave_s=t["wave_done"] - t["wave_start"])


def efficiency(run: Run) -> float | None:
    busy = run.wall_s - phases(run).fixed_s
    return run.critical_path_s / busy if busy > 0 else None


def fmt(value: float | None, width: int = 7) -> str:
    return f"{'—':>{width}}" if value is None else f"{value:{width}.3f}"


# -- references measured outside a run --------------------------------------------------------

def import_cost(module: str, repeat: int = 3) -> float:
    """Seconds to import `module` in a fresh interpreter (median of `repeat`)."""
    code = (f"import time; t = time.perf_counter(); import {module}; "
            "print(time.perf_counter() - t)")
    return statistics.median(
        float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True).stdout) for _ in range(repeat))


def worktree_cost(template: Path, work: Path, repeat: int = 3) -> tuple[float, float, float]:
    """Median seconds, on the bench repository, of what a worker's worktree costs: creating it
    without files (the orchestrator, under the worktree lock), checking its files out (the
    worker, in its own process) and removing it (the orchestrator)."""
    from agentrun.worktrees import create_worktree, populate_worktree, remove_worktree

    repo = fresh_copy(template, work, "worktree-reference")
    adds, checkouts, removes = [], [], []
    for i in range(repeat):
        start = time.perf_counter()
        wt = create_worktree(repo, work / f"wt-ref-{i}", f"bench/ref{i}", "HEAD",
                             checkout=False)
        adds.append(time.perf_counter() - start)
        start = time.perf_counter()
        populate_worktree(wt.path)
        checkouts.append(time.perf_counter() - start)
        start = time.perf_counter()
        remove_worktree(repo, wt)
        removes.append(time.perf_counter() - start)
    return statistics.median(adds), statistics.median(checkouts), statistics.median(removes)


# -- printing ---------------------------------------------------------------------------------

def print_runs(groups: list[list[Run]]) -> None:
    print("\nRuns (wall = the user's command, launch to exit; the median run of each kind)")
    head = (f"{'run':<36}{'wall s':>8}{'(min-max)':>13}{'crit. path':>11}{'CP/wall':>9}"
            f"{'fixed s':>9}{'efficiency':>11}{'calls':>7}{'CPU s':>8}{'CPU/cores':>11}")
    print(head)
    print("-" * len(head))
    for runs in groups:
        run = chosen(runs)
        walls = [r.wall_s for r in runs]
        spread = f"{min(walls):5.2f}-{max(walls):<5.2f}" if len(runs) > 1 else ""
        print(f"{run.label:<36}{run.wall_s:8.2f}{spread:>13}{run.critical_path_s:11.2f}"
              f"{run.critical_path_s / run.wall_s:9.2f}{phases(run).fixed_s:9.2f}"
              f"{fmt(efficiency(run), 11)}{run.model_calls:7d}{fmt(run.cpu_s, 8)}"
              f"{fmt(None if run.cpu_s is None else run.cpu_s / CORES, 11)}")
    print("efficiency = critical path / (wall - fixed overhead); fixed = launch → run_start, "
          "plus wave_done → exit (report, JSON, shutdown). CPU s = user+system time of the "
          "whole process tree (CLI, forkserver, workers, git); CPU/cores is the least wall "
          "time that work needs on this machine, whatever the latency.")
    for runs in groups:
        for run in runs:
            for note in run.notes:
                print(f"  ! {run.label}: {note}")
            if run.requests is not None and run.requests != run.model_calls:
                print(f"  ! {run.label}: the server answered {run.requests} requests, the "
                      f"workers reported {run.model_calls} model turns")


def print_phases(runs: list[Run]) -> None:
    print("\nWhere the time goes (seconds, from the run's events)")
    cols = ("launch→start", "spawn all", "workers", "merges", "wt removal", "report", "exit",
            "wave")
    print(f"{'run':<36}" + "".join(f"{c:>13}" for c in cols))
    for run in runs:
        p = phases(run)
        vals = (p.cli_start_s, p.spawn_all_s, p.workers_s, p.merges_s, p.cleanup_s,
                p.report_s, p.exit_s, p.wave_s)
        print(f"{run.label:<36}" + "".join(f"{v:13.3f}" for v in vals))
    print("spawn all = wave_start → last worker_start: each worker's worktree is created, then "
          "the worker started, one after another; workers = last worker_start → last "
          "worker_result; merges = last worker_result → last merge (batches land in group order "
          "while others still run, so this is the tail); wt removal = last merge → wave_done "
          "(the last batch's worktree); exit = run_done → the output pipes close (the "
          "forkserver holds them until it has shut down).")


def print_workers(run: Run, latency: float, calls: int) -> None:
    print(f"\nPer worker: {run.label} (model latency per worker = {calls} x {latency:g} s = "
          f"{calls * latency:.2f} s)")
    head = (f"{'worker':<8}{'gap':>8}{'start-up':>10}{'agent':>8}{'agent-model':>13}"
            f"{'1st call+':>11}{'collect':>9}{'merge':>8}")
    print(head)
    print("-" * len(head))
    for w in per_worker(run, latency):
        extra = None if w.agent_s is None else w.agent_s - calls * latency
        print(f"{w.batch:<8}{fmt(w.gap_s, 8)}{fmt(w.startup_s, 10)}{fmt(w.agent_s, 8)}"
              f"{fmt(extra, 13)}{fmt(w.first_call_s, 11)}{fmt(w.collect_s, 9)}"
              f"{fmt(w.merge_s, 8)}")
    print("gap = previous worker_start (wave_start for G1) → this worker_start: starting the "
          "previous worker, then this worktree (without files) and assignment. start-up = "
          "worker_start → first progress event (the worker checks out its files, reads its "
          "assignment, builds its provider). agent-model = agent time beyond the model "
          "latency (tools, snapshot, commit). 1st call+ = the first model call beyond the "
          "latency (an SDK client is built and its HTTP stack imported). collect = worker "
          "done → worker_result (poll, verify against git). merge = its worker_result or the "
          "previous merge, the later → its merge (includes removing the previous batch's "
          "worktree).")


def first_going(run: Run) -> float | None:
    """Seconds from the wave's start to the first progress event of any of its workers."""
    wave = run.first("wave_start")
    firsts = [events[0]["t"] for events in run.progress.values() if events]
    return min(firsts) - wave["t"] if wave and firsts else None


def summarize(run: Run, latency: float, calls: int, refs: dict[str, float]) -> None:
    figures = per_worker(run, latency)
    n = max(1, len(figures))
    p = phases(run)
    gap = median([w.gap_s for w in figures[2:]])
    going = first_going(run)
    # the wait for the pool server's one-time imports: how much later than the scripted run's
    # (which preloads no SDK) this run's first worker got going
    base = refs.get("first going, scripted")
    pool_wait = None if going is None or base is None or run.sdk is None else going - base
    later = [w.startup_s for w in figures[1:] if w.startup_s is not None]
    agent_extra = median([None if w.agent_s is None else w.agent_s - calls * latency
                          for w in figures])
    merge = median([w.merge_s for w in figures])
    collect = median([w.collect_s for w in figures])
    # a worker queued for the pool's server counts its wait in its start-up: the wait is the
    # SDK's import, told apart below, not a per-worker cost
    startup = median(later)
    own_startup = None if startup is None else max(0.0, startup - max(0.0, pool_wait or 0.0))
    overhead = sum(v or 0.0 for v in (gap, own_startup, collect, merge))
    serial = p.spawn_all_s + p.merges_s + p.cleanup_s

    def line(label: str, *values: float | None) -> None:
        print(f"  {label:<62}" + ", ".join(f"{fmt(v)} s" for v in values))

    print(f"\nSummary: {run.label}")
    line(f"worktree + start a worker (median gap, workers 3..{n})", gap)
    line("  reference: worktree created without files, alone", refs["wt_add"])
    line("wave start → the first worker going (first progress event)", going)
    line("start-up of worker 1 (worker_start → first progress)",
         figures[0].startup_s if figures else None)
    line(f"start-up of workers 2..{n}: median, max", median(later), max(later, default=None))
    line("  reference: checking out a worktree's files, alone", refs["wt_checkout"])
    sdk = run.sdk
    if sdk and f"import {sdk}" in refs:
        line(f"  reference: `import {sdk}` in a fresh interpreter", refs[f"import {sdk}"])
    line("agent time beyond the model latency (median)", agent_extra)
    line("  of it, the first model call (median)",
         median([w.first_call_s for w in figures]))
    line("collect, land (medians): verify; merge + the previous removal", collect, merge)
    line("  reference: worktree removal, alone", refs["wt_remove"])
    verdict = "meets" if overhead <= GOAL_WORKER_OVERHEAD_S else "misses"
    line(f"per-worker overhead ({verdict} the goal ≤ {GOAL_WORKER_OVERHEAD_S} s)", overhead)
    print(f"    = worktree+start, start-up (2..{n}, with the checkout, without the pool "
          "server's wait), collect, land")
    line(f"serial work in the orchestrator, of a {p.wave_s:.2f} s wave", serial)
    print("    = spawn all + merges + worktree removal")
    eff = efficiency(run)
    if eff is not None:
        verdict = "meets" if eff >= GOAL_EFFICIENCY else "misses"
        print(f"  parallel efficiency {eff:.2f}: {verdict} the goal ≥ {GOAL_EFFICIENCY} (wall "
              f"{run.wall_s:.2f} s; the goal needs ≤ CP/{GOAL_EFFICIENCY} + fixed = "
              f"{run.critical_path_s / GOAL_EFFICIENCY + p.fixed_s:.2f} s)")
        if pool_wait is not None and pool_wait > 0:
            rest = run.wall_s - p.fixed_s - pool_wait
            print(f"  of the time lost, {pool_wait:.2f} s is the workers' wait for the "
                  f"pool server's one-time imports (the SDK: see `import {sdk}` above); "
                  f"without it, efficiency {run.critical_path_s / rest:.2f}")
        lost = run.wall_s - p.fixed_s - run.critical_path_s
        needed = lost * GOAL_EFFICIENCY / (1 - GOAL_EFFICIENCY)
        print(f"  with the same {lost:.2f} s lost, the goal is met from a critical path of "
              f"{needed:.1f} s ({needed / calls:.1f} s per model call)")


def chosen(runs: list[Run]) -> Run:
    """The run with the median wall time."""
    return sorted(runs, key=lambda r: r.wall_s)[(len(runs) - 1) // 2]


def compare(groups: list[list[Run]]) -> None:
    """Each kind's medians, the version before beside the one after (`--before`)."""
    print("\nBefore / after (medians of the runs of each version, which took turns)")
    head = (f"{'run':<36}{'wall s':>16}{'efficiency':>16}{'spawn all':>16}{'workers':>16}"
            f"{'wt removal':>16}{'exit':>16}")
    print(head)
    print("-" * len(head))
    pairs = [(b, a) for b, a in zip(groups[0::2], groups[1::2], strict=True)]
    def both(before: list[Run], after: list[Run], figure: Callable[[Run], float | None]) -> str:
        old, new = median([figure(r) for r in before]), median([figure(r) for r in after])
        return f"{fmt(old, 6)} → {fmt(new, 6)}"

    for before, after in pairs:
        label = before[0].label.removesuffix(" (before)")
        figures = (lambda r: r.wall_s, efficiency, lambda r: phases(r).spawn_all_s,
                   lambda r: phases(r).workers_s, lambda r: phases(r).cleanup_s,
                   lambda r: phases(r).exit_s)
        print(f"{label:<36}" + "".join(f"{both(before, after, f):>16}" for f in figures))


# -- main -------------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=8, help="independent groups = workers")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per model call")
    parser.add_argument("--files", type=int, default=2000, help="files in the repository")
    parser.add_argument("--calls", type=int, default=5, help="model calls per worker (>= 2)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each kind (median)")
    parser.add_argument("--no-single", action="store_true", help="skip the single-mode run")
    parser.add_argument("--sdk", default="anthropic",
                        help="the real SDKs to run through, comma-separated: anthropic, openai")
    parser.add_argument("--no-sdk", action="store_true", help="skip the SDK runs")
    parser.add_argument("--keep", action="store_true", help="keep the projects for inspection")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per run")
    parser.add_argument("--dir", type=Path, default=None,
                        help="where to build the projects (default: the system's temp dir; "
                             "/dev/shm takes the disk out of the figures)")
    parser.add_argument("--src", type=Path, default=REPO,
                        help="the agentrun checkout to measure (default: this one)")
    parser.add_argument("--before", type=Path, default=None,
                        help="another checkout to measure too, taking turns, and compare")
    args = parser.parse_args()
    if args.calls < 2 or args.workers < 2 or args.repeat < 1:
        parser.error("--calls and --workers must be at least 2, --repeat at least 1")

    # An installed agentrun has its bytecode compiled (pip does it); a source checkout run
    # with PYTHONDONTWRITEBYTECODE would recompile every module in every process instead.
    versions = [("after", args.src.resolve())] if args.before else [("", args.src.resolve())]
    if args.before:
        versions.insert(0, ("before", args.before.resolve()))
    for _, src in versions:
        if not (src / "agentrun" / "__init__.py").is_file():
            parser.error(f"no agentrun checkout at {src}")
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(src / "agentrun")],
                       check=True)
    work = Path(tempfile.mkdtemp(prefix="agentrun-bench-orch-", dir=args.dir))
    try:
        print(f"agentrun orchestration benchmark · python {platform.python_version()} · "
              f"{os.cpu_count()} cores · load {os.getloadavg()[0]:.2f} · {args.files} files · "
              f"{args.workers} workers · {args.calls} calls/worker at {args.latency:g} s · "
              f"in {work.parent}")
        template = work / "template"
        build_template(template, args.files, args.workers, args.calls, args.latency)
        refs: dict[str, float] = {}
        sdks = [] if args.no_sdk else [s.strip() for s in args.sdk.split(",") if s.strip()]
        if set(sdks) - set(SDK_MODELS):
            parser.error(f"--sdk: choose from {', '.join(SDK_MODELS)}")
        for sdk in sdks:
            refs[f"import {sdk}"] = import_cost(sdk)
            print(f"reference: `import {sdk}` in a fresh interpreter "
                  f"{refs[f'import {sdk}']:.3f} s")
        refs["wt_add"], refs["wt_checkout"], refs["wt_remove"] = worktree_cost(template, work)
        print(f"reference: worktree created without files {refs['wt_add']:.3f} s, its checkout "
              f"{refs['wt_checkout']:.3f} s, removal {refs['wt_remove']:.3f} s (this repository)")

        # the benchmark measures the workers' wave: the end-of-run review is not part of it
        scripted = ["--provider", "scripted", "--script", ".specflow/script.yaml", "--no-review"]
        cp = args.calls * args.latency
        kinds: list[tuple[str, list[str], float, str | None]] = [
            (f"orchestrated, {args.workers} workers, scripted", scripted, cp, None)]
        if not args.no_single:
            kinds.append(("single mode, scripted", [*scripted, "--mode", "single"],
                          args.workers * cp, None))
        for sdk in sdks:
            kinds.append((f"orchestrated, {args.workers} workers, {sdk}",
                          ["--provider", sdk, "--model", SDK_MODELS[sdk], "--no-review"], cp,
                          sdk))
        groups: list[list[Run]] = []
        for label, cli_args, critical, sdk in kinds:
            runs: dict[str, list[Run]] = {name: [] for name, _ in versions}
            for i in range(args.repeat):
                for name, src in versions:  # versions take turns: the same conditions
                    title = f"{label} ({name})" if name else label
                    project = fresh_copy(template, work, f"run-{len(groups)}-{name}{i}")
                    if sdk:
                        answer = responder(args.workers, args.calls, args.files, args.latency)
                        with FakeModelServer(answer) as server:
                            run = run_cli(project, title, cli_args, sdk_env(sdk, server),
                                          args.timeout, src)
                            run.requests = len(server.requests)
                    else:
                        run = run_cli(project, title, cli_args, {}, args.timeout, src)
                    run.critical_path_s, run.sdk = critical, sdk
                    runs[name].append(run)
            groups += runs.values()

        print_runs(groups)
        if args.before:
            compare(groups)
        if not args.no_single:
            orch, single = chosen(groups[0]), chosen(groups[1])
            print(f"orchestrated vs single mode: {single.wall_s / orch.wall_s:.2f}x faster "
                  f"({single.wall_s:.2f} s → {orch.wall_s:.2f} s)")
        print_phases([chosen(runs) for runs in groups])
        for runs in groups:
            run = chosen(runs)
            if run.result.get("mode") == "orchestrated":
                version = run.label.rpartition(" (")[2] if run.label.endswith(")") else ""
                if run.sdk is None:  # the first kind: each version's baseline
                    refs[f"first going, scripted {version}"] = first_going(run) or 0.0
                refs["first going, scripted"] = refs.get(f"first going, scripted {version}",
                                                         0.0)
                print_workers(run, args.latency, args.calls)
                summarize(run, args.latency, args.calls, refs)
        if args.before:
            groups = [g for g in groups if g[0].label.endswith("(after)")]
        print(f"\nload average at the end: {os.getloadavg()[0]:.2f} (the machine is shared; "
              "use --repeat 3 for steadier figures)")
        if args.keep:
            print(f"projects kept in {work}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
