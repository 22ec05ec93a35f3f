"""`agentrun fix`: the open findings of a spec's last review, fixed by a fresh worker and
reviewed again."""

from __future__ import annotations

from pathlib import Path

import typer

from agentrun.cli.common import JSON_OPT, output, pin_to_last_run, relpath
from agentrun.cli.review_cmd import REVIEW_SPEC_ARG
from agentrun.core.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, BadInput


def fix(
    spec: str | None = REVIEW_SPEC_ARG,
    cycles: int = typer.Option(1, "--cycles", min=1, metavar="N",
                               help="Fix and review again up to N times (default 1)."),
    provider: str | None = typer.Option(None, "--provider", help="anthropic, openai or scripted."),
    model: str | None = typer.Option(None, "--model", help="Model name."),
    script: Path | None = typer.Option(None, "--script",
                                       help="Script file for the scripted provider."),
    max_steps: int | None = typer.Option(None, "--max-steps", min=1),
    token_budget: int | None = typer.Option(None, "--token-budget", min=1000),
    validation_command: str | None = typer.Option(
        None, "--validate", help="Command that must pass before the fix counts as done."),
    sequential: bool = typer.Option(False, "--in-process",
                                    help="Run the fix worker in this process."),
    sandbox: str | None = typer.Option(None, "--sandbox", metavar="auto|on|off",
                                       help="Confine model-issued commands with bubblewrap."),
    allow_dirty: bool = typer.Option(False, "--allow-dirty",
                                     help="Run with uncommitted changes the spec does not touch."),
    max_cost: float | None = typer.Option(
        None, "--max-cost", metavar="USD",
        help="The run's spending cap, what it spent before this fix included: no fix or review "
             "starts once it is reached (config: max_cost_usd)."),
    json_out: bool = JSON_OPT,
) -> None:
    """Fix the open findings of the spec's last review, then review again.

    The findings (and the files they name) become one assignment for a worker in a fresh
    context and its own worktree; its branch is verified, merged and integration-checked like
    a wave, a `### Fix Response vN` is appended to the spec's ## Review History, and the
    reviewer looks again. The fix worker gets the run's executor and worktree set-up from
    the config. Exit 0 when a review approves, 1 otherwise (also when the spending cap stops
    a fix or a review); 2 when there is no review with open findings (run `agentrun review`
    first); 3 when the run cannot start.
    """
    from agentrun.cli.run_cmd import preflight_endpoint, report_run
    from agentrun.cli.run_settings import (
        capped_price,
        choose_executor,
        provider_config,
        review_settings,
        worker_agent,
        worker_settings,
        worktree_setup,
    )
    from agentrun.plan import build_plan
    from agentrun.project import project_for_spec
    from agentrun.report.execution_state import load_state, state_path
    from agentrun.review.findings import last_review
    from agentrun.run.options import RunOptions
    from agentrun.run.orchestrator import Orchestrator
    from agentrun.sandbox.choice import resolve
    from agentrun.spec import load_spec

    out = output(json_out)
    project, path = project_for_spec(spec)
    loaded = load_spec(path)
    state = load_state(state_path(project.execution_dir, loaded.id))
    last = last_review(state)  # the run's record of its latest review, never the spec's text
    if last is None or not last.open:
        what = ("has no review yet" if last is None else
                f"has nothing open to fix: its last review is {last.describe()}")
        raise BadInput(f"{loaded.id} {what}",
                       hint=f"review it first: `agentrun review {loaded.id}`")
    assert state is not None
    project = pin_to_last_run(project, loaded, out, "the fix")
    plan = build_plan(loaded, mode=state.mode if state.mode in ("single", "orchestrated")
                      else None)
    opts = {"provider": provider, "model": model, "script": script, "max_steps": max_steps,
            "token_budget": token_budget, "worker_timeout": None, "max_retries": None,
            "record": None, "fix_cycles": cycles}
    cfg = provider_config(project, plan, opts)
    settings, limits = worker_settings(project.config, cfg, opts)
    box, choice = resolve(sandbox, False, project.config.sandbox)
    config = project.config
    executor = choose_executor(config.executor or worker_agent(project, plan).executor
                               or "builtin", cfg.provider, dry_run=False)
    cap = max_cost or config.max_cost_usd
    capped_price(cap, cfg.model, config.price_overrides())
    options = RunOptions(
        provider=settings, limits=limits, allow_dirty=allow_dirty,
        validation_command=validation_command or config.validation_command,
        use_processes=not sequential, pricing=config.price_overrides(),
        sandbox=box, sandbox_description=choice.describe(), executor=executor,
        setup=worktree_setup(project, None, limits.timeout_s), max_cost_usd=cap,
        review=review_settings(project, opts, box.mode))
    spend = f", spending cap ${cap:g} for the whole run" if cap is not None else ""
    out.progress(f"fixing {len(last.findings) + len(last.not_passed)} open finding(s) of "
                 f"Review v{last.version} of {relpath(path)} (sandbox {choice.describe()}"
                 f"{spend})")
    preflight_endpoint(cfg, out)
    orchestrator = Orchestrator(project, loaded, plan, options, run_id=state.run_id)
    try:
        final = orchestrator.fix(state, cycles)
    finally:
        from agentrun.run import pool

        pool.shut_down()
    report_run(out, final, orchestrator, choice.describe())
    if final.status == "interrupted":
        raise typer.Exit(EXIT_INTERRUPTED)
    raise typer.Exit(EXIT_OK if final.status == "complete" else EXIT_FAILED)
