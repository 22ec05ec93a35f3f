"""How a run ends: its final status, STATE.md, the run record and the report commit.

A run ends in one of two ways (docs/ARCHITECTURE.md, "The record"): by its own end, when the
last wave is stepped (`finish`: the failure rules' final status, the Execution Summary, the
review, then `close`), or by an error on the way (`stopped`: a full disk, Ctrl-C, a crash), when
it is recorded `interrupted` as far as each write still fits, for `--resume`. Both write the
same records in the same order; kept apart from the orchestrator, which only starts a run, and
from the wave runner (run/waves.py), which steps it.
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import Protocol

from agentrun.core.errors import AgentrunError, NoSpace
from agentrun.core.events import ErrorInfo, RunDoneEvent
from agentrun.core.status import RunStatus
from agentrun.plan import Plan
from agentrun.report.execution_state import RunState, save_state
from agentrun.run import scheduler
from agentrun.run.adopt import Adopter
from agentrun.run.land import Lander
from agentrun.run.options import RunOptions
from agentrun.run.record import Recorder, control_dir, now_text
from agentrun.run.review_step import ReviewStep, review_position
from agentrun.run.target import Target
from agentrun.spec.model import Spec


class RunEnd(Protocol):
    """What the end of a run uses of it (the orchestrator)."""

    spec: Spec
    plan: Plan
    options: RunOptions
    cancel: threading.Event
    root: Path
    run_id: str
    run_dir: Path
    state_file: Path
    record: Recorder
    target: Target
    lander: Lander
    reviews: ReviewStep | None
    adopter: Adopter | None

    @property
    def state(self) -> RunState: ...


def stop_for_space(run: RunEnd, error: NoSpace) -> None:
    """The disk filled up: the checkpoint and STATE.md say the run stopped, if that still
    fits; else the last checkpoint saved stands (whole: every write is atomic), and
    `--resume` reconciles it with the merges in git, as after a kill."""
    run.record.release_reserve()
    error.hint = (f"free some space on that disk, then `agentrun run {run.spec.id} "
                  "--resume`" if run.state_file.exists() else
                  "free some space on that disk, then run again")
    stopped(run, f"stopped: {error.message}",
                  f"free disk space, then `agentrun run {run.spec.id} --resume`",
                  kind=type(error).__name__)


def stopped(run: RunEnd, why: str, next_step: str | None = None, *, kind: str) -> None:
    """The run ends here, by an error rather than by its own end: it is `interrupted`
    (its unfinished groups too, for `--resume`), saying why, in the checkpoint, STATE.md
    and the run record — as far as each can still be written (every write is atomic:
    else the last one stands)."""
    run.cancel.set()
    state = run.state
    lander = getattr(run, "lander", None)  # none before the run began
    if lander is not None:
        with contextlib.suppress(Exception):  # removals under way end before the record
            lander.settle()
    scheduler.settle(state, interrupted=True)
    state.status, state.finished = RunStatus.INTERRUPTED, now_text()
    state.warnings.append(why)
    progress, position = scheduler.final_position(state, interrupted=True)
    with contextlib.suppress(Exception):
        save_state(run.state_file, state)
    with contextlib.suppress(Exception):
        run.record.update_state_md(
            status=position, progress=progress, when=state.finished,
            next_step=next_step or f"inspect, then `agentrun run {run.spec.id} --resume`")
    with contextlib.suppress(Exception):
        run.record.write_result()
    with contextlib.suppress(Exception):
        run.record.write_html(control_dir(run.root, run.run_id))
    with contextlib.suppress(Exception):
        run.record.emit(RunDoneEvent(status=state.status, run_dir=str(run.run_dir),
                                      error=ErrorInfo(type=kind, message=why)))


def finish(run: RunEnd, interrupted: bool) -> RunState:
    """The run's own end, after its last wave: the final status, the Execution Summary, the
    review of a complete run, then `close`."""
    state = run.state
    if run.adopter is not None:
        run.adopter.discard()
    scheduler.settle(state, interrupted)
    if not interrupted:
        run.target.ready()  # switched since the last merge: no summary lands there
    status = scheduler.final_status(state, interrupted)
    # the review is part of the run: until it approves, no state says complete, and a
    # run killed during it is not finished (`--resume` or `agentrun review` completes it)
    reviewing = run.reviews is not None and status == RunStatus.COMPLETE
    state.status = RunStatus.REVIEWING if reviewing else status
    state.finished = None if reviewing else now_text()
    if run.reviews is None:
        state.review_skipped = run.options.review_skipped
    save_state(run.state_file, state)
    if reviewing:
        total = len(run.plan.waves)
        run.record.update_state_md(
            status="running", progress=f"Reviewing (Wave {total}/{total} merged)",
            when=now_text(), next_step=f"if this run stops: `agentrun run {run.spec.id} "
                                       "--resume` or `agentrun review` completes it")
    # the spec: Execution Summary and status (review only when everything completed)
    if not run.target.stopped:
        run.record.write_summary(now_text(), status="review"
                                  if status == RunStatus.COMPLETE else None)
    if run.reviews is not None and not interrupted:
        run.reviews.after_run()
    return close(run, interrupted=state.status == RunStatus.INTERRUPTED)


def close(run: RunEnd, interrupted: bool) -> RunState:
    """STATE.md, the run record and the report commit, once the run's status is final.
    The report commit lands only on the run's branch: switched away, the run is not
    complete (its work waits for `--resume` there)."""
    state = run.state
    # the worktree removals that ran alongside the end of the run: git has forgotten them;
    # their folders' deletion goes on while the reports are written
    run.lander.settle(folders=False)
    if not interrupted and not run.target.stopped and not run.target.ready():
        state.status = scheduler.final_status(state, interrupted=False)
    progress, position = scheduler.final_position(state, interrupted)
    next_step = ("review the changes, then `agentrun status`" if position == "review"
                 else f"inspect, then `agentrun run {run.spec.id} --resume`")
    reviewed = review_position(state)
    if run.target.stopped:
        next_step = (f"`git switch {state.target_branch}`, then `agentrun run "
                     f"{run.spec.id} --resume`")
    elif reviewed:
        progress, position, next_step = reviewed
    save_state(run.state_file, state)
    run.record.update_state_md(
        status=position, progress=progress, warnings=scheduler.final_warnings(state),
        when=state.finished, next_step=next_step)
    run.record.write_result()
    if not interrupted and not run.target.stopped:
        run.record.commit_report()
        run.target.left_at()
    report = run.record.write_html(control_dir(run.root, run.run_id))
    run.lander.settle_folders()
    run.record.emit(RunDoneEvent(status=state.status, run_dir=str(run.run_dir),
                                  tokens=state.usage.total, cost_usd=state.cost_usd,
                                  report=str(report) if report else None))
    return state


def described(exc: BaseException) -> str:
    """An error that ended a run, in a line."""
    if isinstance(exc, AgentrunError):
        return exc.message
    if isinstance(exc, KeyboardInterrupt | SystemExit) or any(  # or a prompt's end of input
            c.__name__ == "Abort" and c.__module__.startswith("click")
            for c in type(exc).__mro__):
        return "interrupted"
    return f"internal error: {type(exc).__name__}: {exc}"
