"""The worker protocol: the assignment a worker gets (its result is `core.results.WorkerResult`).

Both are JSON files so that a worker can be a local process, a CI job on another machine, or a
test (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agentrun.core.errors import BadInput
from agentrun.core.fsutil import atomic_write_text
from agentrun.core.limits import (
    DEFAULT_MAX_WRITE_BYTES,
    DEFAULT_REQUEST_RETRIES,
    DEFAULT_RETRIES,
    DEFAULT_TOKEN_BUDGET,
    DEFAULT_WORKER_TIMEOUT_S,
    SandboxLimits,
)
from agentrun.core.results import first_error
from agentrun.core.secrets import public_url

# the spec sections every worker reads; the other groups' tasks are left out
SHARED_SECTIONS = ("Context", "Task", "Goal Analysis", "Requirements", "Constraints",
                   "Assumptions")

ExecutorName = Literal["builtin", "claude-code", "codex"]  # config `executor:`, `run --executor`


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
    request_retries: int = DEFAULT_REQUEST_RETRIES  # of one request (agent/modelcall.py)
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
    retries: int = DEFAULT_RETRIES  # fresh attempts after a failed one
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
    executor: ExecutorName = "builtin"  # who works in the worktree: our loop or a coding-agent CLI
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
            raise BadInput(f"invalid assignment {path}: {first_error(exc)}",
                           hint="the file must follow the worker assignment schema") from None
