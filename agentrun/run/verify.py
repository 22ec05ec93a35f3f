"""Checking what a worker says it did against git, and recording the outcome per group.

A worker's result is a claim: the commits, the files and the status recorded are what git
shows on its branch since its base, whatever the result file says. The changed paths then pass
the merge policy (`run.policy`), judged from the branch's trees: a branch that changes a
protected path, adds a gitlink or an out-of-bounds symlink fails here, so it never reaches the
merge.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from pathlib import Path

from agentrun import workspace
from agentrun.core.events import ProtectedChangeEvent, WorkerResultEvent
from agentrun.core.fsutil import atomic_write_json
from agentrun.core.results import WorkerResult
from agentrun.core.status import Status, StopReason
from agentrun.report.execution_state import RunState
from agentrun.run.policy import MergePolicy
from agentrun.run.record import Recorder


@dataclass
class Delivery:
    """A worker's result and where to check it: its work is `base..ref` in this repository."""

    result: WorkerResult
    ids: list[str]
    batch: str
    ref: str
    base: str
    record_dir: Path
    group_branch: str | None = None  # recorded on the groups (local workers set it at start)
    merge_ref: str | None = None  # merge from this ref instead of the branch the result names


EMPTY_CLAIM = ("reported complete but committed no changes, and did not say why none were "
               "needed (`no_change_needed`)")


def empty_claim(result: WorkerResult, deviations: list[str]) -> Status:
    """A `complete` with no commit: complete only when the model declared why no change was
    needed (its reason is kept as a deviation, for the reviewer); otherwise partial, with
    the reason as the error."""
    if result.no_change_needed:
        deviations.append(f"no change needed: {result.no_change_needed}")
        return Status.COMPLETE
    deviations.append("reported complete but committed no changes")
    result.error = result.error or EMPTY_CLAIM
    return Status.PARTIAL


class Verifier:
    def __init__(self, root: Path, state: RunState, record: Recorder,
                 cancel: threading.Event) -> None:
        self.root = root
        self.state = state
        self.record = record
        self.cancel = cancel
        self.policy = MergePolicy.for_run(root, record.project, record.spec)

    def check(self, d: Delivery) -> WorkerResult:
        """The verified result (its status `failed` for interrupted work); each group of the
        batch records its share."""
        result, ids, root = d.result, d.ids, self.root
        if d.group_branch is not None:
            for gid in ids:
                self.state.groups[gid].branch = d.group_branch
        deviations = list(result.deviations)
        if sorted(result.groups) != sorted(ids):
            deviations.append(f"result names groups {result.groups}, assignment was {ids}")
        if self.cancel.is_set() and result.status != Status.COMPLETE:
            result.stop_reason = StopReason.INTERRUPTED
        exists = workspace.resolve_ref(root, d.ref) is not None
        actual = workspace.commits_since(root, d.base, d.ref) if exists else []
        _verified, rejected = workspace.verify_commits(
            root, result.commits, d.ref, d.base, on_branch=actual) \
            if exists else ([], [f"{c}: {d.ref} does not exist" for c in result.commits])
        deviations += [f"claimed commit not verified: {r}" for r in rejected]
        changes = workspace.tree_changes(root, d.base, d.ref) if actual else []
        created = [c.path for c in changes if c.status == "A"]
        modified = [c.path for c in changes if c.status not in "AD"]
        deleted = [c.path for c in changes if c.status == "D"]
        status = Status(result.status)
        if result.stop_reason == StopReason.INTERRUPTED and status != Status.COMPLETE:
            status = Status.INTERRUPTED
        if status == Status.COMPLETE and not actual:
            status = empty_claim(result, deviations)
        refusal = self._apply_policy(d, changes, deviations)
        if refusal and status.landed_work:
            status, result.error = Status.FAILED, refusal
        result.commits, result.files_created, result.files_modified = actual, created, modified
        result.files_deleted = deleted
        result.deviations = deviations
        for part, gid in enumerate(ids):
            group = self.state.groups[gid]
            group.take(result, part, len(ids))
            group.status = status
        if status in (Status.COMPLETE, Status.PARTIAL, Status.FAILED, Status.BLOCKED):
            result.status = status
        else:  # interrupted: the batch failed; its groups keep `interrupted`
            result.status = Status.FAILED
        atomic_write_json(d.record_dir / "verified-result.json", result.model_dump())
        self.record.emit(WorkerResultEvent(
            batch=d.batch, groups=tuple(ids), status=status, error=result.error,
            commits=len(actual), tokens=result.usage.total, cost_usd=result.cost_usd,
            stop_reason=result.stop_reason))
        self.record.save()
        if d.merge_ref is not None:
            result.branch = d.merge_ref
        return result

    def _apply_policy(self, d: Delivery, changes: list[workspace.TreeChange],
                      deviations: list[str]) -> str:
        """Check the branch's changes; every finding becomes a deviation and an event.
        Returns why the work must not merge ("" when it may)."""
        refused = []
        links = functools.partial(workspace.symlinks_of, self.root, d.ref)
        for finding in self.policy.check_changes(changes, links):
            deviations.append(finding.reason())
            self.record.emit(ProtectedChangeEvent(batch=d.batch, groups=tuple(d.ids),
                                                  path=finding.path, kind=finding.kind,
                                                  allowed=finding.allowed))
            if not finding.allowed:
                refused.append(finding.reason())
        if not refused:
            return ""
        more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
        return f"not merged: {refused[0]}{more}"
