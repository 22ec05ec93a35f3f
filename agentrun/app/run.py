"""The `run` use case: a spec's plan worked out and checked, then run wave by wave.

`run` takes the command's flags and a `RunFrontend` (how the command shows the plan, asks
before starting and shows progress) and returns a `RunOutcome`; it prints nothing itself.
Every refusal comes before anything exists: no worktree, commit or run record
(app/checks.py's checks, the provider, the sandbox, the spending cap's price). A resume
(`run --resume`) is this use case too: the run continues under the settings it started with.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from agentrun.app.requests import (
    RunFlags,
    RunRequest,
    check_flags,
    plan_mode,
    resolve_run,
    run_options,
    worker_provider,
)
from agentrun.core.errors import EXIT_FAILED, AgentrunError

if TYPE_CHECKING:
    from agentrun.core.events import EventSink
    from agentrun.plan import Plan
    from agentrun.project import Project
    from agentrun.protocol import SandboxSettings, SetupSettings
    from agentrun.report.execution_state import RunState
    from agentrun.run.orchestrator import Orchestrator
    from agentrun.sandbox.choice import SandboxChoice
    from agentrun.spec.model import Spec


class NotAudited(AgentrunError):
    """`--require-audit` and the spec is not audited: exit 1."""

    exit_code = EXIT_FAILED


class Ended(StrEnum):
    """How `run` ended."""

    NOTHING_TO_RUN = "nothing_to_run"  # every group kept
    DRY_RUN = "dry_run"  # the plan shown, nothing started
    NOT_STARTED = "not_started"  # the user said no
    RAN = "ran"


@dataclass
class PreparedRun:
    """A run worked out and checked, not started: what the pre-run summary shows."""

    project: Project
    spec: Spec
    plan: Plan
    request: RunRequest
    cfg: Any  # providers/catalog.py's ProviderConfig: provider, model and their source
    unconfigured: AgentrunError | None  # why a dry run has no model (it assumes cfg's)
    sandbox: SandboxSettings
    choice: SandboxChoice
    executor: str
    setup: SetupSettings | None
    estimate: Any  # app/estimate.py's estimate
    warnings: list[str] = field(default_factory=list)


@dataclass
class RunOutcome:
    ended: Ended
    spec: Spec
    prepared: PreparedRun | None = None
    state: RunState | None = None
    orchestrator: Orchestrator | None = None


class RunFrontend(Protocol):
    """What the command gives the use case: where notes go, and the questions it may ask."""

    interactive: bool  # a terminal: the user may be asked

    def warn(self, text: str) -> None: ...

    def note(self, text: str) -> None: ...

    def summary(self, prepared: PreparedRun) -> None: ...

    def confirm_start(self) -> bool: ...

    def ask_fix_cycles(self) -> int: ...

    def ask_continue(self, failed: list[str]) -> bool: ...

    def running(self, pricing: dict[str, Any]) -> contextlib.AbstractContextManager[EventSink]:
        ...


def run(spec_arg: str | None, flags: RunFlags, ui: RunFrontend) -> RunOutcome:
    """Work the run out, show it (`ui.summary`), ask, and run it."""
    prepared = prepare(spec_arg, flags, ui)
    if isinstance(prepared, RunOutcome):
        return prepared
    ui.summary(prepared)
    request = prepared.request
    if flags.dry_run:
        return RunOutcome(Ended.DRY_RUN, prepared.spec, prepared)
    check_endpoint(prepared.cfg, ui.note)  # before anything is made
    asking = ui.interactive and not flags.yes
    if asking and not ui.confirm_start():
        return RunOutcome(Ended.NOT_STARTED, prepared.spec, prepared)
    if request.fix_cycles is None and request.review:
        request = prepared.request = request.with_fix_cycles(max(0, ui.ask_fix_cycles()))
    state, orchestrator = execute(prepared, ui, ask=asking and flags.on_failure is None)
    return RunOutcome(Ended.RAN, prepared.spec, prepared, state, orchestrator)


def prepare(spec_arg: str | None, flags: RunFlags, ui: RunFrontend) -> PreparedRun | RunOutcome:
    """The project, spec and plan, the request, and every check a run must pass before it
    creates anything."""
    from agentrun.app.checks import refuse_critical, refuse_finished, unfinished_review
    from agentrun.app.loading import load, pin_to_last_run
    from agentrun.plan import build_plan

    check_flags(flags)
    project, spec = load(spec_arg, fmt=flags.fmt, changed=flags.changed)
    for note in project.config.deprecations:
        ui.warn(note)
    if flags.resume:
        project = pin_to_last_run(project, spec, ui.warn, "--resume")
    if spec.kept and not spec.groups:
        return RunOutcome(Ended.NOTHING_TO_RUN, spec)
    plan = build_plan(spec, mode=plan_mode(flags.mode))
    if not flags.force:
        refuse_critical(spec)
    if not (flags.rerun or flags.dry_run or flags.changed or spec.source is not None
            or (flags.resume and unfinished_review(project, spec))):
        refuse_finished(spec)
    return _checked(project, spec, plan, flags, ui)


def _checked(project: Project, spec: Spec, plan: Plan, flags: RunFlags,
             ui: RunFrontend) -> PreparedRun:
    from agentrun.app.checks import (
        capped_price,
        choose_executor,
        run_provider_config,
        worker_agent,
        worktree_setup,
    )
    from agentrun.app.estimate import run_estimate
    from agentrun.sandbox.choice import resolve as resolve_sandbox

    config = project.config
    warnings = _audit_warnings(spec, flags)
    agent = worker_agent(project, plan)
    request = resolve_run(flags, config, agent_executor=agent.executor,
                          can_ask=ui.interactive)
    sandbox, choice = resolve_sandbox(request.sandbox_mode, request.allow_network,
                                      config.sandbox)
    if choice.fell_back:
        warnings.append(f"commands run unconfined: sandbox {choice.describe()}")
    elif choice.confined:
        from agentrun.sandbox.cgroup import process_cap_note

        cap_note = process_cap_note(sandbox.limits.processes)
        if cap_note:
            warnings.append(cap_note)
    cfg, unconfigured = run_provider_config(project, plan, flags)
    if cfg.script:  # a bad script is bad input now, not once per worker after worktrees exist
        from agentrun.providers.scripted import ScriptedProvider

        ScriptedProvider.from_file(cfg.script)
    if not (flags.dry_run or flags.sequential or unconfigured):
        from agentrun.run import pool

        # the worker processes' server (started by `agentrun run` as its first step, or now)
        # imports the SDK while the plan is summed up, checked and committed: the first worker
        # then starts at once, or as soon as the SDK is in
        pool.warm_up(cfg.provider)
    executor = choose_executor(request.executor, cfg.provider, flags.dry_run)
    if flags.record:
        from agentrun.providers.recording import reset_recording

        reset_recording(flags.record)
    estimate = run_estimate(project, spec, plan, cfg.model, request.token_budget,
                            config.price_overrides(),
                            measure=flags.dry_run or (ui.interactive and not flags.yes))
    capped_price(request.max_cost_usd, cfg.model, config.price_overrides())
    setup = worktree_setup(project, request)
    if request.validation_command:  # what the checks would import, where we cannot arrange it
        from agentrun.layout import import_advice, node_advice

        warnings += import_advice(project.root, os.environ, request.validation_command)
        warnings += node_advice(project.root, config.worktree_copy,
                                setup.command if setup else None)
    return PreparedRun(project, spec, plan, request, cfg, unconfigured, sandbox, choice,
                       executor, setup, estimate, warnings)


def _audit_warnings(spec: Spec, flags: RunFlags) -> list[str]:
    """A spec not audited runs with a warning, or not at all with `--require-audit`."""
    if (spec.status or "").lower() == "audited" or spec.source is not None:
        return []
    note = f"{spec.id} status is {spec.status or 'unset'}, not audited"
    if flags.require_audit:
        raise NotAudited(note, hint=f"run `agentrun audit {spec.path}` first, or drop "
                                    "--require-audit")
    return [note + "; run `agentrun audit` first"]


def execute(prepared: PreparedRun, ui: RunFrontend,
            ask: bool) -> tuple[RunState, Orchestrator]:
    """Run the prepared run: the orchestrator steps every wave; `ask`: after a wave with
    failures, the user says whether to go on."""
    from agentrun.app.checks import review_settings
    from agentrun.run.orchestrator import Orchestrator

    p, request = prepared, prepared.request
    options = run_options(
        request, p.project.config, provider=worker_provider(p.cfg, request.flags),
        sandbox=p.sandbox, sandbox_description=p.choice.describe(), executor=p.executor,
        setup=p.setup, warnings=p.warnings, tty=ui.interactive,
        ask_continue=ui.ask_continue if ask else None,
        review=review_settings(p.project, request, p.sandbox.mode) if request.review
        else None)
    if p.spec.source is not None:  # the spec file a run of the plan keeps its record in
        from agentrun.formats.companion import write as write_record

        write_record(p.spec, p.project.root)
    with ui.running(p.project.config.price_overrides()) as on_event, _pool():
        orchestrator = Orchestrator(p.project, p.spec, p.plan, options, on_event=on_event)
        return orchestrator.run(), orchestrator


@contextlib.contextmanager
def _pool() -> Iterator[None]:
    """The worker process pool a run may start is shut down however the run ends."""
    try:
        yield
    finally:
        from agentrun.run import pool

        pool.shut_down()


def check_endpoint(cfg: Any, note: Callable[[str], None]) -> None:
    """The model endpoint answers and accepts the key (exit 2 naming it otherwise), before a
    run or a fix creates anything; nothing to check for the scripted provider."""
    from agentrun.provider_choice import provider_env
    from agentrun.run.endpoint import check_endpoint as check

    checked = check(cfg, provider_env())
    if checked is not None:
        note(f"model endpoint: {checked.describe()}")

