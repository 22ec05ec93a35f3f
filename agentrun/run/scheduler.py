"""The rules of a run, as pure functions over its state: no processes, no git, no files.

Which batches of a wave run, are skipped or blocked; the order their work lands in; whether a
wave's failures abort the run; how the run ended and what STATE.md says about it; which groups
of an earlier run a resume keeps. Keeping them here makes each rule testable on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from agentrun.core.status import OnFailure, RunStatus, Status, StopReason
from agentrun.plan import Batch, Wave
from agentrun.report.execution_state import GroupState, RunState
from agentrun.spec.model import Spec

ABORTED_REASON = "the run was aborted after an earlier wave failed"
INTEGRATION_REASON = "the run stopped after an earlier wave failed its integration check"
COST_CAP_REASON = ("not started: the run reached its spending cap (continue with --resume "
                   "--max-cost HIGHER)")
TARGET_REASON = ("not started: the run stopped landing when its branch was switched or reset "
                 "(switch back, then --resume)")
RATE_LIMIT_REASON = ("not started: a worker met the model's rate limit (continue later with "
                     "--resume)")


@dataclass
class Triage:
    """A wave's batches sorted by what happens to them."""

    todo: list[Batch] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # batch ids: every group already complete
    blocked: dict[str, list[str]] = field(default_factory=dict)  # batch id -> its blockers


class Schedule:
    """The spec's dependencies and group order, and the rules that use them."""

    def __init__(self, spec: Spec) -> None:
        self._order = {g.id: i for i, g in enumerate(spec.groups)}
        self._deps = {g.id: list(g.dependencies) for g in spec.groups}

    @property
    def dependencies(self) -> dict[str, list[str]]:
        return self._deps

    def position(self, gid: str) -> int:
        return self._order.get(gid, len(self._order))

    def batch_position(self, gids: list[str]) -> int:
        return min((self.position(g) for g in gids), default=0)

    def landing_order(self, batches: list[Batch]) -> list[Batch]:
        """Batches in the spec's group order: the order their branches are merged."""
        return sorted(batches, key=lambda b: self.batch_position(b.ids))

    def blockers(self, state: RunState, ids: list[str]) -> list[str]:
        """Dependencies outside the batch that did not complete (inside it, the worker orders
        the groups itself: single mode holds dependent groups in one batch)."""
        deps = {d for gid in ids for d in self._deps.get(gid, [])} - set(ids)
        return sorted((d for d in deps if d in state.groups and
                       (state.groups[d].status.blocks_dependents
                        or state.groups[d].status == Status.PENDING)),
                      key=self.position)

    def triage(self, state: RunState, wave: Wave) -> Triage:
        out = Triage()
        for batch in wave.batches:
            if all(state.groups[g].status == Status.COMPLETE for g in batch.ids):
                out.skipped.append(batch.id)
                continue
            blockers = self.blockers(state, batch.ids)
            if blockers:
                out.blocked[batch.id] = blockers
            else:
                out.todo.append(batch)
        return out


@dataclass
class WaveVerdict:
    """Whether a wave's outcome aborts the run, and the warning to record when it does."""

    abort: bool
    warning: str | None = None


def unchecked(state: RunState, old: RunState) -> set[str]:
    """The groups a resume kept from `old` whose wave never passed its integration check
    there (the run was killed during or before it): their merged result is checked again."""
    done = {g for w in old.waves if w.status == "done" for g in w.groups} \
        if old.integration_command else set()
    return {gid for gid, g in state.groups.items()
            if g.status == Status.COMPLETE and gid in old.groups and gid not in done}


def wave_verdict(label: str, ran: list[str], failed: list[str], on_failure: str,
                 ask_continue: Callable[[list[str]], bool] | None) -> WaveVerdict:
    """Every group failed: abort. Some failed: abort with `on_failure=abort`, else ask."""
    if ran and len(failed) == len(ran):
        return WaveVerdict(True, f"all groups of wave {label} failed; run aborted")
    if failed:
        if on_failure == OnFailure.ABORT:
            return WaveVerdict(True)
        if ask_continue and not ask_continue(failed):
            return WaveVerdict(True)
    return WaveVerdict(False)


def abort_reason(state: RunState) -> str:
    """Why the waves after an abort did not run."""
    if state.stop_reason == StopReason.COST_CAP:
        return COST_CAP_REASON
    if state.stop_reason == StopReason.TARGET_MOVED:
        return TARGET_REASON
    if state.stop_reason == StopReason.RATE_LIMITED:
        return RATE_LIMIT_REASON
    return INTEGRATION_REASON if state.stop_reason == StopReason.INTEGRATION \
        else ABORTED_REASON


