"""A resumed run takes over what a dead run left behind: its workers' branches and worktrees.

A run killed from outside (SIGKILL, a cancelled CI job) leaves branches that may hold finished
work its workers already paid tokens for. `--resume` merges such a branch instead of redoing
the batch, but only after the same checks a live worker's result gets (`Verifier`: commits
from git, the merge policy) and only when the branch starts exactly where HEAD's history has
every dependency of its groups. Whatever the resumed run does not need is removed at its end.

The dead run's assignments are the source: they name each batch's groups, branch, worktree
and base, and live in the run's orchestrator-owned directory, which no worker can write.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agentrun import gitcli, workspace, worktrees
from agentrun.core.errors import AgentrunError
from agentrun.core.events import (
    AdoptedEvent,
    EventSink,
    NotAdoptedEvent,
    RemovedLeftoverEvent,
    WaitingForWorkerEvent,
    WarningEvent,
)
from agentrun.core.results import WorkerResult
from agentrun.core.status import Status, StopReason
from agentrun.plan import Batch
from agentrun.protocol import Assignment
from agentrun.report.execution_state import RunState
from agentrun.run.assignment import ref_safe
from agentrun.run.backends import FinishedHandle, WorkerBackend, WorkerHandle, worker_pid
from agentrun.run.record import control_dir
from agentrun.run.verify import Delivery
from agentrun.spec.fingerprint import group_fingerprint
from agentrun.spec.model import Spec

WAIT_POLL_S = 0.2
MISSING_RESULT = ("adopted from run {run}, which was killed before this worker's result was "
                  "saved: status, commits and files come from git; criteria met and token "
                  "usage are unknown")


@dataclass
class Leftover:
    """One batch a dead run started: its assignment and where its worker kept its files."""

    run_id: str
    assignment: Assignment
    record_dir: Path

    @property
    def branch(self) -> str:
        return self.assignment.branch

    @property
    def worktree(self) -> Path:
        return Path(self.assignment.worktree)


def find_leftovers(workers_dirs: list[tuple[str, Path]]) -> dict[str, Leftover]:
    """The batches of earlier runs, by branch: (run id, its `workers/` directory) pairs, the
    newest run first (a batch it adopted names the older run's branch too)."""
    found: dict[str, Leftover] = {}
    for run_id, folder in workers_dirs:
        for path in sorted(folder.glob("*/assignment.json")) if folder.is_dir() else []:
            try:
                assignment = Assignment.read(path)
            except AgentrunError:
                continue
            found.setdefault(assignment.branch, Leftover(run_id, assignment, path.parent))
    return found


class Adopter:
    """The dead run's leftovers for one resumed run: which it merges, which it removes."""

    def __init__(self, root: Path, state: RunState, leftovers: dict[str, Leftover],
                 dependencies: dict[str, list[str]], workers_dir: Path, emit: EventSink,
                 warn: Callable[[str], None],
                 superseded: dict[str, Leftover] | None = None,
                 changed: dict[str, str] | None = None) -> None:
        self.root = root
        self.workers_dir = workers_dir  # this run's: an adopted batch's records go there
        self.state = state
        self.leftovers = leftovers
        # batches the dead run failed or stopped: run again, their worktrees kept as they were
        self.superseded = superseded or {}
        self.dependencies = dependencies
        self.emit = emit
        self.warn = warn
        self.adopted: set[str] = set()  # branches now owned by this run's groups
        self.changed = changed or {}  # groups whose task is not what the dead run was given

    # -- taking a batch over ----------------------------------------------------------------
    def take(self, batch: Batch) -> Delivery | None:
        """The dead run's work for `batch` as a delivery to verify and merge, or None when the
        batch must run again (no such work, unfinished, or not on top of the right base)."""
        left = next((lo for lo in self.leftovers.values()
                     if sorted(lo.assignment.group_ids) == sorted(batch.ids)), None)
        if left is None:
            return None
        self._wait_for_worker(left)
        reason = self._changed(left) or self._unusable(left, batch)
        if reason:
            self.emit(NotAdoptedEvent(batch=batch.id, branch=left.branch, reason=reason))
            if self._changed(left):
                text = (f"{', '.join(batch.ids)} of run {left.run_id} not merged, run again: "
                        f"{reason}")
                self.warn(text)
                self.emit(WarningEvent(message=text))
            return None
        result = self._result(left)
        if result is None:
            return None
        self.adopted.add(left.branch)
        record_dir = self.workers_dir / ref_safe(batch.id)
        record_dir.mkdir(parents=True, exist_ok=True)
        left.assignment.write(record_dir / "assignment.json")  # a later resume finds it here
        for gid in batch.ids:
            group = self.state.groups[gid]
            group.status, group.branch, group.worktree = Status.RUNNING, left.branch, \
                str(left.worktree)
        self.emit(AdoptedEvent(batch=batch.id, groups=tuple(batch.ids), from_run=left.run_id,
                               branch=left.branch))
        return Delivery(result=result, ids=batch.ids, batch=batch.id, ref=left.branch,
                        base=left.assignment.base_commit, record_dir=record_dir)

    def _changed(self, left: Leftover) -> str | None:
        """Why the batch's task is not the one the dead run's worker was given (its groups'
        fingerprints, from the assignment it was given, differ from the spec's now)."""
        for group in left.assignment.groups:
            now = self.state.fingerprints.get(group.id)  # none for a fix batch's group
            if now is not None and group_fingerprint(group) != now:
                return (f"the task of {group.id} changed since run {left.run_id} (its tasks, "
                        "files or dependencies differ)")
            if group.id in self.changed:
                return f"{group.id}: {self.changed[group.id]}"
        return None

    def _unusable(self, left: Leftover, batch: Batch) -> str | None:
        """Why the branch cannot stand for the batch's work (None when it can)."""
        root, base = self.root, left.assignment.base_commit
        head = workspace.head_commit(root)
        if workspace.resolve_ref(root, left.branch) is None:
            return "its branch no longer exists"
        if workspace.resolve_ref(root, base) != base or not workspace.is_ancestor(root, base,
                                                                                 head):
            return f"its base {base[:12]} is not in the history of HEAD"
        fork = gitcli.git("merge-base", head, left.branch, cwd=root, check=False).strip()
        if fork != base:
            return f"{left.branch} does not leave HEAD's history at its base {base[:12]}"
        if not workspace.commits_since(root, base, left.branch):
            return "its branch holds no commits"
        deps = {d for g in batch.ids for d in self.dependencies.get(g, [])} - set(batch.ids)
        for dep in sorted(deps):
            group = self.state.groups.get(dep)
            if group is None or group.status != Status.COMPLETE:
                return f"dependency {dep} is not complete"
            landed = [group.merge_commit] if group.merge_commit else group.commits
            if not all(workspace.resolve_ref(root, c) and workspace.is_ancestor(root, c, base)
                       for c in landed):
                return f"it was built without the merged work of {dep}"
        return None

    def _result(self, left: Leftover) -> WorkerResult | None:
        """The worker's own result when it saved one (adopted only when complete), else one
        derived from git that says so."""
        a = left.assignment
        try:
            result = WorkerResult.read(Path(a.result_path))
        except ValueError:
            subject = gitcli.git("log", "-1", "--format=%B", left.branch,
                                 cwd=self.root).strip()
            return WorkerResult(group=a.group_ids[0], groups=a.group_ids,
                                status=Status.COMPLETE, summary=subject, batch=a.batch,
                                branch=a.branch, worktree=a.worktree, cost_usd=None,
                                deviations=[MISSING_RESULT.format(run=left.run_id)])
        if Status(result.status) != Status.COMPLETE:
            self.emit(NotAdoptedEvent(batch=a.batch, branch=left.branch,
                                      reason=f"its worker ended {result.status}"))
            return None
        result.deviations = [*result.deviations,
                             f"adopted from run {left.run_id}: merged, not redone"]
        return result

    def _wait_for_worker(self, left: Leftover) -> None:
        """A dead run's worker may outlive it (workers lead sessions of their own): let it
        finish within its time limit, then end it — it is ours, checked by pid and start
        time, so nothing else is ever signalled."""
        pid = worker_pid(left.record_dir)
        if pid is None:
            return
        limit = left.assignment.limits.timeout_s or 0
        self.emit(WaitingForWorkerEvent(batch=left.assignment.batch, pid=pid,
                                        from_run=left.run_id))
        deadline = time.monotonic() + max(limit, 1.0)
        while worker_pid(left.record_dir) == pid and time.monotonic() < deadline:
            time.sleep(WAIT_POLL_S)
        if worker_pid(left.record_dir) == pid:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)

    # -- the end of the resumed run ---------------------------------------------------------
    def discard(self) -> None:
        """Remove the dead run's worktrees and branches this run does not own: those whose
        groups are complete now (their work landed, by adoption or again) and those that hold
        nothing beyond HEAD. Any other branch holds unmerged work: kept, and said where."""
        head = workspace.head_commit(self.root)
        for left in self.leftovers.values():
            if left.branch in self.adopted:
                continue
            done = all(self.state.groups.get(g) is not None
                       and self.state.groups[g].status == Status.COMPLETE
                       for g in left.assignment.group_ids)
            exists = workspace.resolve_ref(self.root, left.branch) is not None
            extra = exists and bool(workspace.commits_since(self.root, head, left.branch))
            if extra and not done:
                self.warn(f"kept {left.branch} ({left.worktree}) of run {left.run_id}: it "
                          "holds unmerged work; `agentrun clean --force` removes it")
                continue
            self._remove(left, exists)
        for left in self.superseded.values():
            if left.worktree.is_dir():
                groups = ", ".join(left.assignment.group_ids)
                self.warn(f"kept {left.worktree} of run {left.run_id}, where {groups} stopped "
                          "before this run ran it again: it may hold that worker's unfinished "
                          "edits; `agentrun clean --force` removes it")

    def _remove(self, left: Leftover, exists: bool) -> None:
        wt = worktrees.Worktree(left.worktree, left.branch, left.assignment.base_commit)
        try:
            worktrees.remove_worktree(self.root, wt, delete_branch=exists)
        except gitcli.GitError as exc:
            self.warn(f"could not remove {left.worktree} of run {left.run_id}: {exc}")
            return
        for group in self.state.groups.values():
            if group.worktree and Path(group.worktree) == left.worktree:
                group.worktree = None
        self.emit(RemovedLeftoverEvent(branch=left.branch, worktree=str(left.worktree),
                                       from_run=left.run_id))


