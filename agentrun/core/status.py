"""Where work stands and why it stopped: one vocabulary from an attempt up to the whole run.

Every layer (the worker's result, the run state, the live display, the reports) uses these
enums; a status is never spelt as a bare string in code.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal


class Status(StrEnum):
    """Where a unit of work (an attempt, a worker's batch, a group of a run) stands.

    One enum for every layer, so the rules about statuses live here and nowhere else.
    """

    PENDING = "pending"
    RUNNING = "running"
    COMPLETE = "complete"
    PARTIAL = "partial"
    FAILED = "failed"
    BLOCKED = "blocked"
    INTERRUPTED = "interrupted"

    @property
    def blocks_dependents(self) -> bool:
        """A dependency that ended like this blocks the groups that depend on it."""
        return self in BLOCKING

    @property
    def landed_work(self) -> bool:
        """Work in this state is merged into the target branch (partial work is kept too)."""
        return self in (Status.COMPLETE, Status.PARTIAL)

    @property
    def final(self) -> bool:
        return self not in (Status.PENDING, Status.RUNNING)


BLOCKING = frozenset({Status.FAILED, Status.BLOCKED, Status.INTERRUPTED})

# what a worker may report for its batch (the other statuses are the run's own)
ResultStatus = Literal[Status.COMPLETE, Status.PARTIAL, Status.FAILED, Status.BLOCKED]


class StopReason(StrEnum):
    """Why an execution stopped; `completed` means the agent finished by itself."""

    COMPLETED = "completed"
    MAX_STEPS = "max_steps"
    TIMEOUT = "timeout"
    BUDGET = "budget"
    CIRCUIT_BREAKER = "circuit_breaker"
    ERROR = "error"
    INTERRUPTED = "interrupted"
    REFUSAL = "refusal"  # the model declined the task
    TRUNCATED = "truncated"  # the model's replies kept hitting the output limit
    NO_RESULT = "no_result"  # the model ended without reporting its result (submit_result)
    RATE_LIMITED = "rate_limited"  # the model's server asked for a longer wait than agentrun's
    INTEGRATION = "integration"  # a run's: a wave's merged result failed the validation command
    REVIEW = "review"  # a run's: the reviewer did not approve its merged result
    COST_CAP = "cost_cap"  # a run's (and its stopped workers'): the spending cap was reached
    # a run's (and its unmerged groups'): its branch was switched or reset under it
    TARGET_MOVED = "target_moved"


class RunStatus(StrEnum):
    """How a whole run stands or ended."""

    RUNNING = "running"
    COMPLETE = "complete"
    PARTIAL = "partial"
    FAILED = "failed"
    ABORTED = "aborted"
    INTERRUPTED = "interrupted"
    # the work merged; the review that decides `complete` runs (or was stopped before its
    # verdict: `run --resume` or `agentrun review` completes it)
    REVIEWING = "reviewing"


class OnFailure(StrEnum):
    """What a wave with failed groups does to the rest of the run (`on_failure:` in config,
    `--on-failure`)."""

    CONTINUE = "continue"
    ABORT = "abort"


# how a spec runs: one worker for all its groups, or a worker per batch in waves (plan.py)
RunMode = Literal["single", "orchestrated"]
