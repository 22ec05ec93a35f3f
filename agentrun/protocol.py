"""The worker protocol: the assignment a worker gets and the result it returns (DESIGN §6).

Both are JSON files so that a worker can be a local process, a CI job on another machine, or a
test. The result is validated on read: a worker's claims are data to check, not facts.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agentrun.config import (
    DEFAULT_MAX_WRITE_BYTES,
    DEFAULT_REQUEST_RETRIES,
    DEFAULT_RETRIES,
    DEFAULT_TOKEN_BUDGET,
    DEFAULT_WORKER_TIMEOUT_S,
    SandboxLimits,
)
from agentrun.errors import BadInput
from agentrun.fsutil import TooLarge, atomic_write_text, read_capped
from agentrun.providers.base import Usage
from agentrun.providers.urls import public_url

# a worker's result file is read back by the orchestrator: no more than this
MAX_RESULT_BYTES = 16 * 1024 * 1024


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


Executor = Literal["builtin", "claude-code", "codex"]  # config `executor:`, `run --executor`


class GroupAssignment(BaseModel):
    id: str
    title: str = ""
    tasks: list[str] = Field(default_factory=list)
    dependencies: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)
    context: str = ""  # a plan from another tool: the context its tasks come with
    checks: list[str] = Field(default_factory=list)  # ... and how it says to check them


class ProviderSettings(BaseModel):
    provider: str
    model: str
    base_url: str | None = None  # shown form only: the worker finds the real URL itself
    max_retries: int = DEFAULT_REQUEST_RETRIES  # of one request (agent/modelcall.py)
    timeout_s: float = 600.0
    script: str | None = None  # scripted provider: the script file
    record: str | None = None  # record the session into this scripted-format file

    @field_validator("base_url")
    @classmethod
    def _public(cls, value: str | None) -> str | None:
        """An assignment is a file: a server URL's credentials never go into it."""
        return public_url(value) if value else value


class WorkerLimits(BaseModel):
    max_steps: int | None = None
    token_budget: int = DEFAULT_TOKEN_BUDGET
    timeout_s: float = DEFAULT_WORKER_TIMEOUT_S
    max_retries: int = DEFAULT_RETRIES
    retry_on_failure: bool = True


class SandboxSettings(BaseModel):
    """How the worker confines its commands (agentrun/sandbox/choice.py). A local run passes
    the mode it already resolved, so a worker never runs less confined than the summary said."""

    mode: Literal["auto", "on", "off"] = "auto"
    network: bool = False
    home_allow: list[str] = Field(default_factory=list)
    limits: SandboxLimits = Field(default_factory=SandboxLimits)


class SetupSettings(BaseModel):
    """How a fresh worktree is made ready before anything runs in it (agentrun/setup.py):
    untracked files copied from `source`, then `command` in the sandbox."""

    command: str | None = None
    copies: list[str] = Field(default_factory=list)  # paths relative to `source`
    source: str  # the user's checkout, where the untracked files are
    cache_dir: str | None = None  # the run's package caches, shared by its worktrees
    network: bool = False
    timeout_s: float = DEFAULT_WORKER_TIMEOUT_S


