"""What a run is asked to do: the flags as given, and the one place they meet the config.

`RunFlags` is a command's options as parsed (`None`/`False`: not given). `resolve_run` is the
only place where precedence is decided for the settings a run reads — flag, then
`.specflow/config.yaml`, then the agent definition where one has a say, then the default — and
the `RunRequest` it returns is frozen and knows where each value came from (`source`), which
the plan's summary and `RunRequest.provenance` show. `agentrun run`, `fix`, `worker` (its CI
form) and `aggregate` all build their request here, and their `RunOptions` with `run_options`.

The provider and model have a layer more (the environment) and are resolved with their source
by `agentrun/provider_choice.py`'s `resolve_provider_config`. Importing this module is cheap: the
settings model and the run's options are imported where they are used.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from agentrun.core.errors import BadInput
from agentrun.core.status import RunMode

if TYPE_CHECKING:
    from agentrun.config import ProjectConfig
    from agentrun.protocol import (
        ExecutorName,
        ProviderSettings,
        SandboxSettings,
        SetupSettings,
        WorkerLimits,
    )
    from agentrun.run.options import RunOptions

MODES: tuple[RunMode, ...] = ("single", "orchestrated")
ON_FAILURE = ("continue", "abort")
EXECUTORS = ("builtin", "claude-code", "codex")  # agent/definitions.py's EXECUTORS


class Source(StrEnum):
    """Where a setting's value came from."""

    FLAG = "flag"
    CONFIG = ".specflow/config.yaml"
    AGENT = "agent definition"
    ASKED = "asked"
    DEFAULT = "default"


@dataclass(frozen=True)
class RunFlags:
    """`agentrun run`'s options as given; `fix`, `worker` and `aggregate` give the ones they
    offer, and `demo` only what differs from not giving them."""

    yes: bool = False
    dry_run: bool = False
    mode: str | None = None
    max_parallel: int | None = None
    on_failure: str | None = None
    allow_dirty: bool = False
    require_audit: bool = False
    force: bool = False
    resume: bool = False
    rerun: bool = False
    allow_failing_base: bool = False
    provider: str | None = None
    model: str | None = None
    script: Path | None = None
    record: Path | None = None
    max_steps: int | None = None
    token_budget: int | None = None
    worker_timeout: float | None = None
    retries: int | None = None  # fresh attempts after a failed one (`--retries`)
    validation_command: str | None = None
    sequential: bool = False  # `--in-process`
    interactive: bool = False
    sandbox: str | None = None
    allow_network: bool = False
    setup: str | None = None
    max_cost: float | None = None
    junit: Path | None = None
    events: str | None = None
    executor: str | None = None
    no_review: bool = False
    fix_cycles: int | None = None
    fmt: str | None = None
    changed: bool = False


@dataclass(frozen=True)
class RunRequest:
    """The settings of one run, resolved (`resolve_run`); `flags` keeps what was given."""

    flags: RunFlags
    max_parallel: int | None  # workers at once; None: the whole wave
    on_failure: str  # continue | abort (core/status.py's OnFailure)
    max_steps: int | None  # model turns per attempt; None: the agent's own limit
    token_budget: int
    worker_timeout_s: float
    retries: int
    validation_command: str | None
    max_cost_usd: float | None
    setup_command: str | None
    executor: str
    sandbox_mode: str  # auto | on | off, before sandbox/choice.py sees what works here
    allow_network: bool
    fix_cycles: int | None  # None: asked before the run starts
    sources: Mapping[str, Source] = field(default_factory=dict)

    def source(self, name: str) -> Source:
        """Where the setting `name` came from."""
        return self.sources[name]

    def provenance(self) -> dict[str, dict[str, Any]]:
        """Every resolved setting with its value and source (a dump of the request)."""
        return {name: {"value": getattr(self, name), "source": str(src)}
                for name, src in self.sources.items()}

    def with_fix_cycles(self, cycles: int) -> RunRequest:
        """The request once the fix cycles were asked for."""
        return dataclasses.replace(self, fix_cycles=cycles,
                                   sources={**self.sources, "fix_cycles": Source.ASKED})

    @property
    def review(self) -> bool:
        return not self.flags.no_review

    def limits(self) -> WorkerLimits:
        """The limits every worker of the run gets."""
        from agentrun.protocol import WorkerLimits

        return WorkerLimits(max_steps=self.max_steps, token_budget=self.token_budget,
                            timeout_s=self.worker_timeout_s, retries=self.retries)


def plan_mode(value: str | None) -> RunMode | None:
    """`--mode` (or a recorded run's mode), checked: None lets the plan choose."""
    if value is None:
        return None
    if value not in MODES:
        raise BadInput(f"invalid --mode {value!r}", hint="use single or orchestrated")
    return value


def check_flags(flags: RunFlags) -> None:
    """Values the CLI takes as text but only some of which mean anything."""
    plan_mode(flags.mode)
    if flags.on_failure not in (None, *ON_FAILURE):
        raise BadInput(f"invalid --on-failure {flags.on_failure!r}",
                       hint="use --on-failure continue or --on-failure abort")
    if flags.executor not in (None, *EXECUTORS):
        raise BadInput(f"invalid --executor {flags.executor!r}",
                       hint=f"use {', '.join(EXECUTORS)}")
    if flags.max_cost is not None and not flags.max_cost > 0:  # (NaN too)
        raise BadInput(f"invalid --max-cost {flags.max_cost:g}", hint="give a positive USD amount")


