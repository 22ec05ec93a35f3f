"""What a run is asked to do: the options every part of it reads, fixed once the run starts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentrun.agent.terminator import Limits
from agentrun.protocol import (
    ExecutorName,
    ProviderSettings,
    SandboxSettings,
    SetupSettings,
    WorkerLimits,
)


@dataclass(frozen=True)
class RunOptions:
    provider: ProviderSettings
    limits: WorkerLimits = field(default_factory=WorkerLimits)
    max_parallel: int | None = None
    on_failure: str = "continue"  # continue | abort (core/status.py's OnFailure)
    allow_dirty: bool = False
    resume: bool = False
    validation_command: str | None = None
    allow_failing_base: bool = False  # judge merged results by "no new failures" (integration)
    validation_timeout_s: float = Limits.validation_timeout_s  # also the integration check's
    interactive: bool = False
    use_processes: bool = True
    pricing: dict[str, Any] = field(default_factory=dict)
    ask_continue: Callable[[list[str]], bool] | None = None  # TTY prompt after a failed wave
    warnings: list[str] = field(default_factory=list)  # recorded in STATE.md's Warnings
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)  # workers and checks
    sandbox_description: str = ""  # "on (bubblewrap)", "off (why)": for the run record
    executor: ExecutorName = "builtin"
    review: Any = None  # run.review_step.ReviewSettings; None: not reviewed at its end
    review_skipped: str | None = None  # why not, for the record (`--no-review`)
    setup: SetupSettings | None = None  # worktree set-up (its cache dir is the run's own)
    max_cost_usd: float | None = None  # the whole run's spending cap, earlier runs resumed