def settle(state: RunState, interrupted: bool) -> None:
    """Groups that never ended: interrupted when the run was, else blocked."""
    for g in state.groups.values():
        if not g.status.final:
            g.status = Status.INTERRUPTED if interrupted else Status.BLOCKED


def final_status(state: RunState, interrupted: bool) -> RunStatus:
    """`complete` only when every group completed, and every wave's merged result passed its
    integration check (a run without a validation command says it was not checked)."""
    statuses = [g.status for g in state.groups.values()]
    if interrupted:
        return RunStatus.INTERRUPTED
    if state.stop_reason == StopReason.INTEGRATION:
        return RunStatus.FAILED
    if state.stop_reason in (StopReason.COST_CAP, StopReason.TARGET_MOVED,
                             StopReason.RATE_LIMITED):
        return RunStatus.PARTIAL if any(s.landed_work for s in statuses) else RunStatus.FAILED
    if all(s == Status.COMPLETE for s in statuses):
        return RunStatus.COMPLETE
    if any(w.status == "skipped" for w in state.waves):
        return RunStatus.ABORTED
    if any(s.landed_work for s in statuses):
        return RunStatus.PARTIAL
    return RunStatus.FAILED


def wave_progress(number: int, total: int, done: int | None = None) -> str:
    """STATE.md progress while running: `Wave 2/3 (33%)` counts the waves before `number`
    (or `done` of them)."""
    done = number - 1 if done is None else done
    return f"Wave {number}/{total} ({round(100 * done / total)}%)"


def final_position(state: RunState, interrupted: bool) -> tuple[str, str]:
    """STATE.md's progress text and Current Position status once the run ended."""
    if state.status == RunStatus.COMPLETE:
        return "Complete", "review"
    if state.stop_reason == StopReason.TARGET_MOVED and not interrupted:
        return (f"Stopped landing: {state.target_branch} is not checked out (Wave "
                f"{state.current_wave}/{len(state.waves)})", "interrupted")
    if interrupted:
        return f"Interrupted (Wave {state.current_wave}/{len(state.waves)})", "interrupted"
    failed_wave = next((w.label for w in state.waves
                        if any(state.groups[g].status.blocks_dependents
                               or state.groups[g].status == Status.PARTIAL
                               for g in w.groups)), None)
    return f"Failed (Wave {failed_wave})", "failed"


def final_warnings(state: RunState) -> list[str]:
    warnings = list(state.warnings)
    unfinished = [f"{g.id} {g.status}" for g in state.groups.values()
                  if g.status != Status.COMPLETE]
    if state.status != RunStatus.COMPLETE and unfinished:  # (a review says why otherwise)
        warnings.append(f"run {state.run_id} ended {state.status}: " + ", ".join(unfinished))
    return warnings


def changed_groups(state: RunState, old: RunState,
                   deps: dict[str, list[str]]) -> dict[str, str]:
    """The groups whose finished work a resume must not reuse, and why: their task (tasks,
    files, dependency ids) is not what `old` ran, or a dependency runs again (their work was
    built on what it did). Groups of a run that recorded no fingerprints count as unchanged.
    `state.groups` is in plan order, dependencies first."""
    changed: dict[str, str] = {}
    for gid in state.groups:
        was, now = old.fingerprints.get(gid), state.fingerprints.get(gid)
        again = [d for d in deps.get(gid, []) if d in changed]
        if was is not None and was != now:
            changed[gid] = (f"its task changed since run {old.run_id} (its tasks, files or "
                            "dependencies differ)")
        elif again:
            changed[gid] = f"its dependency {', '.join(again)} runs again"
    return changed


def adopt(state: RunState, old: RunState, landed: Callable[[GroupState], bool],
          changed: dict[str, str]) -> list[str]:
    """A resume keeps the old run's complete groups whose work `landed` in history and whose
    task did not change (`changed`); they take their wave and batch from the new plan.
    Returns a line for each complete group that runs again instead, saying why."""
    state.resumed_from = old.run_id
    again = []
    for gid, prev in old.groups.items():
        if gid not in state.groups or prev.status != Status.COMPLETE:
            continue
        if gid in changed:
            again.append(f"{gid}, complete in run {old.run_id}, runs again: {changed[gid]}")
        elif landed(prev):
            prev.wave = state.groups[gid].wave
            prev.batch = state.groups[gid].batch
            state.groups[gid] = prev
    return again
