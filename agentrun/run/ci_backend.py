"""`CIResultsBackend`: the workers of a wave that already ran in CI jobs (`agentrun aggregate`).

Starting a batch reads its job's result; its work is on the branch the job pushed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from agentrun import gitcli, workspace
from agentrun.core.results import WorkerResult
from agentrun.core.status import Status, StopReason
from agentrun.plan import Batch
from agentrun.run.assignment import ci_branch, ref_safe
from agentrun.run.backends import FinishedHandle, WorkerHandle
from agentrun.run.verify import Delivery


class CIDelivered(Protocol):
    """One CI job's result as `ci.read_results` matched it (see `ci.CIResult`)."""

    path: Path
    result: WorkerResult
    branch: str
    ref: str | None
    base_commit: str | None
    problem: str | None


class CIResultsBackend:
    """Workers that already ran in CI jobs: starting one reads its result; its work is on
    the branch the job pushed (`ref` here).

    A result file is an artifact anyone with access to the workflow could replace, so it only
    says what happened: the branch is the batch's own (`ci_branch`), the base is where git
    shows that branch leaving HEAD's history, and a file that claims otherwise fails its
    batch instead of merging.
    """

    sequential = False

    def __init__(self, root: Path, spec_id: str, run_dir: Path,
                 results: dict[str, CIDelivered]) -> None:
        self.root = root
        self.spec_id = spec_id
        self.run_dir = run_dir
        self.results = results

    def warm_up(self) -> None:
        """Nothing to get ready: the workers have run."""

    def start(self, batch: Batch, base: str) -> WorkerHandle:
        ids = batch.ids
        ci = self.results.get(batch.id)
        branch = ci_branch(self.spec_id, batch.id)
        if ci is None:  # only with --allow-missing
            result = WorkerResult.for_batch(
                ids, batch.id, branch, status=Status.FAILED, stop_reason=StopReason.ERROR,
                error="no result file: the CI job of this batch delivered none")
            ref, job_base = branch, base
        else:
            result, ref = ci.result, ci.ref or branch
            job_base, problem = self._base_of(ci, base)
            problem = ci.problem or problem
            if problem:
                result = result.model_copy(update={
                    "status": Status.FAILED, "stop_reason": StopReason.ERROR,
                    "error": problem, "branch": branch})
        record_dir = self.run_dir / "workers" / ref_safe(batch.id)
        record_dir.mkdir(parents=True, exist_ok=True)
        return FinishedHandle(batch.id, Delivery(
            result=result, ids=ids, batch=batch.id, ref=ref, base=job_base,
            record_dir=record_dir, group_branch=branch, merge_ref=ref))

    def _base_of(self, ci: CIDelivered, head: str) -> tuple[str, str | None]:
        """The commit the job started from — where its branch leaves HEAD's history — and
        why the batch fails when git contradicts the result file (or shares no history)."""
        if ci.ref is None:
            return head, None
        fork = gitcli.git("merge-base", head, ci.ref, cwd=self.root, check=False).strip()
        if not fork:
            return head, f"branch {ci.branch} shares no history with HEAD: not merged"
        if ci.base_commit and workspace.resolve_ref(self.root, ci.base_commit) != fork:
            return fork, (f"{ci.path} names base commit {ci.base_commit[:12]}, but "
                          f"{ci.branch} leaves HEAD's history at {fork[:12]}: not merged")
        return fork, None