class Assignment(BaseModel):
    """Everything one worker needs, and nothing of the other groups' tasks."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    spec_id: str
    spec_path: str
    spec_title: str = ""
    complexity: str | None = None
    batch: str
    groups: list[GroupAssignment]
    sections: dict[str, str] = Field(default_factory=dict)  # context, requirements, constraints
    acceptance_criteria: list[str] = Field(default_factory=list)
    project_md: str = ""
    project_root: str | None = None  # where .specflow/ overrides (agents, prompts) live
    overrides_commit: str | None = None  # the user's commit those overrides were read from
    command_env: list[str] = Field(default_factory=list)  # config `command_env`
    max_write_bytes: int = Field(DEFAULT_MAX_WRITE_BYTES, ge=1)  # config `max_write_bytes`
    worktree: str
    branch: str
    base_commit: str
    agent: str = "spec-executor-worker"
    provider: ProviderSettings
    limits: WorkerLimits = Field(default_factory=WorkerLimits)
    validation_command: str | None = None
    pricing: dict[str, Any] = Field(default_factory=dict)
    result_path: str
    transcript_path: str | None = None
    progress_path: str | None = None
    # the worker's share of the run's spending cap, which the run raises as it goes
    # (agent/allowance.py); None: no cap
    allowance_path: str | None = None
    interactive: bool = False
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    executor: Executor = "builtin"  # who works in the worktree: our loop or a coding-agent CLI
    setup: SetupSettings | None = None
    # the W3C traceparent of the group's span, when the run is traced (agentrun/telemetry/)
    trace_parent: str | None = None

    @property
    def group_ids(self) -> list[str]:
        """The groups this worker stands for; a spec without groups is one unit of work,
        named by the batch."""
        return [g.id for g in self.groups] or [self.batch]

    def write(self, path: Path) -> None:
        atomic_write_text(path, self.model_dump_json(indent=2) + "\n")

    @classmethod
    def read(cls, path: Path) -> Assignment:
        try:
            return cls.model_validate_json(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise BadInput(f"assignment not found: {path}",
                           hint="pass the assignment JSON the orchestrator wrote") from None
        except (ValidationError, ValueError) as exc:
            raise BadInput(f"invalid assignment {path}: {_first_error(exc)}",
                           hint="the file must follow the worker assignment schema") from None


class Outcome(BaseModel):
    """How a piece of work ended: one model from an attempt up to a group of the run state.

    Each layer adds only what it alone knows: an attempt what the model did
    (agent/results.py), a task its structured output (attempts.py), a worker what git holds
    (`Work`, `WorkerResult`), the run where it landed (report/execution_state.py). A layer is
    built from the one below with `carried()`, so no field is copied by hand.
    """

    model_config = ConfigDict(validate_assignment=True)

    status: Status
    summary: str = ""
    criteria_met: list[str] = Field(default_factory=list)
    deviations: list[str] = Field(default_factory=list)
    error: str | None = None
    no_change_needed: str | None = None  # the model's reason a `complete` needs no commit
    attempts: int = 0
    steps: int = 0
    usage: Usage = Field(default_factory=Usage)
    stop_reason: StopReason | None = StopReason.COMPLETED

    def carried(self, upto: type[Outcome] | None = None) -> dict[str, Any]:
        """The fields this outcome shares with `upto` (default: the `Outcome` fields), to
        build the next layer from."""
        names = (upto or Outcome).model_fields
        return {name: getattr(self, name) for name in names if name in type(self).model_fields}


class Work(Outcome):
    """An outcome with what git holds for it and what it cost."""

    files_created: list[str] = Field(default_factory=list)
    files_modified: list[str] = Field(default_factory=list)
    files_deleted: list[str] = Field(default_factory=list)
    commits: list[str] = Field(default_factory=list)
    cost_usd: float | None = 0.0
    duration_s: float = 0.0


class WorkerResult(Work):
    """DESIGN §6 worker result, plus where the work lives (branch, worktree)."""

    status: ResultStatus
    stop_reason: StopReason = StopReason.COMPLETED
    group: str
    groups: list[str]
    branch: str | None = None
    worktree: str | None = None
    batch: str | None = None

    @classmethod
    def for_batch(cls, ids: list[str], batch: str, branch: str | None,
                  worktree: str | None = None, **fields: Any) -> WorkerResult:
        """The result for the groups `ids` of `batch`, with `fields`."""
        return cls(group=ids[0], groups=list(ids), batch=batch, branch=branch,
                   worktree=worktree, **fields)

    def write(self, path: Path) -> None:
        atomic_write_text(path, self.model_dump_json(indent=2) + "\n")

    @classmethod
    def read(cls, path: Path) -> WorkerResult:
        """Parse a result file; raises ValueError with a readable reason when invalid."""
        return cls.read_with_extras(path)[0]

    @classmethod
    def read_with_extras(cls, path: Path) -> tuple[WorkerResult, dict[str, Any]]:
        """The result and the file's whole JSON object (CI jobs add spec, base commit, ...)."""
        try:
            text = read_capped(Path(path), MAX_RESULT_BYTES).decode("utf-8")
        except FileNotFoundError:
            raise ValueError(f"no result file at {path}") from None
        except UnicodeDecodeError:
            raise ValueError(f"result file {path} is not UTF-8 text") from None
        except TooLarge:
            raise ValueError(f"result file {path} is larger than {MAX_RESULT_BYTES:,} "
                             "bytes") from None
        except OSError as exc:
            raise ValueError(f"cannot read result file {path}: {exc.strerror or exc}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"result file {path} is not valid JSON ({exc.msg} at line "
                             f"{exc.lineno})") from None
        try:
            return cls.model_validate(data), data
        except ValidationError as exc:
            raise ValueError(f"result file {path} does not match the result schema: "
                             f"{_first_error(exc)}") from None


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"]) or "(root)"
        return f"{loc}: {err['msg']}" + (f" (+{exc.error_count() - 1} more)"
                                         if exc.error_count() > 1 else "")
    return str(exc).splitlines()[0]
