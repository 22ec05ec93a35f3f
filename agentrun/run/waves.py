"""The wave runner: a run stepped one wave at a time, and what one wave's step does.

A local `agentrun run` and a CI aggregate (run/ci.py) run their waves with this one loop
(docs/ARCHITECTURE.md, "In CI"): per wave, the failure rules' triage, the workers on the run's
backend (run/execute.py), verification, merges in group order (run/land.py), the integration
check of the merged result and the verdict that may abort the run; between a CI run's waves,
the pause that commits the state the next wave's jobs start from. The orchestrator
(run/orchestrator.py) sets the run up and hands it over; the run's ending is run/ending.py's.
"""

from __future__ import annotations

from typing import Protocol

from agentrun import workspace
from agentrun.core.events import (
    BlockedEvent,
    RunStartEvent,
    SkipEvent,
    WaveAggregatedEvent,
    WaveDoneEvent,
    WaveStartEvent,
)
from agentrun.core.results import WorkerResult
from agentrun.core.status import Status, StopReason
from agentrun.plan import Batch, Wave
from agentrun.report.execution_state import RunState, save_state
from agentrun.run import ending, scheduler
from agentrun.run.backends import WorkerBackend
from agentrun.run.execute import AnyGate, execute
from agentrun.run.integration import Integration
from agentrun.run.land import WaveLanding
from agentrun.run.ratelimit import RateLimitStop
from agentrun.run.record import now_text
from agentrun.run.spending import Spending
from agentrun.run.verify import Delivery
from agentrun.spec.writeback import next_audit_version


class RunHost(ending.RunEnd, Protocol):
    """What the wave runner uses of the run it steps (the orchestrator)."""

    backend: WorkerBackend
    integration: Integration
    schedule: scheduler.Schedule
    spending: Spending
    rate_limit: RateLimitStop
    workers_ran: bool
    unchecked: set[str]

    def verify_delivery(self, d: Delivery) -> WorkerResult: ...

    def read_ahead(self, d: Delivery) -> None: ...


