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
class FixOutcome:
    state: RunState
    orchestrator: Orchestrator
    sandbox: str  # the sandbox the fix worker ran in, as the summary says it


def fix(spec_arg: str | None, flags: RunFlags, cycles: int, *,
        warn: Callable[[str], None], note: Callable[[str], None]) -> FixOutcome:
    """Continue the spec's last run with up to `cycles` fix cycles (BadInput when its last
    review left nothing open)."""
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

    project, path = project_for_spec(spec_arg)
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
    request = resolve_run(flags, config, agent_executor=worker_agent(project, plan).executor)
    cfg = provider_config(project, plan, flags)
    box, choice = resolve(request.sandbox_mode, False, config.sandbox)
    executor = choose_executor(request.executor, cfg.provider, dry_run=False)
    capped_price(request.max_cost_usd, cfg.model, config.price_overrides())
    options = run_options(
        request, config, provider=worker_provider(cfg, flags), sandbox=box,
        sandbox_description=choice.describe(), executor=executor,
        setup=worktree_setup(project, request),
        review=review_settings(project, request, box.mode))
    spend = f", spending cap ${request.max_cost_usd:g} for the whole run" \
        if request.max_cost_usd is not None else ""
    note(f"fixing {len(last.findings) + len(last.not_passed)} open finding(s) of Review "
         f"v{last.version} of {relpath(path)} (sandbox {choice.describe()}{spend})")
    check_endpoint(cfg, note)
    orchestrator = Orchestrator(project, spec, plan, options, run_id=state.run_id)
    try:
        return FixOutcome(orchestrator.fix(state, cycles), orchestrator, choice.describe())
    finally:
        from agentrun.run import pool

        pool.shut_down()
