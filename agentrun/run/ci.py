"""Waves fanned out across CI jobs: the job matrix, branch names, and aggregation of results.

A CI system (GitHub Actions matrix jobs, GitLab parallel jobs) is the distributed engine: one
job per worker batch runs `agentrun worker --spec ... --groups ...` in its own clone, commits on
`agentrun/<spec>/<batch>` and pushes that branch; one job per wave then runs `agentrun aggregate`,
which verifies every result against the fetched branches and merges them with the very wave
runner a local `agentrun run` uses (`Orchestrator.waves`, stepped with a `CIResultsBackend`:
verification, merge order, failure rules, reporting, a full disk). The execution state
committed by each aggregate is what the next wave's jobs and aggregate continue from, so a later
wave can only run once the previous one is aggregated. Reading and checking a wave's result
files before anything changes is run/ci_results.py's; this module holds the matrix, the run's
start commit and the aggregate's step of the wave.

Every job of one run works with the settings of the run's start commit (`--start-commit`, the
commit the plan was made on): `.specflow/config.yaml` as committed there, at the checkout's
top level. A later wave's checkout holds what earlier waves merged, and none of it — a changed
config, one nested under the specs folder — changes how the run's workers are confined, which
model they call or what commands they run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrun import telemetry, workspace
from agentrun.audit.runner import ModelAccess
from agentrun.core.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, BadInput, CannotStart
from agentrun.core.events import EventSink
from agentrun.core.status import RunStatus, Status
from agentrun.plan import Plan, Wave
from agentrun.project import Project
from agentrun.providers.errors import NotConfigured
from agentrun.report.execution_state import RunState
from agentrun.run.assignment import ci_branch
from agentrun.run.ci_backend import CIResultsBackend
from agentrun.run.ci_results import prepare
from agentrun.run.options import RunOptions
from agentrun.run.orchestrator import Orchestrator
from agentrun.run.record import new_run_id
from agentrun.spec.model import Spec

# --- naming and the matrix -------------------------------------------------------------------

def ci_matrix(spec: Spec, plan: Plan, spec_path: str) -> dict[str, Any]:
    """The plan as CI job matrices, one per wave.

    Each `waves[i]` is a complete GitHub Actions matrix (`{"include": [...]}`, nothing else), so
    a workflow uses it as `strategy.matrix: ${{ fromJSON(needs.plan.outputs.matrix).waves[0] }}`.
    Every entry names the wave, the batch, its groups (the `--groups` value) and the branch the
    job pushes.
    """
    waves = []
    for wave in plan.waves:
        waves.append({"include": [
            {"wave": wave.number, "label": wave.label, "batch": batch.id,
             "groups": ",".join(batch.ids), "branch": ci_branch(spec.id, batch.id)}
            for batch in wave.batches]})
    return {"spec": spec.id, "spec_path": spec_path, "mode": plan.mode,
            "wave_count": len(plan.waves), "waves": waves}


# --- the run's start commit ------------------------------------------------------------------

START_HINT = ("pass the commit the run's plan was made on (the plan job's checkout), e.g. "
              "`--start-commit \"$(git rev-parse HEAD)\"` in the plan job, as an output")


def start_commit(root: Path, value: str, at: str, where: str) -> str:
    """The commit `--start-commit` names, checked: a commit of this repository in the
    history of `at` (`where` names it in messages). BadInput (exit 2) otherwise."""
    sha = workspace.resolve_ref(root, value)
    if sha is None:
        raise BadInput(f"--start-commit {value} is not a commit in {root}", hint=START_HINT)
    if not workspace.is_ancestor(root, sha, at):
        raise BadInput(f"--start-commit {sha[:12]} is not in the history of {where}",
                       hint=START_HINT)
    return sha


def pinned_project(project: Project, root: Path, given: str | None, at: str, where: str,
                   state: RunState | None) -> Project:
    """The project with the run's settings (project.py, `Project.pinned`), for a job of a run
    that `state` (None: none yet) may continue: `given` (`--start-commit`, checked against
    `at`, which `where` names) wins; else a running state's recorded start and config; else
    the project as loaded (a first wave's job: its checkout is the start).

    A start that contradicts the running state's is CannotStart (exit 3): the job belongs to
    another run."""
    running = state if state is not None and state.status == RunStatus.RUNNING else None
    recorded = (running.start_commit or running.base_commit) if running else None
    if given is None:
        return project.pinned(recorded, running.config) if running and recorded else project
    start = start_commit(root, given, at, where)
    if running and recorded and recorded != start:
        raise CannotStart(f"run {running.run_id} of {running.spec_id} started at "
                          f"{recorded[:12]}, not at --start-commit {start[:12]}",
                          hint="pass the start commit of the run this job belongs to (the plan "
                               "job's commit), or start a new run with wave 1")
    return project.pinned(start, running.config if running and recorded else None)


# --- aggregation -----------------------------------------------------------------------------

@dataclass
class Aggregation:
    state: RunState
    wave: Wave
    next_wave: Wave | None  # the wave CI runs next (None when the run is finished)
    orchestrator: Orchestrator

    @property
    def finished(self) -> bool:
        return self.next_wave is None

    @property
    def exit_code(self) -> int:
        """`run`'s codes: 130 interrupted; 0 when everything aggregated so far completed."""
        if self.state.status == RunStatus.INTERRUPTED:
            return EXIT_INTERRUPTED
        if self.finished:
            return EXIT_OK if self.state.status == RunStatus.COMPLETE else EXIT_FAILED
        done = [g for w in self.state.waves[:self.wave.number] for g in w.groups]
        ok = all(self.state.groups[g].status == Status.COMPLETE for g in done)
        return EXIT_OK if ok else EXIT_FAILED



def aggregate(project: Project, spec: Spec, plan: Plan, paths: Iterable[Path],
              options: RunOptions, *, remote: str = "origin", allow_missing: bool = False,
              on_event: EventSink | None = None) -> Aggregation:
    """Aggregate one wave's CI results into the checked-out branch (see the module doc)."""
    results, wave, previous = prepare(project, spec, plan, paths, remote=remote,
                                      allow_missing=allow_missing)
    if options.review is not None and wave.number == len(plan.waves) and (
            previous is None or all(g.status in (Status.COMPLETE, Status.PENDING)
                                    for g in previous.groups.values())):
        reviewer_model(options.review.access)  # the run may end complete: before any merge
    if not options.provider.provider:
        first = next((r for r in results if r.provider), None)
        if first is not None and first.provider:
            options.provider.provider, options.provider.model = first.provider, first.model or ""
    continued = previous if wave.number > 1 and previous is not None else None
    run_id = continued.run_id if continued else new_run_id()
    backend = CIResultsBackend(workspace.repo_root(project.root), spec.id,
                               project.runs_dir / run_id, {r.batch.id: r for r in results})
    # all results are there already: verify the whole wave, then merge it
    start = (continued.start_commit or continued.base_commit) if continued else \
        project.start_commit or workspace.head_commit(project.root)  # as start_state.py
    orchestrator = Orchestrator(project, spec, plan, options, on_event, run_id=run_id,
                                backend=backend, workers_ran=True, commit_state=True,
                                trace_parent=telemetry.ci_trace_parent(spec.id, start))
    state = _aggregate_wave(orchestrator, wave, continued)
    finished = state.status != RunStatus.RUNNING
    nxt = None if finished else plan.waves[wave.number]
    return Aggregation(state=state, wave=wave, next_wave=nxt, orchestrator=orchestrator)


def reviewer_model(access: ModelAccess) -> None:
    """Resolve the reviewer's model, or refuse (exit 3) the aggregate that would end in it."""
    try:
        access.config()
    except NotConfigured as exc:
        raise NotConfigured(f"the last wave's review needs a model: {exc.message}",
                            hint=f"{exc.hint or ''} In a workflow, give the aggregate step the "
                                 "model key as the wave jobs have it, or pass --no-review."
                            .strip()) from None


def _aggregate_wave(orch: Orchestrator, wave: Wave, continued: RunState | None) -> RunState:
    """Step `wave` with the CI results, as a local run steps each of its waves; finish the
    run after the last wave (or an abort), else pause it for the next wave's jobs."""
    with orch.waves(continued, first=wave.number) as waves:
        waves.start(check_base=False, aggregate_wave=wave.label)
        waves.step()
        nxt = waves.next_wave
        if nxt is None or waves.aborted:
            return waves.finish()
        return waves.pause(
            next_step=f"CI: run wave {nxt.label}'s worker jobs on this commit, then "
                      f"`agentrun aggregate {waves.state.spec_path}` with their results",
            message=f"{orch.spec.id}: wave {wave.label} aggregated (run {orch.run_id})")
