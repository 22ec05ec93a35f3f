"""`agentrun fix`: the open findings of a spec's last review, fixed by a fresh worker and
reviewed again."""

from __future__ import annotations

from pathlib import Path

import typer

from agentrun.cli.common import JSON_OPT, output
from agentrun.cli.review_cmd import REVIEW_SPEC_ARG
from agentrun.core.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK


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
    from agentrun.app.fix import FixRequest
    from agentrun.app.fix import fix as fix_spec
    from agentrun.app.requests import RunFlags
    from agentrun.cli.run_cmd import report_run

    out = output(json_out)
    flags = RunFlags(provider=provider, model=model, script=script, max_steps=max_steps,
                     token_budget=token_budget, validation_command=validation_command,
                     sequential=sequential, sandbox=sandbox, allow_dirty=allow_dirty,
                     max_cost=max_cost, fix_cycles=cycles)
    done = fix_spec(FixRequest(spec, cycles, flags), warn=out.warn, note=out.progress)
    report_run(out, done.state, done.orchestrator, done.sandbox)
    if done.state.status == "interrupted":
        raise typer.Exit(EXIT_INTERRUPTED)
    raise typer.Exit(EXIT_OK if done.state.status == "complete" else EXIT_FAILED)
