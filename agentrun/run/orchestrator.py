"""The orchestrator: runs a plan's waves with workers, verifies, merges, reports.

Deterministic code, no model tokens. Per wave: each batch gets its own worktree and branch from
the current commit and its own worker; results are checked against git (`verify`); finished
branches are merged in group order (`land`); the failure rules (`scheduler`) decide what runs
next; `record` writes STATE.md, the execution state and the run record. This module only
composes those parts, for a local run and for `agentrun aggregate` (`ci`): the session around
a run (preflight, lock, signals) and each worker's worktree and assignment are here; where the
run starts from is `start_state`'s, the wave runner (`Waves`) is `waves`', and how the run ends
(its final status and records, or a stop on an error) is `ending`'s.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

from agentrun import processes, telemetry, workspace, worktrees
from agentrun.core.errors import CannotStart, no_space
from agentrun.core.events import (
    BaseEvent,
    CommittedEvent,
    EventSink,
    InterruptEvent,
    RemovedLeftoverEvent,
    WarningEvent,
    WorkerStartEvent,
)
from agentrun.core.fsutil import relpath, remove_stale_temps
from agentrun.core.results import WorkerResult
from agentrun.core.status import Status, StopReason
from agentrun.plan import Batch, Plan
from agentrun.project import Project
from agentrun.protocol import Assignment, GroupAssignment
from agentrun.report.execution_state import RunState, load_state, state_path
from agentrun.run import ending, scheduler
from agentrun.run.adopt import Adopter
from agentrun.run.assignment import batch_branch, make_assignment, ref_safe
from agentrun.run.backends import InProcessBackend, WorkerBackend, assignment_file
from agentrun.run.integration import Integration, IntegrationChecker, sandbox_factory
from agentrun.run.land import Lander
from agentrun.run.leftovers import sweep
from agentrun.run.options import RunOptions
from agentrun.run.own_files import commit_message, commit_own_changes
from agentrun.run.process_backend import ProcessBackend
from agentrun.run.ratelimit import RateLimitStop
from agentrun.run.record import Recorder, control_dir, new_run_id
from agentrun.run.review_step import ReviewStep
from agentrun.run.session import cancel_on_signals, preflight, run_lock
from agentrun.run.spending import Spending, spent_so_far
from agentrun.run.start_state import initial_state
from agentrun.run.target import Target
from agentrun.run.verify import Delivery, Verifier
from agentrun.run.waves import Waves
from agentrun.spec.model import Spec
from agentrun.tools.base import CommandPolicy
from agentrun.tools.environment import discard_private_home
from agentrun.worktree_setup import prepare_worktree


class Orchestrator:
    """One run of `plan`. `backend` runs the workers (default: processes, or in-process with
    `options.use_processes` off); `run_id` continues a run (CI waves after the first);
    `workers_ran`: the backend hands over work CI jobs have already done (a CI aggregate):
    the whole wave is verified, then merged, and neither the spending cap nor a rate limit
    keeps a result from being taken (its work is paid for; they stop the next wave instead);
    `commit_state`: the report commits hold the execution state even where
    `.specflow/execution/` is git-ignored (CI: the next wave's jobs read it from the commit).
    Drive it with `run`, or step its waves with `waves`."""

    def __init__(self, project: Project, spec: Spec, plan: Plan, options: RunOptions,
                 on_event: EventSink | None = None, *, run_id: str | None = None,
                 backend: WorkerBackend | None = None, workers_ran: bool = False,
                 commit_state: bool = False, trace_parent: str | None = None) -> None:
        self.project = project
        self.spec = spec
        self.plan = plan
        self.options = options
        self.cancel = threading.Event()
        self.root = workspace.repo_root(project.root)
        self.run_id = run_id or new_run_id()
        self.run_dir = project.runs_dir / self.run_id
        self.state_file = state_path(project.execution_dir, spec.id)
        # the run's trace, when the environment asks for one: a consumer of its events
        # (`trace_parent`: the trace of the CI run this aggregate is a job of)
        self.trace = telemetry.run_trace(self.run_id, spec.id, plan.mode, trace_parent)
        self.record = Recorder(project, spec, plan.mode, self.run_id, self.run_dir,
                               self.state_file, telemetry.tee(on_event, self.trace))
        self.record.force_state = commit_state
        self.schedule = scheduler.Schedule(spec)
        self.setup = options.setup and options.setup.model_copy(
            update={"cache_dir": str(self.run_dir / "cache")})  # shared by the run's worktrees
        self.spending = Spending(options.max_cost_usd, options.provider.model, options.pricing,
                                 self.record.emit)
        self.rate_limit = RateLimitStop(self.record.emit)
        self.backend = backend or self._local_backend()
        self.workers_ran = workers_ran
        self._state: RunState | None = None
        self.fix_groups: dict[str, GroupAssignment] = {}  # fix batches: their one group
        self.reviews = ReviewStep(self, options.review) if options.review else None
        self.adopter: Adopter | None = None  # a resume's take-over of the dead run's work
        self.notes: list[str] = []  # what the checks before the run set right: warnings
        # groups a resume kept whose merges the dead run never saw pass the integration check
        self.unchecked: set[str] = set()

    @property
    def state(self) -> RunState:
        assert self._state is not None, "the run has not begun"
        return self._state

    def _local_backend(self) -> WorkerBackend:
        if not self.options.use_processes:
            return InProcessBackend(self.prepare, self.cancel)
        return ProcessBackend(self.prepare, self.cancel, self._relay,
                              timeout_s=self.options.limits.timeout_s,
                              provider=self.options.provider.provider,
                              warn=lambda text: self.state.warnings.append(text),
                              in_process=lambda a: self._allow(a, alone=True))

    def _relay(self, event: BaseEvent, record: bool = True) -> None:
        """A worker's progress: its model turns count against the spending cap, and a rate
        limit it stopped on stops the run."""
        self.spending.observe(event)
        self.rate_limit.observe(event)
        self.record.emit(event, record=record)

    # -- the run ----------------------------------------------------------------------------
    def run(self) -> RunState:
        """Every wave, from the base check to the run's report and review."""
        with self.waves() as waves:
            self.state.process = processes.token()  # whose end readers may check for
            waves.start(check_base=True)
            while waves.next_wave is not None:
                waves.step()
            return waves.finish()

    @contextlib.contextmanager
    def waves(self, continuing: RunState | None = None, *, first: int = 1) -> Iterator[Waves]:
        """The run, to be stepped wave by wave from wave `first`: a new one (`options.resume`:
        taking over the last run's work), or `continuing` the run in that state (a CI wave
        after the first, `agentrun fix`). Around it: the session (preflight, run lock,
        signals, events file); a full disk met on the way stops the run as interrupted, saying
        so where it still fits, and is raised as `NoSpace` (exit 2)."""
        resumed = load_state(self.state_file) if continuing is None and self.options.resume \
            else None
        with self._session(continuing if continuing is not None else resumed):
            self._begin(continuing if continuing is not None else initial_state(self))
            if continuing is not None:  # the cap and the total count what the run spent so far
                self.spending.carry(spent_so_far(continuing))
            try:
                yield Waves(self, first)
            except Exception as exc:
                full = no_space(exc)
                if full is None:
                    raise
                ending.stop_for_space(self, full)
                raise full from None

    @contextlib.contextmanager
    def _session(self, continuing: RunState | None = None) -> Iterator[None]:
        """Preflight, the run lock, signal handlers and the events file around a run (or a
        session `continuing` one: checked to be on its branch before anything is committed)."""
        checked = preflight(self.root, self.spec, allow_dirty=self.options.allow_dirty)
        own = checked.own
        if continuing is not None:
            self.on_branch_of(continuing)
        with run_lock(self.root, self.run_id), cancel_on_signals(
                self.cancel, lambda name: self.record.emit(InterruptEvent(signal=name))):
            for path in (self.spec.path, self.project.state_md, self.state_file):
                remove_stale_temps(path)  # a killed run's half-done writes: ours to clear
            self.record.open_events()
            try:
                for removed in sweep(self.root, self.project.runs_dir, self.run_id):
                    self.record.emit(RemovedLeftoverEvent(path=removed))
                for note in checked.notes:
                    self.notes.append(note)
                    self.record.emit(WarningEvent(message=note))
                commit = commit_own_changes(self.root, self.spec, own)
                if commit:
                    self.record.emit(CommittedEvent(
                        commit=commit, paths=tuple(own),
                        message=commit_message(self.spec, self.root, own)))
                yield
            except BaseException as exc:
                # a run this process recorded as running says how it ended (a refusal before
                # its first checkpoint, such as a failing base, recorded nothing to correct)
                if self.record.saved and self._state is not None \
                        and self._state.finished is None:
                    ending.stopped(self, f"stopped: {ending.described(exc)}",
                                   kind=type(exc).__name__)
                raise
            finally:
                self.record.close_events()
                if self.trace is not None:  # ended by run_done, else here: unfinished
                    self.trace.close()
                discard_private_home()  # the integration checks' and the reviewer's
                processes.discard_stale_temp_dirs()  # workers killed on the way (timeout, ^C)

    def _begin(self, state: RunState) -> None:
        state.warnings.extend(n for n in self.notes if n not in state.warnings)
        self._state = state
        if self.trace is not None:
            state.trace_id = self.trace.trace_id
        # agents and prompts: the run's start commit's, whatever the working tree holds now
        self.project.start_at(state.start_commit or state.base_commit)
        self.record.state = state
        self.target = self._target(state)
        self.verifier = Verifier(self.root, state, self.record, self.cancel)
        self.lander = Lander(self.root, self.spec.id, state, self.record, self.cancel,
                             self.target)
        self.integration = Integration(self.root, state, self.record, self._checker())
        self.spending.on_total = lambda total: setattr(state, "spent_usd", round(total, 6))

    def _target(self, state: RunState) -> Target:
        """This session lands on the branch the run started on, from where HEAD is now: a
        run continued (`--resume`, a CI wave, `agentrun fix`) on another branch could not
        start (it would split the run's merges across two branches)."""
        state.target_branch = self.on_branch_of(state)
        if state.stop_reason == StopReason.TARGET_MOVED:
            state.stop_reason = None  # landing goes on from here
        target = Target(self.root, state, self.record)
        target.left_at()
        return target

    def on_branch_of(self, state: RunState) -> str | None:
        """The branch checked out, which must be the one `state`'s run merges into."""
        branch = workspace.current_branch(self.root)
        if state.target_branch and branch != state.target_branch:
            raise CannotStart(f"run {state.run_id} of {self.spec.id} merged into "
                              f"{state.target_branch}, but {branch} is checked out: going on "
                              "here would split its work across two branches",
                              hint=f"`git switch {state.target_branch}`, then run again")
        return branch

    def _checker(self) -> IntegrationChecker | None:
        command = self.options.validation_command
        if not command:
            return None
        policy = CommandPolicy(env_allow=tuple(self.project.config.command_env))
        setup = self.setup

        def prepare(worktree: Path, log: Path) -> None:  # the merged result, set up first
            assert setup is not None
            prepare_worktree(setup, worktree, self.options.sandbox, policy, log)

        return IntegrationChecker(
            self.root, self.run_dir / "integration",
            lambda name: batch_branch(self.spec.id, self.run_id, name), command,
            self.options.validation_timeout_s, sandbox_factory(self.options.sandbox), self.cancel,
            policy, prepare=prepare if setup else None)

    def prepare(self, batch: Batch, base: str) -> Assignment:
        """A local worker's worktree, branch and assignment file; its groups now run."""
        branch = batch_branch(self.spec.id, self.run_id, batch.id)
        wt_path = self.run_dir / "worktrees" / ref_safe(batch.id)
        worktrees.create_worktree(self.root, wt_path, branch, base, checkout=False)
        wdir = control_dir(self.root, self.run_id) / "workers" / ref_safe(batch.id)
        tdir = self.run_dir / "workers" / ref_safe(batch.id)  # the transcript, for people
        for folder in (wdir, tdir):
            folder.mkdir(parents=True, exist_ok=True)
        assignment = make_assignment(
            self.project, self.spec, self.plan, self.options, run_id=self.run_id,
            spec_path=relpath(self.spec.path, self.root), batch_id=batch.id, groups=batch.ids,
            worktree=wt_path, branch=branch, base=base, result_path=wdir / "result.json",
            record_dir=tdir, control_dir=wdir)
        if batch.id in self.fix_groups:  # a fix batch's group is not in the spec
            assignment.groups = [self.fix_groups[batch.id]]
        assignment.setup = self.setup
        if self.trace is not None:  # the worker continues the group's span
            assignment.trace_parent = self.trace.parent_for(batch.id)
        if self.integration.base_fails:  # every worker's own check would fail: merges judge
            assignment.validation_command = None
        if self.spending.cap is not None:  # its share of the cap, before it can spend
            assignment.allowance_path = str(wdir / "allowance.json")
            self._allow(assignment, alone=self.backend.sequential)
        assignment.write(assignment_file(assignment))
        for gid in batch.ids:
            g = self.state.groups[gid]
            g.status, g.branch, g.worktree = Status.RUNNING, assignment.branch, \
                assignment.worktree
        self.record.emit(WorkerStartEvent(batch=batch.id, groups=tuple(batch.ids),
                                          worktree=assignment.worktree,
                                          branch=assignment.branch))
        return assignment

    def _allow(self, assignment: Assignment, alone: bool) -> None:
        if assignment.allowance_path:
            self.spending.allow(assignment.batch, Path(assignment.allowance_path), alone=alone)

    def read_ahead(self, d: Delivery) -> None:
        """Start reading from git what `verify_delivery(d)` will check (Verifier.read_ahead)."""
        self.verifier.read_ahead(d)

    def verify_delivery(self, d: Delivery) -> WorkerResult:
        """Check a worker's result against git; the cap counts what it cost."""
        if d.batch in self.spending.stopped or d.result.stop_reason == StopReason.COST_CAP:
            committed = bool(workspace.resolve_ref(self.root, d.ref)
                             and workspace.commits_since(self.root, d.base, d.ref))
            d.result = self.spending.capped(d.result, committed)
        result = self.verifier.check(d)
        self.spending.settle(d.batch, result)
        if result.stop_reason == StopReason.RATE_LIMITED:  # (an in-process worker's too)
            self.rate_limit.hit(d.batch, result.error or "rate limited")
        return result

    def fix(self, state: RunState, cycles: int) -> RunState:
        """`agentrun fix`: continue the run in `state` with fix cycles for its last review's
        open findings, each followed by a review."""
        assert self.reviews is not None, "fix cycles need review settings"
        with self.waves(state):
            self.reviews.cycles(cycles, review_first=False)
            return ending.close(self, interrupted=self.cancel.is_set())
