"""Landing a wave's work: merging finished branches into the target branch in group order.

A batch lands as soon as it and every batch before it (in the spec's group order) have
finished, so merging overlaps the workers still running while the history keeps one order
however the workers raced. A conflict fails the batch's groups and leaves the target branch as
it was. Once the wave is over (and its merged result integration-checked), worktrees whose
work landed are removed; the others are kept for a human or `--resume`.

`WaveLanding.finish` returns the batches that landed: the place for a check of the whole wave
(an integration command over the merged result) to run before the failure rules decide, and
before `WaveLanding.clean_up` removes what that check may still need.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from agentrun import merging, worktrees
from agentrun.core.events import KeptWorktreeEvent, MergeConflictEvent, MergedEvent, WarningEvent
from agentrun.core.results import WorkerResult
from agentrun.core.status import Status, StopReason
from agentrun.plan import Batch
from agentrun.report.execution_state import RunState
from agentrun.run.record import Recorder
from agentrun.run.target import Target

NOT_LANDED = "verified, not merged: the run stopped landing ({why})"


class Lander:
    def __init__(self, root: Path, spec_id: str, state: RunState, record: Recorder,
                 cancel: threading.Event, target: Target | None = None) -> None:
        self.root = root
        self.spec_id = spec_id
        self.state = state
        self.record = record
        self.cancel = cancel
        self.target = target or Target(root, state, record)
        # worktree removals under way (clean_up, remove_soon), by batch; `settle` ends them
        self.removing: dict[str, _Removal] = {}
        self.deleting: list[_Removal] = []  # forgotten by git, folders still being deleted
        self._remover: ThreadPoolExecutor | None = None

    def land(self, batch: Batch, result: WorkerResult) -> bool:
        """Merge a finished batch; True when it merged."""
        if Status(result.status).landed_work and not self.cancel.is_set():
            return self.merge(batch.id, result)
        return False

    def merge(self, batch_id: str, result: WorkerResult) -> bool:
        """Merge the result's branch; on a conflict its groups fail. False when it did not
        merge (nothing to merge counts as merged)."""
        ids = result.groups
        if not result.commits:
            return True
        if not self.target.ready():  # never merge into another branch than the run's
            for gid in ids:
                g = self.state.groups[gid]
                g.status, g.stop_reason = Status.INTERRUPTED, StopReason.TARGET_MOVED
                g.error = NOT_LANDED.format(why="its branch was switched or reset")
            self.record.save()
            return False
        started = round(time.time(), 3)  # the merge's span in traces and the report
        merged = merging.merge_branch(self.root, result.branch or "", self._message(ids),
                                      head=self.target.head or None, tip=result.commits[-1])
        if merged.ok:
            self._merged(batch_id, ids, merged.commit, started)
        else:
            for gid in ids:
                g = self.state.groups[gid]
                g.status = Status.FAILED
                g.error = (f"merge conflict in {', '.join(merged.conflicts)}"
                           if merged.conflicts else merged.message if merged.in_the_way
                           else f"merge failed: {merged.message}")
            self.record.emit(MergeConflictEvent(batch=batch_id, conflicts=tuple(merged.conflicts),
                                                message=merged.message,
                                                in_the_way=tuple(merged.in_the_way),
                                                started=started))
        self.record.save()
        return merged.ok

    def land_train(self, batches: list[Batch], results: dict[str, WorkerResult]) -> int:
        """Merge a run of finished batches at once, in their order, each with its own merge
        commit (`merging.merge_train`); returns how many merged so, from the first. The
        caller lands the others one by one: a batch with nothing to merge, or not complete,
        ends the train before it, and so does anything the train cannot merge plainly."""
        train: list[tuple[Batch, WorkerResult]] = []
        for batch in batches:
            result = results[batch.id]
            if not (Status(result.status).landed_work and result.commits):
                break
            train.append((batch, result))
        if len(train) < 2 or self.cancel.is_set() or not self.target.ready():
            return 0  # (a moved target: `merge` says so, for each batch)
        started = round(time.time(), 3)
        merged = merging.merge_train(self.root, [
            merging.Landing(result.branch or "", result.commits[-1],
                            self._message(result.groups)) for _, result in train],
            self.target.head)
        for (batch, result), outcome in zip(train, merged, strict=False):
            self._merged(batch.id, result.groups, outcome.commit, started)
        if merged:
            self.record.save()
        return len(merged)

    def _message(self, ids: list[str]) -> str:
        message = f"Merge {self.spec_id} {', '.join(ids)}"
        titles = [self.state.groups[g].title for g in ids if self.state.groups[g].title]
        return f"{message}: {'; '.join(titles)}" if titles else message

    def _merged(self, batch_id: str, ids: list[str], commit: str | None,
                started: float) -> None:
        self.target.left_at(commit)
        for gid in ids:
            self.state.groups[gid].merge_commit = commit
        self.record.emit(MergedEvent(batch=batch_id, commit=commit, started=started))

    def clean_up(self, batches: list[Batch]) -> None:
        """Remove merged batches' worktrees and branches; keep any other (and say where), so
        a human or `--resume` finds the work (a wave that failed its integration check
        failed its merged groups: their branches are kept too). The removals run in the
        background, side by side (each waits on the disk, not the CPU), while the run goes
        on; `settle` waits for them."""
        gone = []
        for batch in batches:
            groups = [self.state.groups[g] for g in batch.ids]
            if not groups or not groups[0].worktree or batch.id in self.removing:
                continue
            if not self.landed_whole(batch):
                self.record.emit(KeptWorktreeEvent(batch=batch.id,
                                                   worktree=groups[0].worktree,
                                                   branch=groups[0].branch))
                continue
            gone.append(batch)
        self.remove_soon(*gone)

    def landed_whole(self, batch: Batch) -> bool:
        """Every group of `batch` complete, its work merged (or none to merge)."""
        groups = [self.state.groups[g] for g in batch.ids]
        return bool(groups) and all(g.status == Status.COMPLETE and
                                    (g.merge_commit or not g.commits) for g in groups)

    def remove_soon(self, *batches: Batch) -> None:
        """Start removing the batches' worktrees and branches in the background: git's
        bookkeeping for all of them under one hold of the worktree lock, then their folders'
        deletions side by side."""
        todo = []
        for batch in batches:
            group = self.state.groups[batch.ids[0]]
            if group.worktree and batch.id not in self.removing:
                todo.append(_Removal(batch, worktrees.Worktree(
                    Path(group.worktree), group.branch or "", self.state.base_commit)))
                self.removing[batch.id] = todo[-1]
        if todo:
            self._pool().submit(self._detach, todo)

    def _pool(self) -> ThreadPoolExecutor:
        if self._remover is None:
            self._remover = ThreadPoolExecutor(max_workers=4,
                                               thread_name_prefix="agentrun-remove")
        return self._remover

    def settle(self, *, folders: bool = True) -> None:
        """Wait for the removals started so far: the state forgets each worktree git has
        forgotten, and one git could not is a warning. Their folders, renamed aside (their
        paths are free already), may still be being deleted: unless `folders` is False,
        `settle_folders` waits for that too."""
        removing, self.removing = self.removing, {}
        for removal in removing.values():
            error = removal.forgotten.result()
            if error is not None:
                self.record.emit(WarningEvent(
                    message=f"could not remove worktree {removal.wt.path}: {error}"))
                continue
            for gid in removal.batch.ids:
                self.state.groups[gid].worktree = None
            self.deleting.append(removal)
        if folders:
            self.settle_folders()

    def settle_folders(self) -> None:
        """Wait for the folders of the worktrees `settle` saw removed to be deleted; one that
        could not be is a warning (the next run's sweep deletes it: run/leftovers.py)."""
        deleting, self.deleting = self.deleting, []
        for removal in deleting:
            error = removal.deleted.result()
            if error is not None:
                self.record.emit(WarningEvent(
                    message=f"could not delete the folder of removed worktree "
                            f"{removal.wt.path}: {error}; the next run deletes it"))

    def _detach(self, todo: list[_Removal]) -> None:
        """Git forgets the worktrees of `todo`; each folder's deletion is then a task of its
        own. Every future gets its outcome, whatever happens: `settle` waits for them."""
        try:
            detached = worktrees.detach_worktrees(self.root, [r.wt for r in todo])
        except Exception as exc:  # noqa: BLE001 - a removal that fails is a warning, not a hang
            detached = [worktrees.Detached(error=exc)] * len(todo)
        for removal, outcome in zip(todo, detached, strict=True):
            removal.forgotten.set_result(outcome.error)
            if outcome.aside is None or outcome.error is not None:
                removal.deleted.set_result(None)
            else:
                self._pool().submit(self._delete, removal, outcome.aside)

    def _delete(self, removal: _Removal, aside: Path) -> None:
        try:
            worktrees.delete_aside(self.root, removal.wt, aside)
        except Exception as exc:  # noqa: BLE001 - said by `settle_folders`
            removal.deleted.set_result(exc)
        else:
            removal.deleted.set_result(None)


@dataclass
class _Removal:
    """A batch's worktree being removed: git forgets it, then its folder is deleted; each
    step's outcome is an error, or None."""

    batch: Batch
    wt: worktrees.Worktree
    forgotten: Future[Exception | None] = field(default_factory=Future)
    deleted: Future[Exception | None] = field(default_factory=Future)


class WaveLanding:
    """The landing queue of one wave: its batches in landing order, landed one by one as
    their results (and those of every batch before them) arrive."""

    def __init__(self, lander: Lander, ordered: list[Batch], remove_early: bool = False) -> None:
        self.lander = lander
        # no check of the wave's merged result needs them: worktrees go as their work lands
        self.remove_early = remove_early
        self.queue = list(ordered)
        self.landed: list[Batch] = []
        self.done: list[Batch] = []  # every batch that had a result, merged or not

    def land_ready(self, results: dict[str, WorkerResult]) -> None:
        ready = []  # the batches that may land now, in landing order
        for batch in self.queue:
            if batch.id not in results:
                break
            ready.append(batch)
        trained = self.lander.land_train(ready, results) if len(ready) > 1 else 0
        self._landed(*ready[:trained])
        del self.queue[:trained]
        while self.queue and self.queue[0].id in results:
            self._land(self.queue.pop(0), results)

    def finish(self, results: dict[str, WorkerResult]) -> list[Batch]:
        """Land whatever is left (a batch interrupted before it started has no result and
        is passed over); returns the batches whose work merged."""
        for batch in self.queue:
            if batch.id in results:
                self._land(batch, results)
        self.queue = []
        return self.landed

    def clean_up(self) -> None:
        """After the wave (and its integration check): remove the worktrees whose work
        landed and stayed."""
        self.lander.clean_up(self.done)

    def _land(self, batch: Batch, results: dict[str, WorkerResult]) -> None:
        if self.lander.land(batch, results[batch.id]):
            self._landed(batch)
        else:
            self.done.append(batch)

    def _landed(self, *batches: Batch) -> None:
        self.done.extend(batches)
        self.landed.extend(batches)
        if self.remove_early:
            self.lander.remove_soon(*(b for b in batches if self.lander.landed_whole(b)))