def resolve_run(flags: RunFlags, config: ProjectConfig, *, agent_executor: str | None = None,
                can_ask: bool = False) -> RunRequest:
    """The run's settings: each from its flag if given, else `config` where the file set it
    (or its default), else the agent definition's (`agent_executor`), else the default.
    `can_ask`: a terminal that will be asked for the fix cycles when no flag gives them."""
    check_flags(flags)
    sources: dict[str, Source] = {}
    given = config.model_fields_set
    sandbox_given = config.sandbox.model_fields_set

    def pick(name: str, flag: Any, key: str, value: Any, *, section: set[str] | None = None,
             flag_wins: Callable[[Any], bool] = bool) -> Any:
        if flag_wins(flag):
            sources[name] = Source.FLAG
            return flag
        sources[name] = Source.CONFIG if key in (given if section is None else section) \
            else Source.DEFAULT
        return value

    def is_given(value: Any) -> bool:
        return value is not None

    setup = (flags.setup or "").strip() or None
    executor = pick("executor", flags.executor, "executor", config.executor)
    if executor is None:
        executor = agent_executor or "builtin"
        sources["executor"] = Source.AGENT if agent_executor else Source.DEFAULT
    if flags.fix_cycles is not None:
        cycles, sources["fix_cycles"] = flags.fix_cycles, Source.FLAG
    elif can_ask and not flags.yes:
        cycles, sources["fix_cycles"] = None, Source.ASKED
    else:
        cycles, sources["fix_cycles"] = 0, Source.DEFAULT  # nothing to ask: CI, no TTY, --yes
    return RunRequest(
        flags=flags,
        max_parallel=pick("max_parallel", flags.max_parallel, "max_parallel",
                          config.max_parallel),
        on_failure=pick("on_failure", flags.on_failure, "on_failure", config.on_failure),
        max_steps=pick("max_steps", flags.max_steps, "max_steps", config.max_steps),
        token_budget=pick("token_budget", flags.token_budget, "token_budget",
                          config.token_budget),
        worker_timeout_s=pick("worker_timeout_s", flags.worker_timeout, "worker_timeout_s",
                              config.worker_timeout_s),
        retries=pick("retries", flags.retries, "retries", config.retries, flag_wins=is_given),
        validation_command=pick("validation_command", flags.validation_command,
                                "validation_command", config.validation_command),
        max_cost_usd=pick("max_cost_usd", flags.max_cost, "max_cost_usd", config.max_cost_usd),
        setup_command=pick("setup_command", setup, "setup_command", config.setup_command),
        executor=executor,
        sandbox_mode=pick("sandbox_mode", flags.sandbox, "mode", config.sandbox.mode,
                          section=sandbox_given),
        allow_network=pick("allow_network", flags.allow_network, "network",
                           config.sandbox.network, section=sandbox_given),
        fix_cycles=cycles,
        sources=sources)


def worker_provider(cfg: Any, flags: RunFlags) -> ProviderSettings:
    """The provider settings every worker of a run gets, from the resolved `cfg`
    (providers/catalog.py's `ProviderConfig`)."""
    from agentrun.protocol import ProviderSettings

    return ProviderSettings(provider=cfg.provider, model=cfg.model, base_url=cfg.base_url,
                            request_retries=cfg.request_retries, timeout_s=cfg.timeout_s,
                            script=str(Path(cfg.script).resolve()) if cfg.script else None,
                            record=str(flags.record.resolve()) if flags.record else None)


def run_options(request: RunRequest, config: ProjectConfig, *, provider: ProviderSettings,
                sandbox: SandboxSettings, sandbox_description: str, review: Any = None,
                executor: str | None = None, setup: SetupSettings | None = None,
                warnings: list[str] | None = None, tty: bool = False,
                ask_continue: Callable[[list[str]], bool] | None = None,
                **left_out: Any) -> RunOptions:
    """What the orchestrator reads, from the request and what the command worked out from it
    (the provider, the sandbox that works here, the review, the worktree set-up).
    `left_out`: options a command's backend does without, at their empty value (a CI aggregate
    runs no worker: no parallel limit)."""
    from agentrun.run.options import RunOptions

    flags = request.flags
    options = RunOptions(
        provider=provider, limits=request.limits(), max_parallel=request.max_parallel,
        on_failure=request.on_failure, allow_dirty=flags.allow_dirty, resume=flags.resume,
        validation_command=request.validation_command,
        allow_failing_base=flags.allow_failing_base, interactive=flags.interactive and tty,
        use_processes=not flags.sequential, pricing=config.price_overrides(),
        ask_continue=ask_continue, warnings=list(warnings or []), sandbox=sandbox,
        sandbox_description=sandbox_description,
        executor=cast("ExecutorName", executor or "builtin"),
        review=review, review_skipped=None if request.review else "--no-review",
        setup=setup, max_cost_usd=request.max_cost_usd)
    return dataclasses.replace(options, **left_out)
