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
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from agentrun import workspace
from agentrun.core.events import ProtectedChangeEvent, WorkerResultEvent
from agentrun.core.fsutil import atomic_write_json
from agentrun.core.results import WorkerResult
from agentrun.core.status import Status, StopReason
from agentrun.report.execution_state import RunState
from agentrun.run.policy import MergePolicy, PolicyFinding
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


@dataclass(frozen=True)
class BranchFacts:
    """What git says of a delivery's work, `base..ref`: whether the ref exists, its commits
    (oldest first), the paths it changed and what the merge policy finds in them."""

    exists: bool
    commits: list[str]
    changes: list[workspace.TreeChange]
    findings: list[PolicyFinding]


class Verifier:
    def __init__(self, root: Path, state: RunState, record: Recorder,
                 cancel: threading.Event) -> None:
        self.root = root
        self.state = state
        self.record = record
        self.cancel = cancel
        self.policy = MergePolicy.for_run(root, record.project, record.spec)
        # facts being read ahead, by the delivery they are for (held, so its id stays its own)
        self._ahead: dict[int, tuple[Delivery, Future[BranchFacts]]] = {}
        self._readers: ThreadPoolExecutor | None = None

    def read_ahead(self, d: Delivery) -> None:
        """Start reading `d`'s facts from git in the background. Workers of a wave often end
        together, and their results are checked and merged one by one: the later ones are
        then read while the first is recorded and merged. `check(d)` takes them; the reads
        depend on `d.ref` and `d.base` alone, and the worker that wrote the ref has ended."""
        if self._readers is None:
            self._readers = ThreadPoolExecutor(max_workers=2,
                                               thread_name_prefix="agentrun-verify")
        if id(d) not in self._ahead:
            self._ahead[id(d)] = (d, self._readers.submit(self.facts, d.ref, d.base))

    def facts(self, ref: str, base: str) -> BranchFacts:
        """Read from git what `base..ref` holds (no state is touched: safe in any thread)."""
        root = self.root
        commits = workspace.commits_on(root, base, ref)
        changes = workspace.tree_changes(root, base, ref) if commits else []
        links = functools.partial(workspace.symlinks_of, root, ref)
        return BranchFacts(commits is not None, commits or [], changes,
                           self.policy.check_changes(changes, links))

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
        ahead = self._ahead.pop(id(d), None)
        facts = ahead[1].result() if ahead is not None else self.facts(d.ref, d.base)
        actual, changes = facts.commits, facts.changes
        _verified, rejected = workspace.verify_commits(
            root, result.commits, d.ref, d.base, on_branch=actual) \
            if facts.exists else ([], [f"{c}: {d.ref} does not exist" for c in result.commits])
        deviations += [f"claimed commit not verified: {r}" for r in rejected]
        created = [c.path for c in changes if c.status == "A"]
        modified = [c.path for c in changes if c.status not in "AD"]
        deleted = [c.path for c in changes if c.status == "D"]
        status = Status(result.status)
        if result.stop_reason == StopReason.INTERRUPTED and status != Status.COMPLETE:
            status = Status.INTERRUPTED
        if status == Status.COMPLETE and not actual:
            status = empty_claim(result, deviations)
        refusal = self._apply_policy(d, facts.findings, deviations)
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

    def _apply_policy(self, d: Delivery, findings: list[PolicyFinding],
                      deviations: list[str]) -> str:
        """Record the policy's findings on the branch's changes: each becomes a deviation
        and an event. Returns why the work must not merge ("" when it may)."""
        refused = []
        for finding in findings:
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
