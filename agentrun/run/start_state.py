"""Where a run starts from: a new run's state, or the state a resume takes over.

A new run records every group of its plan pending, with the fingerprints, start commit and
settings its later waves and CI jobs keep (docs/ARCHITECTURE.md, "In CI"). `--resume` takes
over a killed run instead: the groups whose work reached history stay landed
(run/scheduler.py's `adopt`), its worker branches are adopted (run/adopt.py) and what it spent
counts against the cap. Apart from the orchestrator (run/orchestrator.py), which only composes
the session around it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from agentrun import workspace
from agentrun.core.errors import CannotStart
from agentrun.core.events import WarningEvent
from agentrun.core.fsutil import relpath
from agentrun.core.status import Status
from agentrun.plan import Plan
from agentrun.project import Project
from agentrun.report.execution_state import GroupState, RunState, WaveState, load_state
from agentrun.run import scheduler
from agentrun.run.adopt import Adopter, AdoptingBackend, take_over
from agentrun.run.backends import WorkerBackend
from agentrun.run.options import RunOptions
from agentrun.run.record import Recorder, now_text
from agentrun.run.spending import Spending, spent_so_far
from agentrun.spec.fingerprint import group_fingerprints
from agentrun.spec.model import Spec


class RunStart(Protocol):
    """What the start of a run uses of it (the orchestrator)."""

    project: Project
    spec: Spec
    plan: Plan
    options: RunOptions
    root: Path
    run_id: str
    state_file: Path
    record: Recorder
    schedule: scheduler.Schedule
    spending: Spending
    backend: WorkerBackend
    adopter: Adopter | None
    unchecked: set[str]

    def on_branch_of(self, state: RunState) -> str | None: ...


def initial_state(run: RunStart) -> RunState:
    """The run's state as it begins: every group of the plan pending, or, with
    `options.resume`, taken over from the last run's (its landed work adopted, its branches
    handed to an `AdoptingBackend`, its spending carried)."""
    state = RunState(
        run_id=run.run_id, spec_id=run.spec.id, spec_path=relpath(run.spec.path, run.root),
        mode=run.plan.mode, base_commit=workspace.head_commit(run.root),
        target_branch=workspace.current_branch(run.root), started=now_text(),
        provider=run.options.provider.provider, model=run.options.provider.model,
        waves=[WaveState(number=w.number, label=w.label, groups=list(w.groups))
               for w in run.plan.waves],
        warnings=list(run.options.warnings),
        integration_command=run.options.validation_command or None)
    titles = {g.id: g.title for g in run.spec.groups}
    for wave in run.plan.waves:
        for batch in wave.batches:
            for gid in batch.ids:
                state.groups[gid] = GroupState(id=gid, title=titles.get(gid, ""),
                                               wave=wave.label, batch=batch.id)
    # a run of some groups only (`--changed`, a plan's done tasks left out) records their
    # fingerprints as the whole spec defines them, not with the left-out dependencies cut
    fingerprints = run.spec.fingerprints or group_fingerprints(run.spec)
    state.fingerprints = {g: fingerprints[g] for g in state.groups if g in fingerprints}
    if run.options.resume:
        old = load_state(run.state_file)
        if old is None:
            raise CannotStart(f"nothing to resume: no execution state for {run.spec.id}",
                              hint="run without --resume to start a new run")
        run.on_branch_of(old)
        changed = scheduler.changed_groups(state, old, run.schedule.dependencies)
        for note in scheduler.adopt(state, old, lambda g: _landed(run.root, g), changed):
            state.warnings.append(note)
            run.record.emit(WarningEvent(message=note))
        if state.integration_command:
            run.unchecked = scheduler.unchecked(state, old)
        run.adopter = take_over(run.root, run.spec, state, old, run.record.emit,
                                 state.warnings.append, changed)
        run.backend = AdoptingBackend(run.backend, run.adopter)
        # the cap covers what every run of the resumed chain spent too
        run.spending.carry(spent_so_far(old))
        # the resumed run's settings stay those fixed when it started
        state.start_commit = old.start_commit or old.base_commit
        state.config = old.config
    if state.start_commit is None:  # a CI run's is the plan's commit (`--start-commit`)
        state.start_commit = run.project.start_commit or state.base_commit
    if state.config is None:
        state.config = run.project.config.model_dump(mode="json")
    run.record.write_settings(state.start_commit, state.config)
    state.spent_usd = round(run.spending.spent, 6)
    return state


def _landed(root: Path, group: GroupState) -> bool:
    """A group's work is in history when its merge (or all its commits) reach HEAD."""
    head = workspace.head_commit(root)
    refs = [group.merge_commit] if group.merge_commit else group.commits
    if not refs:
        return group.status == Status.COMPLETE
    return all(workspace.resolve_ref(root, c) and
               workspace.is_ancestor(root, c, head) for c in refs)