class Waves:
    """A run stepped one wave at a time (`Orchestrator.waves`): the one loop of a local run
    (`Orchestrator.run` steps every wave) and of a CI aggregate (run/ci.py steps the wave its
    jobs ran, then pauses the run or finishes it).

    Each step runs the next wave with the orchestrator's backend, verification, merges,
    integration check and failure rules; after the rules abort the run, a step skips the wave
    instead. Nothing else of the orchestrator is for drivers to touch.
    """

    def __init__(self, orchestrator: RunHost, first: int) -> None:
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
        orch = self._orch
        orch.backend.warm_up()  # e.g. the worker processes' server imports while we check
        if check_base:
            orch.integration.check_base(self.state.base_commit, orch.options.allow_failing_base)
        spec = orch.spec
        # the spec's audit, once a run (not in every CI aggregate); another tool's plan has none
        status, audits = ((spec.status or "unset", next_audit_version(spec.text) - 1)
                          if spec.source is None and aggregate_wave is None else (None, None))
        orch.record.emit(RunStartEvent(run_id=orch.run_id, spec=spec.id,
                                       mode=orch.plan.mode, waves=len(orch.plan.waves),
                                       run_dir=str(orch.run_dir),
                                       sandbox=orch.options.sandbox_description,
                                       aggregate_wave=aggregate_wave, audit_status=status,
                                       audits=audits))
        if self._next == 0:
            orch.record.save(progress=scheduler.wave_progress(1, len(orch.plan.waves)),
                             status="running")

    def step(self) -> Wave:
        """Run the next wave (skip it, once the run is aborted); returns it."""
        wave = self.next_wave
        assert wave is not None, "no wave left to step"
        self._next += 1
        if self.aborted:
            self._skip_wave(wave, scheduler.abort_reason(self.state))
        else:
            self.aborted = self._run_wave(wave)
        return wave

    def finish(self) -> RunState:
        """End the run: the waves an abort left are skipped, the run's status is final, its
        reports are written and committed, and the review follows a complete run."""
        while self.aborted and self.next_wave is not None:
            self.step()
        return ending.finish(self._orch, interrupted=self.interrupted)

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

    def _run_wave(self, wave: Wave) -> bool:
        """Run one wave; returns True when the failure rules abort the run."""
        orch = self._orch
        state, emit = orch.state, orch.record.emit
        state.waves[wave.number - 1].status = "running"
        state.current_wave = wave.number
        orch.record.save(progress=scheduler.wave_progress(wave.number, len(orch.plan.waves)))
        triage = orch.schedule.triage(state, wave)
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
        landing = WaveLanding(orch.lander, orch.schedule.landing_order(triage.todo),
                              remove_early=orch.integration.checker is None)
        base = workspace.head_commit(orch.root)
        # merges an earlier run made but never saw pass their check: checked with this wave's
        unchecked = [b for b in wave.batches if b.id in triage.skipped
                     and any(g in orch.unchecked for g in b.ids)]
        results = execute(
            triage.todo, base, orch.backend,
            max_parallel=orch.options.max_parallel, cancel=orch.cancel,
            verify=orch.verify_delivery, read_ahead=orch.read_ahead,
            not_started=self._not_started,
            gate=None if orch.workers_ran else AnyGate(orch.spending, orch.rate_limit),
            on_result=(lambda _: None) if orch.workers_ran else landing.land_ready)
        landed = landing.finish(results)
        if unchecked:
            base, landed = self._before(unchecked) or base, [*unchecked, *landed]
        broken = orch.integration.after_wave(wave.label, base, landed)
        orch.unchecked -= {g for b in unchecked for g in b.ids}
        landing.clean_up()
        state.waves[wave.number - 1].status = "failed" if broken else "done"
        orch.record.save()
        ran = [g for b in triage.todo for g in b.ids]
        failed = [g for g in ran if state.groups[g].status == Status.FAILED]
        emit(WaveDoneEvent(wave=wave.label, failed=tuple(failed)))
        if orch.cancel.is_set():
            return False
        if broken or orch.target.stopped:  # the failure rules do not apply
            return True
        if orch.rate_limit.closed():
            state.stop_reason = StopReason.RATE_LIMITED
            state.warnings.append(orch.rate_limit.summary())
            return True
        if orch.spending.reached and (wave.number < len(orch.plan.waves) or any(
                state.groups[g].status != Status.COMPLETE for g in ran)):
            state.stop_reason = StopReason.COST_CAP
            state.warnings.append(orch.spending.summary())
            return True
        verdict = scheduler.wave_verdict(wave.label, ran, failed, orch.options.on_failure,
                                         orch.options.ask_continue)
        if verdict.warning:
            state.warnings.append(verdict.warning)
        return verdict.abort

    def _before(self, batches: list[Batch]) -> str | None:
        """The commit before the earliest merge of `batches` (the base their check needs)."""
        orch = self._orch
        merges = [c for b in batches for g in b.ids if (c := orch.state.groups[g].merge_commit)]
        first = next((c for c in merges if all(workspace.is_ancestor(orch.root, c, other)
                                               for other in merges)), None)
        return workspace.resolve_ref(orch.root, f"{first}^1") if first else None

    def _skip_wave(self, wave: Wave, reason: str) -> None:
        orch = self._orch
        orch.state.waves[wave.number - 1].status = "skipped"
        why = orch.state.stop_reason  # a cap or a rate limit: the groups' reason too
        for gid in wave.groups:
            group = orch.state.groups[gid]
            if group.status == Status.PENDING:
                group.status, group.error = Status.BLOCKED, reason
                if why in (StopReason.COST_CAP, StopReason.RATE_LIMITED):
                    group.stop_reason = why
        orch.record.save()

    def _not_started(self, batch: Batch) -> None:
        orch = self._orch
        capped = orch.spending.reached and not orch.cancel.is_set()
        limited = orch.rate_limit.closed() and not orch.cancel.is_set()
        for gid in batch.ids:
            g = orch.state.groups[gid]
            if limited and not capped:
                g.status, g.error = Status.BLOCKED, scheduler.RATE_LIMIT_REASON
                g.stop_reason = StopReason.RATE_LIMITED
            elif capped:
                g.status, g.error = Status.BLOCKED, scheduler.COST_CAP_REASON
                g.stop_reason = StopReason.COST_CAP
            else:
                g.status, g.error = Status.INTERRUPTED, "interrupted before the worker started"
                g.stop_reason = StopReason.INTERRUPTED
