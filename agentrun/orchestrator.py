"""The orchestrator: runs a plan's waves with worker processes, verifies, merges, reports.

Deterministic code, no model tokens. Per wave: each batch gets its own worktree and branch from
the current commit and its own worker process; results are validated and checked against git;
completed branches are merged in group order; the failure rules of seed 003 decide what runs
next. STATE.md, the execution state and the run record are written by this one process.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentrun import workspace
from agentrun.errors import CannotStart
from agentrun.fsutil import atomic_write_json, atomic_write_text, relpath
from agentrun.plan import Plan, Wave
from agentrun.project import Project
from agentrun.protocol import (
    BLOCKING,
    Assignment,
    GroupAssignment,
    ProviderSettings,
    Status,
    WorkerLimits,
    WorkerResult,
)
from agentrun.report.execution_state import (
    GroupState,
    RunState,
    WaveState,
    load_state,
    save_state,
    state_path,
)
from agentrun.spec.model import Spec

SHARED_SECTIONS = ("Context", "Task", "Goal Analysis", "Requirements", "Constraints",
                   "Assumptions")
OWN_PATHS = (".specflow/runs/", ".specflow/execution/", ".specflow/STATE.md")
ABORTED_REASON = "the run was aborted after an earlier wave failed"
STOP_GRACE_S = 5.0  # after SIGTERM, how long a worker may take to save its result

Event = dict[str, Any]


@dataclass
class RunOptions:
    provider: ProviderSettings
    limits: WorkerLimits = field(default_factory=WorkerLimits)
    max_parallel: int | None = None
    on_failure: str = "continue"  # continue | abort
    allow_dirty: bool = False
    resume: bool = False
    validation_command: str | None = None
    interactive: bool = False
    use_processes: bool = True
    pricing: dict[str, Any] = field(default_factory=dict)
    ask_continue: Callable[[list[str]], bool] | None = None  # TTY prompt after a failed wave
    warnings: list[str] = field(default_factory=list)  # recorded in STATE.md's Warnings


def now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


class Orchestrator:
    def __init__(self, project: Project, spec: Spec, plan: Plan, options: RunOptions,
                 on_event: Callable[[Event], None] | None = None) -> None:
        self.project = project
        self.spec = spec
        self.plan = plan
        self.options = options
        self.on_event = on_event or (lambda e: None)
        self.cancel = threading.Event()
        self.root = workspace.repo_root(project.root)
        self.run_id = new_run_id()
        self.run_dir = project.runs_dir / self.run_id
        self.state_file = state_path(project.execution_dir, spec.id)
        self.state: RunState | None = None
        self._events_fh = None
        self._commands: dict[str, set[int]] = {}  # batch -> live command process groups
        self._spec_order = {g.id: i for i, g in enumerate(spec.groups)}

    # ------------------------------------------------------------------ preflight
    def preflight(self) -> None:
        """Refuse to start (exit 3) when the repository is not in a state we can work in."""
        branch = workspace.current_branch(self.root)
        if branch is None:
            raise CannotStart("HEAD is detached; a run merges into a branch",
                              hint="check out the branch to merge into, e.g. `git switch main`")
        workspace.head_commit(self.root)  # CannotStart when there is no commit yet
        spec_rel = relpath(self.spec.path, self.root)
        dirty = [p for p in workspace.dirty_paths(self.root, ignore=OWN_PATHS) if p != spec_rel]
        if dirty and not self.options.allow_dirty:
            shown = ", ".join(dirty[:5]) + (f" and {len(dirty) - 5} more" if len(dirty) > 5
                                            else "")
            raise CannotStart(f"uncommitted changes: {shown}",
                              hint="commit or stash them first, or pass --allow-dirty to run "
                                   "anyway (changes to files the spec touches still refuse)")
        touched = set(self.spec.files_to_create) | set(self.spec.files_to_modify)
        touched |= {f for g in self.spec.groups for f in g.files}
        overlap = sorted(set(dirty) & touched)
        if overlap:
            raise CannotStart(f"uncommitted changes to files this spec touches: "
                              f"{', '.join(overlap)}",
                              hint="commit or stash them first; a merge could overwrite them")

    # ------------------------------------------------------------------ run
    def run(self) -> RunState:
        return self._session(self._run_all)

    def _session(self, body: Callable[[], RunState]) -> RunState:
        """Preflight, run lock, signal handlers and the events file around `body`.

        Shared by a local run and by `agentrun aggregate`, which runs no workers.
        """
        self.preflight()
        lock = workspace.RunLock(self.root, self.run_id)
        lock.acquire()
        previous = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                previous[sig] = signal.signal(sig, self._on_signal)
            except ValueError:  # not the main thread: the caller handles signals
                break
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self._events_fh = open(  # noqa: SIM115 - open for the whole run, closed below
                self.run_dir / "events.ndjson", "a", encoding="utf-8")
            return body()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            if self._events_fh:
                self._events_fh.close()
            lock.release()

    def _run_all(self) -> RunState:
        self.state = self._initial_state()
        self._emit({"type": "run_start", "run_id": self.run_id, "spec": self.spec.id,
                    "mode": self.plan.mode, "waves": len(self.plan.waves),
                    "run_dir": str(self.run_dir)})
        self._save(progress=f"Wave 1/{len(self.plan.waves)} (0%)", status="running")
        aborted = False
        for wave in self.plan.waves:
            if self.cancel.is_set():
                break
            if aborted:
                self._skip_wave(wave, ABORTED_REASON)
                continue
            aborted = self._run_wave(wave)
        return self._finish(interrupted=self.cancel.is_set())

    def _on_signal(self, signum, _frame) -> None:
        if self.cancel.is_set():
            return
        self.cancel.set()
        self._emit({"type": "interrupt", "signal": signal.Signals(signum).name})

    def _initial_state(self) -> RunState:
        base = workspace.head_commit(self.root)
        state = RunState(
            run_id=self.run_id, spec_id=self.spec.id, spec_path=relpath(self.spec.path, self.root),
            mode=self.plan.mode, base_commit=base,
            target_branch=workspace.current_branch(self.root), started=now_text(),
            provider=self.options.provider.provider, model=self.options.provider.model,
            waves=[WaveState(w.number, w.label, list(w.groups)) for w in self.plan.waves],
            warnings=list(self.options.warnings))
        titles = {g.id: g.title for g in self.spec.groups}
        for wave in self.plan.waves:
            for batch in wave.batches:
                for gid in batch.ids:
                    state.groups[gid] = GroupState(id=gid, title=titles.get(gid, ""),
                                                   wave=wave.label, batch=batch.id)
        if self.options.resume:
            old = load_state(self.state_file)
            if old is None:
                raise CannotStart(f"nothing to resume: no execution state for {self.spec.id}",
                                  hint="run without --resume to start a new run")
            state.resumed_from = old.run_id
            for gid, prev in old.groups.items():
                if gid in state.groups and prev.status == "complete" and \
                        self._landed(prev):
                    prev.wave = state.groups[gid].wave
                    prev.batch = state.groups[gid].batch
                    state.groups[gid] = prev
        return state

    def _landed(self, group: GroupState) -> bool:
        """A group's work is in history when its merge (or all its commits) reach HEAD."""
        head = workspace.head_commit(self.root)
        refs = [group.merge_commit] if group.merge_commit else group.commits
        if not refs:
            return group.status == "complete"
        return all(workspace.resolve_ref(self.root, c) and
                   workspace.is_ancestor(self.root, c, head) for c in refs)

    # ------------------------------------------------------------------ waves
    def _run_wave(self, wave: Wave) -> bool:
        """Run one wave; returns True when the failure rules abort the run."""
        assert self.state is not None
        wstate = self.state.waves[wave.number - 1]
        wstate.status = "running"
        self.state.current_wave = wave.number
        pct = round(100 * (wave.number - 1) / len(self.plan.waves))
        self._save(progress=f"Wave {wave.number}/{len(self.plan.waves)} ({pct}%)")
        todo = []
        for batch in wave.batches:
            ids = batch.ids
            if all(self.state.groups[g].status == "complete" for g in ids):
                self._emit({"type": "skip", "batch": batch.id, "reason": "already complete"})
                continue
            blockers = self._blockers(ids)
            if blockers:
                for gid in ids:
                    self._set_final(gid, status="blocked",
                                    error=f"dependency {', '.join(blockers)} did not complete")
                self._emit({"type": "blocked", "batch": batch.id, "groups": ids,
                            "by": blockers})
                continue
            todo.append(batch)
        self._emit({"type": "wave_start", "wave": wave.label, "number": wave.number,
                    "batches": [b.id for b in todo]})
        queue = sorted(todo, key=lambda b: self._order(b.ids))

        def land_ready(results: dict[str, WorkerResult]) -> None:
            """Land finished batches in group order as soon as every batch before them has
            finished, so merging overlaps the workers still running."""
            while queue and queue[0].id in results:
                batch = queue.pop(0)
                self._land(batch, results[batch.id])

        results = self._execute(todo, workspace.head_commit(self.root), land_ready)
        for batch in queue:  # a batch interrupted before it started has no result
            if batch.id in results:
                self._land(batch, results[batch.id])
        wstate.status = "done"
        self._save()
        ran = [g for b in todo for g in (b.ids)]
        failed = [g for g in ran if self.state.groups[g].status in ("failed",)]
        self._emit({"type": "wave_done", "wave": wave.label, "failed": failed})
        if self.cancel.is_set():
            return False
        if ran and len(failed) == len(ran):
            self.state.warnings.append(f"all groups of wave {wave.label} failed; run aborted")
            return True
        if failed:
            if self.options.on_failure == "abort":
                return True
            if self.options.ask_continue and not self.options.ask_continue(failed):
                return True
        return False

    def _blockers(self, ids: list[str]) -> list[str]:
        """Dependencies outside the batch that did not complete (inside it, the worker orders
        the groups itself: single mode holds dependent groups in one batch)."""
        assert self.state is not None
        deps = {d for gid in ids for d in (self.spec.group(gid).dependencies
                                            if self.spec.group(gid) else [])} - set(ids)
        return sorted((d for d in deps if self.state.groups.get(d) and
                       Status(self.state.groups[d].status) in (*BLOCKING, Status.PENDING)),
                      key=self._order_one)

    def _order_one(self, gid: str) -> int:
        return self._spec_order.get(gid, len(self._spec_order))

    def _order(self, gids: list[str]) -> int:
        return min((self._order_one(g) for g in gids), default=0)

    def _skip_wave(self, wave: Wave, reason: str) -> None:
        assert self.state is not None
        self.state.waves[wave.number - 1].status = "skipped"
        for gid in wave.groups:
            if self.state.groups[gid].status == "pending":
                self._set_final(gid, status="blocked", error=reason)
        self._save()

    # ------------------------------------------------------------------ workers
    def _assignment(self, batch_id: str, groups: list[str], base: str) -> Assignment:
        branch = f"agentrun/{_ref_safe(self.spec.id)}/{self.run_id}/{_ref_safe(batch_id)}"
        wt_path = self.run_dir / "worktrees" / _ref_safe(batch_id)
        workspace.create_worktree(self.root, wt_path, branch, base, checkout=False)
        wdir = self.run_dir / "workers" / _ref_safe(batch_id)
        wdir.mkdir(parents=True, exist_ok=True)
        return make_assignment(self.project, self.spec, self.plan, self.options,
                               run_id=self.run_id, spec_path=relpath(self.spec.path, self.root),
                               batch_id=batch_id, groups=groups, worktree=wt_path,
                               branch=branch, base=base, result_path=wdir / "result.json",
                               record_dir=wdir)

    def _execute(self, batches, base: str,
                 on_result: Callable[[dict[str, WorkerResult]], None]) -> dict[str, WorkerResult]:
        """Run the wave's batches from `base`, at most `max_parallel` at once; returns the
        verified results, calling `on_result` each time one arrives."""
        from agentrun import pool

        assert self.state is not None
        pending = list(batches)
        running: dict[str, tuple[pool.WorkerProcess, Assignment]] = {}
        results: dict[str, WorkerResult] = {}
        limit = self.options.max_parallel or len(pending) or 1
        in_process = not self.options.use_processes
        offsets: dict[str, int] = {}
        while pending or running:
            while pending and len(running) < limit and not self.cancel.is_set():
                batch = pending.pop(0)
                ids = batch.ids
                assignment = self._assignment(batch.id, ids, base)
                apath = Path(assignment.result_path).parent / "assignment.json"
                assignment.write(apath)
                for gid in ids:
                    g = self.state.groups[gid]
                    g.status, g.branch, g.worktree = "running", assignment.branch, \
                        assignment.worktree
                self._emit({"type": "worker_start", "batch": batch.id, "groups": ids,
                            "worktree": assignment.worktree, "branch": assignment.branch})
                if not in_process:
                    try:
                        proc = pool.start_worker(batch.id, apath,
                                                 Path(assignment.result_path),
                                                 self.options.limits.timeout_s,
                                                 self.options.provider.provider)
                        running[batch.id] = (proc, assignment)
                        break  # poll the running ones before starting the next
                    except pool.CannotSpawn as exc:
                        in_process = True
                        limit = 1
                        self.state.warnings.append(
                            f"worker processes could not be started ({exc}); running "
                            "sequentially in-process")
                        self._emit({"type": "fallback_sequential", "reason": str(exc)})
                results[batch.id] = self._collect(assignment, self._run_in_process(assignment))
                on_result(results)
            if self.cancel.is_set() and not running:
                for batch in pending:
                    for gid in batch.ids:
                        self._set_final(gid, status="interrupted", error="interrupted before "
                                        "the worker started", stop_reason="interrupted")
                pending = []
                break
            for batch_id, (proc, assignment) in list(running.items()):
                offsets[batch_id] = self._relay_progress(assignment, offsets.get(batch_id, 0))
                if self.cancel.is_set() and proc.alive():
                    proc.request_stop("interrupted")
                    if proc.overdue(STOP_GRACE_S):
                        proc.kill("interrupted")
                        self._kill_commands(batch_id)
                if proc.alive() and proc.elapsed > proc.timeout_s:
                    proc.kill("timeout")
                    self._kill_commands(batch_id)
                    self._emit({"type": "worker_timeout", "batch": batch_id,
                                "timeout_s": proc.timeout_s})
                if not proc.alive():
                    proc.process.join(timeout=1)
                    offsets[batch_id] = self._relay_progress(assignment,
                                                             offsets.get(batch_id, 0))
                    results[batch_id] = self._collect(assignment,
                                                      self._read_result(proc, assignment))
                    del running[batch_id]
                    on_result(results)
            if running and not (pending and len(running) < limit):
                time.sleep(0.05)
        return results

    def _kill_commands(self, batch_id: str) -> None:
        """Kill the commands a killed worker left running (they have sessions of their own)."""
        for pgid in self._commands.pop(batch_id, set()):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)

    def _run_in_process(self, assignment: Assignment) -> WorkerResult:
        from agentrun.worker import run_assignment

        return run_assignment(assignment, self.cancel)

    def _read_result(self, proc, assignment: Assignment) -> WorkerResult:
        """The worker's result file, or a failed result saying why there is none."""
        ids = assignment.group_ids
        if proc.stop_reason == "timeout":
            return WorkerResult(group=ids[0], groups=ids, status="failed",
                                stop_reason="timeout", batch=assignment.batch,
                                error=f"worker exceeded its timeout of {proc.timeout_s:g}s "
                                      "and was killed", branch=assignment.branch,
                                worktree=assignment.worktree, duration_s=round(proc.elapsed, 3))
        try:
            return WorkerResult.read(proc.result_path)
        except ValueError as exc:
            if proc.stop_reason == "interrupted":
                return WorkerResult(group=ids[0], groups=ids, status="failed",
                                    stop_reason="interrupted",
                                    error="interrupted", batch=assignment.batch,
                                    branch=assignment.branch, worktree=assignment.worktree)
            code = proc.exit_code
            how = (f"was killed by signal {-code}" if code is not None and code < 0
                   else f"exited with code {code}")
            return WorkerResult(group=ids[0], groups=ids, status="failed", stop_reason="error",
                                error=f"worker {how} and wrote no valid result: {exc}",
                                batch=assignment.batch, branch=assignment.branch,
                                worktree=assignment.worktree, duration_s=round(proc.elapsed, 3))

    def _relay_progress(self, assignment: Assignment, offset: int) -> int:
        path = Path(assignment.progress_path or "")
        if not assignment.progress_path or not path.exists():
            return offset
        with open(path, "rb") as fh:
            fh.seek(offset)
            chunk = fh.read()
        end = chunk.rfind(b"\n")
        if end < 0:
            return offset
        for raw in chunk[:end].splitlines():
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            live = self._commands.setdefault(assignment.batch, set())
            if event.get("type") == "spawn":
                live.add(int(event["pgid"]))
            elif event.get("type") == "spawn_end":
                live.discard(int(event["pgid"]))
            self._emit({**event, "type": f"agent_{event.get('type', 'event')}",
                        "batch": assignment.batch}, record=False)
        return offset + end + 1

    # ------------------------------------------------------------------ verification
    def _collect(self, assignment: Assignment, result: WorkerResult) -> WorkerResult:
        """Check a result against the assignment and git, then record it per group."""
        ids = assignment.group_ids
        return self._verify(result, ids=ids, batch=assignment.batch, branch=assignment.branch,
                            base=assignment.base_commit,
                            record_dir=Path(assignment.result_path).parent)

    def _verify(self, result: WorkerResult, *, ids: list[str], batch: str, branch: str,
                base: str, record_dir: Path) -> WorkerResult:
        """Check a result against git (`base..branch`; any ref), then record it per group.

        Used for local workers and for results from CI jobs (`agentrun aggregate`).
        """
        deviations = list(result.deviations)
        if sorted(result.groups) != sorted(ids):
            deviations.append(f"result names groups {result.groups}, assignment was {ids}")
        if self.cancel.is_set() and result.status not in ("complete",):
            result.stop_reason = "interrupted"
        exists = workspace.resolve_ref(self.root, branch) is not None
        actual = workspace.commits_since(self.root, base, branch) if exists else []
        _verified, rejected = workspace.verify_commits(
            self.root, result.commits, branch, base, on_branch=actual) \
            if exists else ([], [f"{c}: {branch} does not exist" for c in result.commits])
        deviations += [f"claimed commit not verified: {r}" for r in rejected]
        created, modified, deleted = workspace.changed_files(
            self.root, base, branch) if actual else ([], [], [])
        status = result.status
        if result.stop_reason == "interrupted" and status != "complete":
            status = "interrupted"
        if status == "complete" and not actual:
            deviations.append("reported complete but committed no changes")
        result.commits, result.files_created, result.files_modified = actual, created, modified
        result.files_deleted = deleted
        result.deviations = deviations
        share = 1 / len(ids)
        usage = {k: _split(v, len(ids)) for k, v in result.usage.model_dump().items()}
        for gid in ids:
            self._set_final(
                gid, status=status, commits=actual, files_created=created,
                files_modified=modified, files_deleted=deleted,
                criteria_met=result.criteria_met, deviations=deviations, error=result.error,
                summary=result.summary, attempts=result.attempts, steps=result.steps,
                usage={k: parts[ids.index(gid)] for k, parts in usage.items()},
                cost_usd=None if result.cost_usd is None else result.cost_usd * share,
                duration_s=result.duration_s, stop_reason=result.stop_reason)
        result.status = status if status != "interrupted" else "failed"
        atomic_write_json(record_dir / "verified-result.json", result.model_dump())
        self._emit({"type": "worker_result", "batch": batch, "groups": ids,
                    "status": status, "error": result.error, "commits": len(actual),
                    "tokens": sum(result.usage.model_dump().values()),
                    "cost_usd": result.cost_usd, "stop_reason": result.stop_reason})
        self._save()
        return result

    def _merge(self, batch_id: str, result: WorkerResult) -> None:
        assert self.state is not None
        ids = result.groups
        if not result.commits:
            return
        message = f"Merge {self.spec.id} {', '.join(ids)}"
        titles = [self.state.groups[g].title for g in ids if self.state.groups[g].title]
        if titles:
            message += f": {'; '.join(titles)}"
        merged = workspace.merge_branch(self.root, result.branch or "", message)
        if merged.ok:
            for gid in ids:
                self.state.groups[gid].merge_commit = merged.commit
            self._emit({"type": "merged", "batch": batch_id, "commit": merged.commit})
        else:
            for gid in ids:
                g = self.state.groups[gid]
                g.status = "failed"
                g.error = (f"merge conflict in {', '.join(merged.conflicts)}"
                           if merged.conflicts else f"merge failed: {merged.message}")
            self._emit({"type": "merge_conflict", "batch": batch_id,
                        "conflicts": merged.conflicts, "message": merged.message})
        self._save()

    def _land(self, batch, result: WorkerResult) -> None:
        """Merge a finished batch, then remove its worktree if all its work landed."""
        if result.status in ("complete", "partial") and not self.cancel.is_set():
            self._merge(batch.id, result)
        self._cleanup_worktree(batch)

    def _cleanup_worktree(self, batch) -> None:
        """Remove a merged batch's worktree and branch; keep any other (and say where), so
        a human or `--resume` finds the work."""
        assert self.state is not None
        groups = [self.state.groups[g] for g in batch.ids]
        if not groups or not groups[0].worktree:
            return
        landed = all(g.status == "complete" and (g.merge_commit or not g.commits)
                     for g in groups)
        if not landed:
            self._emit({"type": "kept_worktree", "batch": batch.id,
                        "worktree": groups[0].worktree, "branch": groups[0].branch})
            return
        wt = workspace.Worktree(Path(groups[0].worktree), groups[0].branch or "",
                                self.state.base_commit)
        try:
            workspace.remove_worktree(self.root, wt, delete_branch=True)
        except workspace.GitError as exc:
            self._emit({"type": "warning", "message": f"could not remove worktree "
                        f"{wt.path}: {exc}"})
            return
        for g in groups:
            g.worktree = None

    # ------------------------------------------------------------------ bookkeeping
    def _set_final(self, gid: str, **values: Any) -> None:
        assert self.state is not None
        group = self.state.groups[gid]
        for key, value in values.items():
            setattr(group, key, value)

    def _emit(self, event: Event, record: bool = True) -> None:
        event = {"t": round(time.time(), 3), **event}
        if record and self._events_fh is not None:
            self._events_fh.write(json.dumps(event, default=str) + "\n")
            self._events_fh.flush()
        self.on_event(event)

    def _save(self, progress: str | None = None, status: str | None = None) -> None:
        from agentrun.report.state_md import StateUpdate, update_state_file

        assert self.state is not None
        save_state(self.state_file, self.state)
        if progress or status:
            update_state_file(self.project.state_md, StateUpdate(
                spec_id=self.spec.id, status=status, run_id=self.run_id, mode=self.plan.mode,
                progress=progress, when=now_text()))

    def _finish(self, interrupted: bool) -> RunState:
        from agentrun.report.state_md import StateUpdate, update_state_file

        assert self.state is not None
        state = self.state
        for g in state.groups.values():
            if g.status in ("pending", "running"):
                g.status = "interrupted" if interrupted else "blocked"
        statuses = [g.status for g in state.groups.values()]
        if interrupted:
            state.status = "interrupted"
        elif all(s == "complete" for s in statuses):
            state.status = "complete"
        elif any(w.status == "skipped" for w in state.waves):
            state.status = "aborted"
        elif any(s == "complete" for s in statuses) or "partial" in statuses:
            state.status = "partial"
        else:
            state.status = "failed"
        state.finished = now_text()
        failed_wave = next((w.label for w in state.waves
                            if any(state.groups[g].status in ("failed", "blocked", "partial",
                                                               "interrupted")
                                   for g in w.groups)), None)
        if state.status == "complete":
            progress, position = "Complete", "review"
        elif interrupted:
            progress = f"Interrupted (Wave {state.current_wave}/{len(state.waves)})"
            position = "interrupted"
        else:
            progress, position = f"Failed (Wave {failed_wave})", "failed"
        warnings = list(state.warnings)
        if state.status != "complete":
            warnings.append(f"run {state.run_id} ended {state.status}: "
                            + ", ".join(f"{g.id} {g.status}" for g in state.groups.values()
                                        if g.status != "complete"))
        save_state(self.state_file, state)
        # the spec: Execution Summary and status (review only when everything completed)
        self._write_summary(state.finished, status="review" if state.status == "complete"
                            else None)
        update_state_file(self.project.state_md, StateUpdate(
            spec_id=self.spec.id, status=position, run_id=self.run_id, mode=self.plan.mode,
            progress=progress, warnings=warnings, when=state.finished,
            next_step="review the changes, then `agentrun status`" if position == "review"
            else f"inspect, then `agentrun run {self.spec.id} --resume`"))
        atomic_write_json(self.run_dir / "result.json", state.to_dict())
        if not interrupted:
            self._commit_report()
        self._emit({"type": "run_done", "status": state.status, "run_dir": str(self.run_dir)})
        return state

    def _write_summary(self, when: str, status: str | None = None) -> None:
        """Write the spec's `## Execution Summary` (and `status`), every other byte unchanged."""
        from agentrun.report.summary import render_summary
        from agentrun.spec.writeback import set_frontmatter_value, upsert_section

        assert self.state is not None
        text = self.spec.path.read_text(encoding="utf-8")
        body = render_summary(self.state, [c.text for c in self.spec.acceptance_criteria], when)
        new = upsert_section(text, "Execution Summary", body)
        if status:
            new = set_frontmatter_value(new, "status", status)
        if new != text:
            atomic_write_text(self.spec.path, new)

    def _commit_report(self, message: str | None = None) -> None:
        """Commit the spec summary, STATE.md and execution state (only those paths)."""
        paths = [relpath(p, self.root)
                 for p in (self.spec.path, self.project.state_md, self.state_file)
                 if Path(p).exists()]
        changed = set(workspace.dirty_paths(self.root, ignore=(".specflow/runs/",)))
        paths = [p for p in paths if p in changed]
        if not paths:
            return
        workspace.git("add", "--", *paths, cwd=self.root)
        workspace.git("commit", "-q", "--no-verify", "-m",
                      message or f"{self.spec.id}: execution summary (run {self.run_id})",
                      "--", *paths,
                      cwd=self.root, env=workspace.ensure_identity(self.root) or None)


