"""The CI wave's use cases: one worker batch in a job's checkout (`worker_batch`), and the
aggregate of a wave's results (`aggregate_wave`), which steps the wave with the same wave
runner as a local run (run/ci.py, run/orchestrator.py's `Orchestrator.waves`).

Both work with the run's settings, those of its start commit (run/ci.py's `pinned_project`),
and build their request with `resolve_run`, as `agentrun run` does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrun.app.requests import (
    RunFlags,
    plan_mode,
    resolve_run,
    run_options,
    worker_provider,
)
from agentrun.core.errors import BadInput, CannotStart
from agentrun.core.fsutil import relpath

if TYPE_CHECKING:
    from agentrun.core.events import EventSink
    from agentrun.core.results import WorkerResult
    from agentrun.plan import Batch, Plan
    from agentrun.project import Project
    from agentrun.providers.catalog import ProviderConfig
    from agentrun.report.execution_state import RunState
    from agentrun.run.ci import Aggregation
    from agentrun.spec.model import Spec


# --- the aggregate ---------------------------------------------------------------------------

@dataclass
class Aggregated:
    done: Aggregation
    plan: Plan
    spec: Spec
    head: str  # the commit checked out before the aggregate (it commits on top)
    root: Path


def aggregate_wave(spec_arg: str, results: list[Path], flags: RunFlags, *, remote: str,
                   allow_missing: bool, max_workers: int | None, start: str | None,
                   on_event: Callable[[], AbstractContextManager[EventSink]]) -> Aggregated:
    """Verify and merge one wave's CI results into the checked-out branch (run/ci.py).
    `on_event` opens the event sink once every check before the merge has passed."""
    from agentrun import workspace
    from agentrun.app.checks import review_settings
    from agentrun.app.loading import load
    from agentrun.app.requests import check_flags
    from agentrun.plan import build_plan
    from agentrun.protocol import ProviderSettings
    from agentrun.report.execution_state import load_state, state_path
    from agentrun.run.ci import aggregate, pinned_project
    from agentrun.run.ci_results import results_wave
    from agentrun.sandbox.choice import resolve

    check_flags(flags)
    project, spec = load(spec_arg)
    root = workspace.repo_root(project.root)
    head = workspace.head_commit(root)
    plan = build_plan(spec, mode=plan_mode(flags.mode), max_workers=max_workers)
    wave = results_wave(results, spec, plan)
    previous = load_state(state_path(project.execution_dir, spec.id)) \
        if wave.number > 1 else None
    # the run's settings, never those of what its earlier waves merged
    project = pinned_project(project, root, start, head, "HEAD", previous)
    warnings = []
    if (spec.status or "").lower() != "audited":
        warnings.append(f"{spec.id} status is {spec.status or 'unset'}, not audited; "
                        "run `agentrun audit` first")
    request = resolve_run(flags, project.config)
    box, choice = resolve(request.sandbox_mode, False, project.config.sandbox)
    options = run_options(
        request, project.config, provider=ProviderSettings(provider="", model=""),
        sandbox=box, sandbox_description=choice.describe(), warnings=warnings,
        review=review_settings(project, request, box.mode) if request.review else None,
        # no worker runs here: the jobs' limits are theirs; their spend counts against the cap
        max_parallel=None)
    with on_event() as sink:
        done = aggregate(project, spec, plan, results, options, remote=remote,
                         allow_missing=allow_missing, on_event=sink)
    return Aggregated(done, plan, spec, head, root)


# --- a worker batch --------------------------------------------------------------------------

@dataclass
class BatchOutcome:
    result: WorkerResult
    extras: dict[str, Any] = field(default_factory=dict)  # written beside the result


def worker_batch(spec_arg: str, groups: str, base_arg: str | None, start_arg: str | None,
                 out_path: Path, flags: RunFlags, *, max_workers: int | None,
                 warn: Callable[[str], None], note: Callable[[str], None],
                 cancel: threading.Event) -> BatchOutcome:
    """Run the batch `groups` of the spec's plan in this checkout, on its CI branch from
    `base_arg` (default HEAD), and write its result to `out_path`."""
    from agentrun import workspace
    from agentrun.app.loading import load
    from agentrun.core.fsutil import atomic_write_json, check_file_or_absent
    from agentrun.plan import build_plan
    from agentrun.run.ci import pinned_project
    from agentrun.run.ci_results import describe_batches, find_batch, read_state_at

    check_file_or_absent(out_path, "the result",  # before the work, not after it
                         hint="pass a file path to --out, outside the checkout")
    project, spec = load(spec_arg)
    root = workspace.repo_root(project.root)
    base = workspace.resolve_ref(root, base_arg or "HEAD")
    if base is None:
        raise BadInput(f"--base {base_arg or 'HEAD'} is not a commit in {root}",
                       hint="pass a branch, tag or commit that exists in this checkout")
    plan = build_plan(spec, mode=plan_mode(flags.mode), max_workers=max_workers)
    match = find_batch(plan, groups)
    if match is None:
        raise BadInput(f"{groups} is not a worker batch of {spec.id}'s plan "
                       f"({describe_batches(plan)})",
                       hint="pass one matrix entry's `groups` from `agentrun plan SPEC --matrix` "
                            "(with the same --mode/--max-workers)")
    wave, batch = match
    state_rel = relpath(project.execution_dir / f"{spec.id}-state.json", root)
    state = read_state_at(root, base, state_rel)
    # the run's settings, never those of what its earlier waves merged
    project = pinned_project(project, root, start_arg, base, f"--base {base[:12]}",
                             state if wave.number > 1 else None)
    for text in project.config.deprecations:
        warn(text)
    job = _Job(project, spec, plan, batch, wave.number, root, base, state, flags, cancel)
    outcome = job.run(out_path, note, warn)
    atomic_write_json(out_path, {**outcome.result.model_dump(), **outcome.extras})
    return outcome


@dataclass
class _Job:
    """One CI worker job: its checkout is the batch's worktree."""

    project: Project
    spec: Spec
    plan: Plan
    batch: Batch
    wave: int
    root: Path
    base: str
    state: RunState | None
    flags: RunFlags
    cancel: threading.Event

    def run(self, out_path: Path, note: Callable[[str], None],
            warn: Callable[[str], None]) -> BatchOutcome:
        from agentrun.app.checks import (
            capped_price,
            choose_executor,
            provider_config,
            worker_agent,
        )
        from agentrun.core.results import WorkerResult
        from agentrun.core.status import Status, StopReason
        from agentrun.run.assignment import ci_branch
        from agentrun.sandbox.choice import resolve

        agent = worker_agent(self.project, self.plan)  # its `executor:`, as a local run reads it
        request = resolve_run(self.flags, self.project.config, agent_executor=agent.executor)
        box, choice = resolve(request.sandbox_mode, request.allow_network,
                              self.project.config.sandbox)
        if choice.confined:
            from agentrun.sandbox.cgroup import process_cap_note

            cap_note = process_cap_note(box.limits.processes)
            if cap_note:
                warn(cap_note)
        self._check_start()
        blocked = self._blocked()
        share, capped = None, False
        if not blocked:  # a model and the executor's CLI, checked before the branch is made
            cfg = provider_config(self.project, self.plan, self.flags)
            executor = choose_executor(request.executor, cfg.provider, dry_run=False)
            capped_price(request.max_cost_usd, cfg.model, self.project.config.price_overrides())
            share = self._share(request.max_cost_usd)
            capped = share is not None and share <= 0
            if capped:
                blocked = (f"not started: the run's spending cap (${request.max_cost_usd:g}) "
                           "was spent by its earlier waves")
        branch = ci_branch(self.spec.id, self.batch.id)
        _switch(self.root, branch, self.base)
        extras: dict[str, Any] = {"spec": self.spec.id, "wave": self.wave,
                                  "base_commit": self.base, "provider": None, "model": None,
                                  "sandbox": choice.describe()}
        ids = self.batch.ids
        if blocked:
            note(f"{', '.join(ids)}: blocked — {blocked}")
            why = StopReason.COST_CAP if capped else StopReason.COMPLETED
            return BatchOutcome(WorkerResult(group=ids[0], groups=ids, status=Status.BLOCKED,
                                             error=blocked, batch=self.batch.id, branch=branch,
                                             worktree=str(self.root), stop_reason=why), extras)
        assignment = self._assignment(request, cfg, executor, box, branch, out_path, share)
        if share is not None:
            note(f"spending cap: this job may spend ${share:.4f} of the run's "
                 f"${request.max_cost_usd:g} (what the earlier waves left, shared by wave "
                 f"{self.wave}'s {self._jobs()} job(s))")
        extras.update(provider=cfg.provider, model=cfg.model)
        from agentrun.worker import run_assignment

        return BatchOutcome(run_assignment(assignment, self.cancel), extras)

    def _check_start(self) -> None:
        """A clean checkout, on the commit the previous wave's aggregate made."""
        from agentrun import workspace
        from agentrun.run.ci_results import previous_waves_problem

        dirty = workspace.dirty_paths(self.root)
        if dirty:
            raise CannotStart(f"uncommitted changes in the checkout: {', '.join(dirty[:5])}",
                              hint="a CI worker commits everything in the checkout: run it in "
                                   "a clean clone, and write --out outside it")
        wave = self.plan.waves[self.wave - 1]
        problem = previous_waves_problem(self.root, self.plan, self.state, wave, self.base,
                                         f"--base {self.base[:12]}")
        if problem:
            raise CannotStart(problem, hint="run this job on the commit the previous wave's "
                                            "`agentrun aggregate` pushed (check out the branch "
                                            "tip, not the workflow's triggering commit)")

    def _share(self, cap: float | None) -> float | None:
        """This job's share of the run's spending cap (None: no cap). The jobs of a wave run
        at once on machines that share no live counter, so each may spend an equal part of
        what the earlier waves left (their spend, as the execution state at --base records
        it); a worker stops at its share as a local one stops at its allowance."""
        from agentrun.run.spending import spent_so_far

        if cap is None:
            return None
        earlier = spent_so_far(self.state) if self.state is not None and self.wave > 1 \
            else 0.0
        return max(0.0, cap - earlier) / self._jobs()

    def _jobs(self) -> int:
        return len(self.plan.waves[self.wave - 1].batches)

    def _blocked(self) -> str | None:
        """Why the batch cannot run: the run ended, or a dependency did not complete."""
        from agentrun.core.status import Status

        state, ids = self.state, self.batch.ids
        if state is None or self.wave <= 1:
            return None
        if state.status != "running":
            own = state.groups.get(ids[0])
            return (own.error if own and own.status == "blocked" and own.error
                    else f"run {state.run_id} already ended ({state.status})")
        groups = [self.spec.group(gid) for gid in ids]
        deps = {d for group in groups if group is not None for d in group.dependencies}
        failed = sorted(d for d in deps if d in state.groups
                        and Status(state.groups[d].status).blocks_dependents)
        return f"dependency {', '.join(failed)} did not complete" if failed else None

    def _assignment(self, request: Any, cfg: ProviderConfig, executor: str, box: Any,
                    branch: str, out_path: Path, share: float | None) -> Any:
        """The batch's assignment, as the local orchestrator would write it; under a spending
        cap, with its `share` as its allowance, all it gets (nothing raises it)."""
        from agentrun import gitcli
        from agentrun.agent.allowance import Grant
        from agentrun.run.assignment import make_assignment

        config = self.project.config
        options = run_options(request, config, provider=worker_provider(cfg, self.flags),
                              sandbox=box, sandbox_description="", executor=executor)
        git_dir = Path(gitcli.git("rev-parse", "--absolute-git-dir", cwd=self.root))
        record_dir = git_dir / "agentrun" / branch.removeprefix("agentrun/")
        record_dir.mkdir(parents=True, exist_ok=True)
        for name in ("transcript.jsonl", "progress.ndjson", "allowance.json"):
            (record_dir / name).unlink(missing_ok=True)
        run_id = self.state.run_id if self.state and self.wave > 1 else "ci"
        assignment = make_assignment(
            self.project, self.spec, self.plan, options, run_id=run_id,
            spec_path=relpath(self.spec.path, self.root), batch_id=self.batch.id,
            groups=self.batch.ids, worktree=self.root, branch=branch, base=self.base,
            result_path=Path(out_path).absolute(), record_dir=record_dir)
        from agentrun import telemetry

        # its spans join the CI run's one trace, named by the spec and the run's start commit
        start = (self.state.start_commit or self.state.base_commit) \
            if self.state is not None and self.wave > 1 else \
            self.project.start_commit or self.base
        assignment.trace_parent = telemetry.ci_trace_parent(self.spec.id, start)
        if share is not None:  # under the sandbox's read-only .git, as a local allowance is
            allowance = record_dir / "allowance.json"
            Grant(share, final=True).write(allowance)
            assignment.allowance_path = str(allowance)
        if config.setup_command:  # the job's checkout is this worker's worktree: make it ready
            from agentrun.protocol import SetupSettings

            assignment.setup = SetupSettings(command=config.setup_command, source=str(self.root),
                                             network=config.sandbox.setup_network,
                                             timeout_s=request.worker_timeout_s)
        return assignment


def _switch(root: Path, branch: str, base: str) -> None:
    """Check out `branch` at `base`: created here, or reused when it already points there."""
    from agentrun import gitcli, workspace

    existing = workspace.resolve_ref(root, f"refs/heads/{branch}")
    if existing is None:
        gitcli.git("switch", "--quiet", "-c", branch, base, cwd=root)
    elif existing == base:
        gitcli.git("switch", "--quiet", branch, cwd=root)
    else:
        raise CannotStart(f"branch {branch} already exists at {existing[:12]}, not at the base "
                          f"{base[:12]}",
                          hint=f"run in a fresh clone, or delete it: `git branch -D {branch}`")

