"""The `fix` use case: the open findings of a spec's last review, fixed by a fresh worker in
the run's own settings, and reviewed again (run/orchestrator.py's `Orchestrator.fix`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentrun.app.requests import (
    MODES,
    RunFlags,
    plan_mode,
    resolve_run,
    run_options,
    worker_provider,
)
from agentrun.core.errors import BadInput

if TYPE_CHECKING:
    from agentrun.report.execution_state import RunState
    from agentrun.run.orchestrator import Orchestrator


@dataclass
class FixRun:
    state: RunState
    orchestrator: Orchestrator
    sandbox: str  # the sandbox the fix worker ran in, as the summary says it


@dataclass(frozen=True)
class FixRequest:
    """`agentrun fix`: the spec, how many fix-and-review cycles at most, and the worker
    settings' flags (resolved like a run's, with `resolve_run`)."""

    spec: str | None
    cycles: int
    flags: RunFlags


def fix(request: FixRequest, *, warn: Callable[[str], None],
        note: Callable[[str], None]) -> FixRun:
    """Continue the spec's last run with up to `request.cycles` fix cycles (BadInput when its
    last review left nothing open)."""
    from agentrun.app.checks import (
        capped_price,
        choose_executor,
        provider_config,
        review_settings,
        worker_agent,
        worktree_setup,
    )
    from agentrun.app.loading import pin_to_last_run
    from agentrun.app.run import check_endpoint
    from agentrun.core.fsutil import relpath
    from agentrun.plan import build_plan
    from agentrun.project import project_for_spec
    from agentrun.report.execution_state import load_state, state_path
    from agentrun.review.findings import last_review
    from agentrun.run.orchestrator import Orchestrator
    from agentrun.sandbox.choice import resolve
    from agentrun.spec import load_spec

    flags, cycles = request.flags, request.cycles
    project, path = project_for_spec(request.spec)
    spec = load_spec(path)
    state = load_state(state_path(project.execution_dir, spec.id))
    last = last_review(state)  # the run's record of its latest review, never the spec's text
    if state is None or last is None or not last.open:
        what = ("has no review yet" if last is None else
                f"has nothing open to fix: its last review is {last.describe()}")
        raise BadInput(f"{spec.id} {what}", hint=f"review it first: `agentrun review {spec.id}`")
    project = pin_to_last_run(project, spec, warn, "the fix")
    plan = build_plan(spec, mode=plan_mode(state.mode) if state.mode in MODES else None)
    config = project.config
    settings = resolve_run(flags, config, agent_executor=worker_agent(project, plan).executor)
    cfg = provider_config(project, plan, flags)
    box, choice = resolve(settings.sandbox_mode, False, config.sandbox)
    executor = choose_executor(settings.executor, cfg.provider, dry_run=False)
    capped_price(settings.max_cost_usd, cfg.model, config.price_overrides())
    options = run_options(
        settings, config, provider=worker_provider(cfg, flags), sandbox=box,
        sandbox_description=choice.describe(), executor=executor,
        setup=worktree_setup(project, settings),
        review=review_settings(project, settings, box.mode))
    spend = f", spending cap ${settings.max_cost_usd:g} for the whole run" \
        if settings.max_cost_usd is not None else ""
    note(f"fixing {len(last.findings) + len(last.not_passed)} open finding(s) of Review "
         f"v{last.version} of {relpath(path)} (sandbox {choice.describe()}{spend})")
    check_endpoint(cfg, note)
    orchestrator = Orchestrator(project, spec, plan, options, run_id=state.run_id)
    try:
        return FixRun(orchestrator.fix(state, cycles), orchestrator, choice.describe())
    finally:
        from agentrun.run import pool

        pool.shut_down()