def make_assignment(project: Project, spec: Spec, plan: Plan, options: RunOptions, *,
                    run_id: str, spec_path: str, batch_id: str, groups: list[str],
                    worktree: Path, branch: str, base: str, result_path: Path,
                    record_dir: Path) -> Assignment:
    """The assignment for one batch: its groups and only the spec sections a worker needs.

    Shared by local workers (a worktree per batch) and `agentrun worker --spec` in a CI job
    (the job's checkout); `record_dir` receives the transcript and progress stream.
    """
    sections = {}
    for title in SHARED_SECTIONS:
        sec = spec.section(title)
        if sec is not None:
            sections[title.lower().replace(" ", "_")] = sec.body.strip()
    spec_groups = [spec.group(g) for g in groups]
    agent = "spec-executor" if plan.mode == "single" else "spec-executor-worker"
    return Assignment(
        run_id=run_id, spec_id=spec.id, spec_path=spec_path,
        spec_title=spec.title, complexity=spec.complexity, batch=batch_id,
        groups=[GroupAssignment(id=g.id, title=g.title, tasks=g.tasks,
                                dependencies=g.dependencies, files=g.files)
                for g in spec_groups if g is not None],
        sections=sections,
        acceptance_criteria=[c.text for c in spec.acceptance_criteria],
        project_md=project.project_text(), project_root=str(project.root),
        worktree=str(worktree), branch=branch, base_commit=base, agent=agent,
        provider=options.provider, limits=options.limits,
        validation_command=options.validation_command,
        pricing=options.pricing, result_path=str(result_path),
        transcript_path=str(record_dir / "transcript.jsonl"),
        progress_path=str(record_dir / "progress.ndjson"),
        interactive=options.interactive)


def _split(total: int, n: int) -> list[int]:
    """`total` in `n` integer parts that add up to it exactly (the first ones get the rest)."""
    base, rest = divmod(total, n)
    return [base + (1 if i < rest else 0) for i in range(n)]


def _ref_safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text)
