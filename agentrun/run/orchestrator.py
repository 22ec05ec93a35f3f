"""The orchestrator: runs a plan's waves with workers, verifies, merges, reports.

Deterministic code, no model tokens. Per wave: each batch gets its own worktree and branch from
the current commit and its own worker; results are checked against git (`verify`); finished
branches are merged in group order (`land`); the failure rules (`scheduler`) decide what runs
next; `record` writes STATE.md, the execution state and the run record. This module only
composes those parts, for a local run and for `agentrun aggregate` (`ci`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

from agentrun import processes, telemetry, workspace
from agentrun.core.errors import AgentrunError, CannotStart, NoSpace, no_space
from agentrun.core.events import (
    BaseEvent,
    BlockedEvent,
    CommittedEvent,
    ErrorInfo,
    EventSink,
    InterruptEvent,
    RemovedLeftoverEvent,
    RunDoneEvent,
    RunStartEvent,
    SkipEvent,
    WarningEvent,
    WaveAggregatedEvent,
    WaveDoneEvent,
    WaveStartEvent,
    WorkerStartEvent,
)
from agentrun.core.fsutil import relpath, remove_stale_temps
from agentrun.core.results import WorkerResult
from agentrun.core.status import RunStatus, Status, StopReason
from agentrun.plan import Batch, Plan, Wave
from agentrun.project import Project
from agentrun.protocol import Assignment, GroupAssignment
from agentrun.report.execution_state import (
    GroupState,
    RunState,
    WaveState,
    load_state,
    save_state,
    state_path,
)
from agentrun.run import scheduler
from agentrun.run.adopt import Adopter, AdoptingBackend, take_over
from agentrun.run.assignment import batch_branch, make_assignment, ref_safe
from agentrun.run.backends import (
    InProcessBackend,
    ProcessBackend,
    WorkerBackend,
    assignment_file,
)
from agentrun.run.execute import AnyGate, execute
from agentrun.run.integration import Integration, IntegrationChecker, sandbox_factory
from agentrun.run.land import Lander, WaveLanding
from agentrun.run.leftovers import sweep
from agentrun.run.options import RunOptions
from agentrun.run.own_files import commit_message, commit_own_changes
from agentrun.run.ratelimit import RateLimitStop
from agentrun.run.record import Recorder, control_dir, new_run_id, now_text
from agentrun.run.review_step import ReviewStep, review_position
from agentrun.run.session import cancel_on_signals, preflight, run_lock
from agentrun.run.spending import Spending, spent_so_far
from agentrun.run.target import Target
from agentrun.run.verify import Delivery, Verifier
from agentrun.spec.fingerprint import group_fingerprints
from agentrun.spec.model import Spec
from agentrun.tools.base import CommandPolicy
from agentrun.tools.environment import discard_private_home, discard_stale_homes
from agentrun.worktree_setup import prepare_worktree


class Orchestrator:
    """One run of `plan`. `backend` runs the workers (default: processes, or in-process with
    `options.use_processes` off); `run_id` continues a run (CI waves after the first);
    `commit_state`: the report commits hold the execution state even where
    `.specflow/execution/` is git-ignored (CI: the next wave's jobs read it from the commit).
    Drive it with `run`, or step its waves with `waves`."""

    def __init__(self, project: Project, spec: Spec, plan: Plan, options: RunOptions,
                 on_event: EventSink | None = None, *, run_id: str | None = None,
                 backend: WorkerBackend | None = None, land_while_running: bool = True,
                 commit_state: bool = False) -> None:
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
        self.trace = telemetry.run_trace(self.run_id, spec.id, plan.mode)
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
        self.land_while_running = land_while_running
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
            self._begin(continuing if continuing is not None else self._initial_state())
            try:
                yield Waves(self, first)
            except Exception as exc:
                full = no_space(exc)
                if full is None:
                    raise
                self._stop_for_space(full)
                raise full from None

    def _announce(self, check_base: bool, aggregate_wave: str | None) -> None:
        """The run starts its waves: `Waves.start`."""
        self.backend.warm_up()  # e.g. the worker processes' server imports while we check
        if check_base:
            self.integration.check_base(self.state.base_commit,
                                        self.options.allow_failing_base)
        self.record.emit(RunStartEvent(run_id=self.run_id, spec=self.spec.id,
                                       mode=self.plan.mode, waves=len(self.plan.waves),
                                       run_dir=str(self.run_dir),
                                       sandbox=self.options.sandbox_description,
                                       aggregate_wave=aggregate_wave))

    @contextlib.contextmanager
    def _session(self, continuing: RunState | None = None) -> Iterator[None]:
        """Preflight, the run lock, signal handlers and the events file around a run (or a
        session `continuing` one: checked to be on its branch before anything is committed)."""
        checked = preflight(self.root, self.spec, allow_dirty=self.options.allow_dirty)
        own = checked.own
        if continuing is not None:
            self._on_branch_of(continuing)
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
                    self._stopped(f"stopped: {_described(exc)}", kind=type(exc).__name__)
                raise
            finally:
                self.record.close_events()
                if self.trace is not None:  # ended by run_done, else here: unfinished
                    self.trace.close()
                discard_private_home()  # the integration checks' and the reviewer's
                discard_stale_homes()  # workers killed on the way (a timeout, Ctrl-C)

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
        state.target_branch = self._on_branch_of(state)
        if state.stop_reason == StopReason.TARGET_MOVED:
            state.stop_reason = None  # landing goes on from here
        target = Target(self.root, state, self.record)
        target.left_at()
        return target

    def _on_branch_of(self, state: RunState) -> str | None:
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

    def _initial_state(self) -> RunState:
        state = RunState(
            run_id=self.run_id, spec_id=self.spec.id, spec_path=relpath(self.spec.path, self.root),
            mode=self.plan.mode, base_commit=workspace.head_commit(self.root),
            target_branch=workspace.current_branch(self.root), started=now_text(),
            provider=self.options.provider.provider, model=self.options.provider.model,
            waves=[WaveState(number=w.number, label=w.label, groups=list(w.groups))
                   for w in self.plan.waves],
            warnings=list(self.options.warnings),
            integration_command=self.options.validation_command or None)
        titles = {g.id: g.title for g in self.spec.groups}
        for wave in self.plan.waves:
            for batch in wave.batches:
                for gid in batch.ids:
                    state.groups[gid] = GroupState(id=gid, title=titles.get(gid, ""),
                                                   wave=wave.label, batch=batch.id)
        # a run of some groups only (`--changed`, a plan's done tasks left out) records their
        # fingerprints as the whole spec defines them, not with the left-out dependencies cut
        fingerprints = self.spec.fingerprints or group_fingerprints(self.spec)
        state.fingerprints = {g: fingerprints[g] for g in state.groups if g in fingerprints}
        if self.options.resume:
            old = load_state(self.state_file)
            if old is None:
                raise CannotStart(f"nothing to resume: no execution state for {self.spec.id}",
                                  hint="run without --resume to start a new run")
            self._on_branch_of(old)
            changed = scheduler.changed_groups(state, old, self.schedule.dependencies)
            for note in scheduler.adopt(state, old, self._landed, changed):
                state.warnings.append(note)
                self.record.emit(WarningEvent(message=note))
            if state.integration_command:
                self.unchecked = scheduler.unchecked(state, old)
            self.adopter = take_over(self.root, self.spec, state, old, self.record.emit,
                                     state.warnings.append, changed)
            self.backend = AdoptingBackend(self.backend, self.adopter)
            # the cap covers what every run of the resumed chain spent too
            self.spending.carry(spent_so_far(old))
            # the resumed run's settings stay those fixed when it started
            state.start_commit = old.start_commit or old.base_commit
            state.config = old.config
        if state.start_commit is None:  # a CI run's is the plan's commit (`--start-commit`)
            state.start_commit = self.project.start_commit or state.base_commit
        if state.config is None:
            state.config = self.project.config.model_dump(mode="json")
        self.record.write_settings(state.start_commit, state.config)
        state.spent_usd = round(self.spending.spent, 6)
        return state

    def _landed(self, group: GroupState) -> bool:
        """A group's work is in history when its merge (or all its commits) reach HEAD."""
        head = workspace.head_commit(self.root)
        refs = [group.merge_commit] if group.merge_commit else group.commits
        if not refs:
            return group.status == Status.COMPLETE
        return all(workspace.resolve_ref(self.root, c) and
                   workspace.is_ancestor(self.root, c, head) for c in refs)

    # -- waves ------------------------------------------------------------------------------
    def _run_wave(self, wave: Wave) -> bool:
        """Run one wave; returns True when the failure rules abort the run."""
        state, emit = self.state, self.record.emit
        state.waves[wave.number - 1].status = "running"
        state.current_wave = wave.number
        self.record.save(progress=scheduler.wave_progress(wave.number, len(self.plan.waves)))
        triage = self.schedule.triage(state, wave)
        for batch in wave.batches:
            if batch.id in triage.skipped:
                emit(SkipEvent(batch=batch.id, reason="already complete"))
            elif batch.id in triage.blocked:
                blockers = triage.blocked[batch.id]
                for gid in batch.ids:
                    group = state.groups[gid]
                    group.status = Status.BLOCKED
                    group.error = f"dependency {', '.join(blockers)} did not complete"
                emit(BlockedEvent(batch=batch.id, groups=tuple(batch.ids), by=tuple(blockers)))
        emit(WaveStartEvent(wave=wave.label, number=wave.number,
                            batches=tuple(b.id for b in triage.todo)))
        # without a check of the merged result, a worktree goes as soon as its work lands
        landing = WaveLanding(self.lander, self.schedule.landing_order(triage.todo),
                              remove_early=self.integration.checker is None)
        base = workspace.head_commit(self.root)
        # merges an earlier run made but never saw pass their check: checked with this wave's
        unchecked = [b for b in wave.batches if b.id in triage.skipped
                     and any(g in self.unchecked for g in b.ids)]
        results = execute(
            triage.todo, base, self.backend,
            max_parallel=self.options.max_parallel, cancel=self.cancel,
            verify=self.verify_delivery, not_started=self._not_started,
            gate=AnyGate(self.spending, self.rate_limit),
            on_result=landing.land_ready if self.land_while_running else lambda _: None)
        landed = landing.finish(results)
        if unchecked:
            base, landed = self._before(unchecked) or base, [*unchecked, *landed]
        broken = self.integration.after_wave(wave.label, base, landed)
        self.unchecked -= {g for b in unchecked for g in b.ids}
        landing.clean_up()
        state.waves[wave.number - 1].status = "failed" if broken else "done"
        self.record.save()
        ran = [g for b in triage.todo for g in b.ids]
        failed = [g for g in ran if state.groups[g].status == Status.FAILED]
        emit(WaveDoneEvent(wave=wave.label, failed=tuple(failed)))
        if self.cancel.is_set():
            return False
        if broken or self.target.stopped:  # the failure rules do not apply
            return True
        if self.rate_limit.closed():
            state.stop_reason = StopReason.RATE_LIMITED
            state.warnings.append(self.rate_limit.summary())
            return True
        if self.spending.reached and (wave.number < len(self.plan.waves) or any(
                state.groups[g].status != Status.COMPLETE for g in ran)):
            state.stop_reason = StopReason.COST_CAP
            state.warnings.append(self.spending.summary())
            return True
        verdict = scheduler.wave_verdict(wave.label, ran, failed, self.options.on_failure,
                                         self.options.ask_continue)
        if verdict.warning:
            state.warnings.append(verdict.warning)
        return verdict.abort

    def _before(self, batches: list[Batch]) -> str | None:
        """The commit before the earliest merge of `batches` (the base their check needs)."""
        merges = [c for b in batches for g in b.ids if (c := self.state.groups[g].merge_commit)]
        first = next((c for c in merges if all(workspace.is_ancestor(self.root, c, other)
                                               for other in merges)), None)
        return workspace.resolve_ref(self.root, f"{first}^1") if first else None

    def _skip_wave(self, wave: Wave, reason: str) -> None:
        self.state.waves[wave.number - 1].status = "skipped"
        why = self.state.stop_reason  # a cap or a rate limit: the groups' reason too
        for gid in wave.groups:
            group = self.state.groups[gid]
            if group.status == Status.PENDING:
                group.status, group.error = Status.BLOCKED, reason
                if why in (StopReason.COST_CAP, StopReason.RATE_LIMITED):
                    group.stop_reason = why
        self.record.save()

    def _stop_for_space(self, error: NoSpace) -> None:
        """The disk filled up: the checkpoint and STATE.md say the run stopped, if that still
        fits; else the last checkpoint saved stands (whole: every write is atomic), and
        `--resume` reconciles it with the merges in git, as after a kill."""
        self.record.release_reserve()
        error.hint = (f"free some space on that disk, then `agentrun run {self.spec.id} "
                      "--resume`" if self.state_file.exists() else
                      "free some space on that disk, then run again")
        self._stopped(f"stopped: {error.message}",
                      f"free disk space, then `agentrun run {self.spec.id} --resume`",
                      kind=type(error).__name__)

    def _stopped(self, why: str, next_step: str | None = None, *, kind: str) -> None:
        """The run ends here, by an error rather than by its own end: it is `interrupted`
        (its unfinished groups too, for `--resume`), saying why, in the checkpoint, STATE.md
        and the run record — as far as each can still be written (every write is atomic:
        else the last one stands)."""
        self.cancel.set()
        state = self.state
        lander = getattr(self, "lander", None)  # none before the run began
        if lander is not None:
            with contextlib.suppress(Exception):  # removals under way end before the record
                lander.settle()
        scheduler.settle(state, interrupted=True)
        state.status, state.finished = RunStatus.INTERRUPTED, now_text()
        state.warnings.append(why)
        progress, position = scheduler.final_position(state, interrupted=True)
        with contextlib.suppress(Exception):
            save_state(self.state_file, state)
        with contextlib.suppress(Exception):
            self.record.update_state_md(
                status=position, progress=progress, when=state.finished,
                next_step=next_step or f"inspect, then `agentrun run {self.spec.id} --resume`")
        with contextlib.suppress(Exception):
            self.record.write_result()
        with contextlib.suppress(Exception):
            self.record.write_html(control_dir(self.root, self.run_id))
        with contextlib.suppress(Exception):
            self.record.emit(RunDoneEvent(status=state.status, run_dir=str(self.run_dir),
                                          error=ErrorInfo(type=kind, message=why)))

    def prepare(self, batch: Batch, base: str) -> Assignment:
        """A local worker's worktree, branch and assignment file; its groups now run."""
        branch = batch_branch(self.spec.id, self.run_id, batch.id)
        wt_path = self.run_dir / "worktrees" / ref_safe(batch.id)
        workspace.create_worktree(self.root, wt_path, branch, base, checkout=False)
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

    def _not_started(self, batch: Batch) -> None:
        capped = self.spending.reached and not self.cancel.is_set()
        limited = self.rate_limit.closed() and not self.cancel.is_set()
        for gid in batch.ids:
            g = self.state.groups[gid]
            if limited and not capped:
                g.status, g.error = Status.BLOCKED, scheduler.RATE_LIMIT_REASON
                g.stop_reason = StopReason.RATE_LIMITED
            elif capped:
                g.status, g.error = Status.BLOCKED, scheduler.COST_CAP_REASON
                g.stop_reason = StopReason.COST_CAP
            else:
                g.status, g.error = Status.INTERRUPTED, "interrupted before the worker started"
                g.stop_reason = StopReason.INTERRUPTED

    def fix(self, state: RunState, cycles: int) -> RunState:
        """`agentrun fix`: continue the run in `state` with fix cycles for its last review's
        open findings, each followed by a review."""
        assert self.reviews is not None, "fix cycles need review settings"
        with self.waves(state):
            self.spending.carry(spent_so_far(state))  # the run's spend so far: cap and total
            self.reviews.cycles(cycles, review_first=False)
            return self.close(interrupted=self.cancel.is_set())

    # -- the end ----------------------------------------------------------------------------
    def _finish(self, interrupted: bool) -> RunState:
        state = self.state
        if self.adopter is not None:
            self.adopter.discard()
        scheduler.settle(state, interrupted)
        if not interrupted:
            self.target.ready()  # switched since the last merge: no summary lands there
        status = scheduler.final_status(state, interrupted)
        # the review is part of the run: until it approves, no state says complete, and a
        # run killed during it is not finished (`--resume` or `agentrun review` completes it)
        reviewing = self.reviews is not None and status == RunStatus.COMPLETE
        state.status = RunStatus.REVIEWING if reviewing else status
        state.finished = None if reviewing else now_text()
        if self.reviews is None:
            state.review_skipped = self.options.review_skipped
        save_state(self.state_file, state)
        if reviewing:
            total = len(self.plan.waves)
            self.record.update_state_md(
                status="running", progress=f"Reviewing (Wave {total}/{total} merged)",
                when=now_text(), next_step=f"if this run stops: `agentrun run {self.spec.id} "
                                           "--resume` or `agentrun review` completes it")
        # the spec: Execution Summary and status (review only when everything completed)
        if not self.target.stopped:
            self.record.write_summary(now_text(), status="review"
                                      if status == RunStatus.COMPLETE else None)
        if self.reviews is not None and not interrupted:
            self.reviews.after_run()
        return self.close(interrupted=state.status == RunStatus.INTERRUPTED)

    def close(self, interrupted: bool) -> RunState:
        """STATE.md, the run record and the report commit, once the run's status is final.
        The report commit lands only on the run's branch: switched away, the run is not
        complete (its work waits for `--resume` there)."""
        state = self.state
        self.lander.settle()  # the worktree removals that ran alongside the end of the run
        if not interrupted and not self.target.stopped and not self.target.ready():
            state.status = scheduler.final_status(state, interrupted=False)
        progress, position = scheduler.final_position(state, interrupted)
        next_step = ("review the changes, then `agentrun status`" if position == "review"
                     else f"inspect, then `agentrun run {self.spec.id} --resume`")
        reviewed = review_position(state)
        if self.target.stopped:
            next_step = (f"`git switch {state.target_branch}`, then `agentrun run "
                         f"{self.spec.id} --resume`")
        elif reviewed:
            progress, position, next_step = reviewed
        save_state(self.state_file, state)
        self.record.update_state_md(
            status=position, progress=progress, warnings=scheduler.final_warnings(state),
            when=state.finished, next_step=next_step)
        self.record.write_result()
        if not interrupted and not self.target.stopped:
            self.record.commit_report()
            self.target.left_at()
        report = self.record.write_html(control_dir(self.root, self.run_id))
        self.record.emit(RunDoneEvent(status=state.status, run_dir=str(self.run_dir),
                                      tokens=state.usage.total, cost_usd=state.cost_usd,
                                      report=str(report) if report else None))
        return state


def _described(exc: BaseException) -> str:
    """An error that ended a run, in a line."""
    if isinstance(exc, AgentrunError):
        return exc.message
    if isinstance(exc, KeyboardInterrupt | SystemExit) or any(  # or a prompt's end of input
            c.__name__ == "Abort" and c.__module__.startswith("click")
            for c in type(exc).__mro__):
        return "interrupted"
    return f"internal error: {type(exc).__name__}: {exc}"


class Waves:
    """A run stepped one wave at a time (`Orchestrator.waves`): the one loop of a local run
    (`Orchestrator.run` steps every wave) and of a CI aggregate (run/ci.py steps the wave its
    jobs ran, then pauses the run or finishes it).

    Each step runs the next wave with the orchestrator's backend, verification, merges,
    integration check and failure rules; after the rules abort the run, a step skips the wave
    instead. Nothing else of the orchestrator is for drivers to touch.
    """

    def __init__(self, orchestrator: Orchestrator, first: int) -> None:
        self._orch = orchestrator
        self._next = first - 1  # index of the wave `step` takes
        self.aborted = False  # the failure rules stopped the run: the later waves are skipped

    @property
    def state(self) -> RunState:
        return self._orch.state

    @property
    def interrupted(self) -> bool:
        return self._orch.cancel.is_set()

    @property
    def next_wave(self) -> Wave | None:
        """The wave `step` takes next; None once every wave is done, or the run interrupted."""
        waves = self._orch.plan.waves
        return None if self.interrupted or self._next >= len(waves) else waves[self._next]

    def start(self, *, check_base: bool, aggregate_wave: str | None = None) -> None:
        """Announce the run (`run_start`; `aggregate_wave`: the wave a CI aggregate takes in),
        after the validation command checked the base commit when `check_base`; a run
        starting at wave 1 records itself running."""
        self._orch._announce(check_base, aggregate_wave)
        if self._next == 0:
            self._orch.record.save(progress=scheduler.wave_progress(1, len(self._orch.plan.waves)),
                                   status="running")

    def step(self) -> Wave:
        """Run the next wave (skip it, once the run is aborted); returns it."""
        wave = self.next_wave
        assert wave is not None, "no wave left to step"
        self._next += 1
        if self.aborted:
            self._orch._skip_wave(wave, scheduler.abort_reason(self.state))
        else:
            self.aborted = self._orch._run_wave(wave)
        return wave

    def finish(self) -> RunState:
        """End the run: the waves an abort left are skipped, the run's status is final, its
        reports are written and committed, and the review follows a complete run."""
        while self.aborted and self.next_wave is not None:
            self.step()
        return self._orch._finish(interrupted=self.interrupted)

    def pause(self, next_step: str, message: str) -> RunState:
        """Stop between waves with the run still running (a CI aggregate, whose next wave's
        jobs start from the commit made here): the execution state, an interim Execution
        Summary and STATE.md (`next_step`) are saved and committed with `message`."""
        orch, state = self._orch, self.state
        done, nxt = orch.plan.waves[self._next - 1], self.next_wave
        assert nxt is not None and not self.aborted, "only a run with waves left pauses"
        orch.lander.settle()  # the worktree removals under way end before the state is saved
        save_state(orch.state_file, state)
        when = now_text()
        orch.record.write_summary(when)
        orch.record.update_state_md(
            status="running", when=when, next_step=next_step,
            progress=scheduler.wave_progress(nxt.number, len(orch.plan.waves), done.number))
        orch.record.write_result()
        orch.record.write_html()  # this wave's report (the CI artifact agentrun-report-waveN)
        orch.record.commit_report(message)
        orch.record.emit(WaveAggregatedEvent(wave=done.label, next_wave=nxt.label))
        return state