class AdoptingBackend:
    """A resumed run's backend: a batch the dead run finished is adopted, the others run on
    `inner` as usual."""

    def __init__(self, inner: WorkerBackend, adopter: Adopter) -> None:
        self.inner = inner
        self.adopter = adopter

    @property
    def sequential(self) -> bool:
        return self.inner.sequential

    def warm_up(self) -> None:
        self.inner.warm_up()

    def start(self, batch: Batch, base: str) -> WorkerHandle:
        delivered = self.adopter.take(batch)
        if delivered is None:
            return self.inner.start(batch, base)
        return FinishedHandle(batch.id, delivered)


def take_over(root: Path, spec: Spec, state: RunState, old: RunState, emit: EventSink,
              warn: Callable[[str], None], changed: dict[str, str] | None = None) -> Adopter:
    """The adopter of a resume of `old` (and of the run `old` itself resumed)."""
    runs = [r for r in (old.run_id, old.resumed_from) if r]
    found = find_leftovers([(r, control_dir(root, r) / "workers") for r in runs])
    # only work the dead run had no verdict on: a group it failed (a refused merge, a broken
    # integration check) or interrupted runs again, as before — unless all it lacked was a
    # merge (the run stopped landing when its branch was switched)
    undecided = (Status.PENDING, Status.RUNNING, Status.COMPLETE)

    def open_(gid: str) -> bool:
        g = old.groups.get(gid)
        return g is None or g.status in undecided or g.stop_reason == StopReason.TARGET_MOVED

    leftovers = {b: lo for b, lo in found.items()
                 if all(open_(g) for g in lo.assignment.group_ids)}
    superseded = {b: lo for b, lo in found.items() if b not in leftovers}
    deps = {g.id: list(g.dependencies) for g in spec.groups}
    return Adopter(root, state, leftovers, deps, control_dir(root, state.run_id) / "workers",
                   emit, warn, superseded, changed)
