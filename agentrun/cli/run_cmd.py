"""`agentrun run`: execute a spec — single or orchestrated — and report."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import typer

from agentrun.cli.ci_report import EVENTS_HELP, JUNIT_HELP
from agentrun.cli.common import CHANGED_OPT, FORMAT_OPT, JSON_OPT, SPEC_ARG, Mode, output
from agentrun.core.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, AgentrunError, BadInput

if TYPE_CHECKING:
    pass


SANDBOX_HELP = ("Confine model-issued commands with bubblewrap: auto (where it works), on "
                "(refuse to start without it) or off (config: sandbox.mode; default auto).")
EXECUTOR_HELP = ("Who works in each worktree: builtin (agentrun's own loop), claude-code (the "
                 "Claude Code CLI) or codex (the Codex CLI); the CLIs are installed separately "
                 "(config: executor).")
NETWORK_HELP = "Let sandboxed commands reach the network (config: sandbox.network)."


class NotAudited(AgentrunError):
    exit_code = EXIT_FAILED


def run(
    spec: str | None = SPEC_ARG,
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask before starting."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Stop after the pre-execution summary."),
    mode: Mode | None = typer.Option(None, "--mode", help="Override the chosen mode."),
    max_parallel: int | None = typer.Option(None, "--max-parallel", min=1,
                                            help="Workers at once (default: the whole wave)."),
    on_failure: Literal["continue", "abort"] | None = typer.Option(
        None, "--on-failure", help="After a wave with failures: continue or abort "
                                   "(default: ask in a terminal, continue otherwise)."),
    allow_dirty: bool = typer.Option(False, "--allow-dirty",
                                     help="Run with uncommitted changes the spec does not touch."),
    require_audit: bool = typer.Option(False, "--require-audit",
                                       help="Exit 1 unless the spec's status is audited."),
    force: bool = typer.Option(False, "--force",
                               help="Run a spec even though static checks found it critical."),
    resume: bool = typer.Option(False, "--resume",
                                help="Continue the last interrupted or failed run of the spec."),
    rerun: bool = typer.Option(False, "--rerun",
                               help="Run a spec that is already in review or done again."),
    allow_failing_base: bool = typer.Option(
        False, "--allow-failing-base",
        help="Run even though the validation command fails before any change; merged results "
             "then pass when they add no new failures."),
    provider: str | None = typer.Option(None, "--provider",
                                        help="anthropic, openai or scripted."),
    model: str | None = typer.Option(None, "--model", help="Model name."),
    script: Path | None = typer.Option(None, "--script",
                                       help="Script file for the scripted provider."),
    record: Path | None = typer.Option(None, "--record",
                                       help="Record the model replies into a script file."),
    max_steps: int | None = typer.Option(None, "--max-steps", min=1),
    token_budget: int | None = typer.Option(None, "--token-budget", min=1000),
    worker_timeout: float | None = typer.Option(None, "--worker-timeout", min=1,
                                                help="Seconds before a worker is killed."),
    retries: int | None = typer.Option(
        None, "--retries", min=0, metavar="N",
        help="Fresh attempts after a failed one (config: retries; default 3)."),
    old_retries: int | None = typer.Option(None, "--max-retries", min=0, hidden=True,
                                           help="Deprecated spelling of --retries."),
    validation_command: str | None = typer.Option(
        None, "--validate", help="Command that must pass before work counts as done."),
    sequential: bool = typer.Option(False, "--in-process",
                                    help="Run workers in this process, one at a time."),
    interactive: bool = typer.Option(False, "--interactive",
                                     help="Let agents ask before risky steps (TTY only)."),
    sandbox: Literal["auto", "on", "off"] | None = typer.Option(None, "--sandbox",
                                                                help=SANDBOX_HELP),
    allow_network: bool = typer.Option(False, "--allow-network", help=NETWORK_HELP),
    setup: str | None = typer.Option(
        None, "--setup", metavar="CMD",
        help="Run CMD in every new worktree before its worker starts (config: setup_command)."),
    max_cost: float | None = typer.Option(
        None, "--max-cost", metavar="USD",
        help="Stop the run once it has spent USD, every worker included "
             "(config: max_cost_usd)."),
    junit: Path | None = typer.Option(None, "--junit", metavar="FILE", help=JUNIT_HELP),
    events: str | None = typer.Option(None, "--events", metavar="FILE|-", help=EVENTS_HELP),
    executor: str | None = typer.Option(None, "--executor", metavar="builtin|claude-code|codex",
                                        help=EXECUTOR_HELP),
    no_review: bool = typer.Option(False, "--no-review",
                                   help="Do not review the merged result at the end (the run "
                                        "is then complete without an approval)."),
    fix_cycles: int | None = typer.Option(
        None, "--fix-cycles", min=0, metavar="N",
        help="After a review that requests changes: fix and review again up to N times "
             "(default: asked in a terminal, 0 otherwise)."),
    fmt: str | None = FORMAT_OPT,
    changed: bool = CHANGED_OPT,
    json_out: bool = JSON_OPT,
) -> None:
    """Execute a spec: plan, run workers wave by wave, merge, review, and write the summary.

    SPEC may also be a spec-kit or Kiro tasks.md, a GSD PLAN.md or phase folder, or a
    Taskmaster tasks.json: it runs as it is, and afterwards its own file marks the tasks that
    landed (see docs/formats.md).

    Once the work is merged and integration-checked, the reviewer agent judges the run's diff
    against the spec (as `agentrun review` does; --no-review skips it). Exit 0 only when the
    run completed and the review approved; 1 when something failed or the review requested
    changes (fix with `agentrun fix`, or --fix-cycles N).
    """
    out = output(json_out, events)
    if old_retries is not None:
        out.warn("--max-retries is deprecated; use --retries")
        retries = old_retries if retries is None else retries
    code = execute(
        spec, out, yes=yes, dry_run=dry_run, mode=mode, max_parallel=max_parallel,
        on_failure=on_failure, allow_dirty=allow_dirty, require_audit=require_audit,
        force=force, resume=resume, rerun=rerun, allow_failing_base=allow_failing_base,
        provider=provider, model=model, script=script, record=record,
        max_steps=max_steps, token_budget=token_budget, worker_timeout=worker_timeout,
        max_retries=retries, validation_command=validation_command,
        sequential=sequential, interactive=interactive, sandbox=sandbox,
        allow_network=allow_network, setup=setup, max_cost=max_cost, junit=junit,
        events=events, executor=executor, no_review=no_review, fix_cycles=fix_cycles,
        fmt=fmt, changed=changed)
    raise typer.Exit(code)


# What `run` does when an option is not given (callers like `demo` pass only what differs).
RUN_DEFAULTS: dict[str, Any] = {
    "yes": False, "dry_run": False, "mode": None, "max_parallel": None, "on_failure": None,
    "allow_dirty": False, "require_audit": False, "force": False, "resume": False,
    "rerun": False, "allow_failing_base": False, "provider": None,
    "model": None, "script": None, "record": None, "max_steps": None, "token_budget": None,
    "worker_timeout": None, "max_retries": None, "validation_command": None,
    "sequential": False, "interactive": False, "sandbox": None, "allow_network": False,
    "setup": None, "max_cost": None, "junit": None, "events": None, "executor": None,
    "no_review": False, "fix_cycles": None, "fmt": None, "changed": False,
}


def execute(spec_arg: str | None, out, **given: Any) -> int:
    """The body of `run` (also used by `demo`); returns the exit code. The event stream is
    open from the start, so that a run refused before it starts says so too."""
    unknown = set(given) - set(RUN_DEFAULTS)
    if unknown:
        raise TypeError(f"unknown run options: {', '.join(sorted(unknown))}")
    opts = {**RUN_DEFAULTS, **given}
    from agentrun.cli.ci_report import event_stream

    with event_stream(opts["events"], out=out) as events:
        return _execute(spec_arg, out, opts, events)


def _execute(spec_arg: str | None, out, opts: dict[str, Any], events) -> int:
    from agentrun.agent.definitions import EXECUTORS
    from agentrun.cli.ci_report import publish_reports
    from agentrun.cli.common import load, pin_to_last_run
    from agentrun.cli.live import progress_for
    from agentrun.cli.render import plan_summary
    from agentrun.cli.run_estimate import run_estimate
    from agentrun.cli.run_settings import (
        choose_executor,
        refuse_critical,
        refuse_finished,
        review_plan,
        review_settings,
        run_provider_config,
        spending_line,
        unfinished_review,
        worker_agent,
        worker_settings,
        worktree_setup,
    )
    from agentrun.plan import build_plan
    from agentrun.run.options import RunOptions
    from agentrun.run.orchestrator import Orchestrator
    from agentrun.sandbox.choice import resolve as resolve_sandbox

    if opts["mode"] not in (None, "single", "orchestrated"):
        raise BadInput(f"invalid --mode {opts['mode']!r}", hint="use single or orchestrated")
    if opts["on_failure"] not in (None, "continue", "abort"):
        raise BadInput(f"invalid --on-failure {opts['on_failure']!r}",
                       hint="use --on-failure continue or --on-failure abort")
    if opts["executor"] not in (None, *EXECUTORS):
        raise BadInput(f"invalid --executor {opts['executor']!r}",
                       hint=f"use {', '.join(EXECUTORS)}")
    project, spec = load(spec_arg, fmt=opts["fmt"], changed=opts["changed"])
    for note in project.config.deprecations:
        out.warn(note)
    if opts["resume"]:
        project = pin_to_last_run(project, spec, out, "--resume")
    if spec.kept and not spec.groups:
        return nothing_to_run(out, spec)
    plan = build_plan(spec, mode=opts["mode"])
    if not opts["force"]:
        refuse_critical(spec)
    if not (opts["rerun"] or opts["dry_run"] or opts["changed"] or spec.source is not None
            or (opts["resume"] and unfinished_review(project, spec))):
        refuse_finished(spec)
    config = project.config
    warnings = []
    if (spec.status or "").lower() != "audited" and spec.source is None:
        note = f"{spec.id} status is {spec.status or 'unset'}, not audited"
        if opts["require_audit"]:
            raise NotAudited(note, hint=f"run `agentrun audit {spec.path}` first, or drop "
                                        "--require-audit")
        warnings.append(note + "; run `agentrun audit` first")
    sandbox, sandbox_choice = resolve_sandbox(opts["sandbox"], opts["allow_network"],
                                              config.sandbox)
    if sandbox_choice.fell_back:
        warnings.append(f"commands run unconfined: sandbox {sandbox_choice.describe()}")
    cfg, unconfigured = run_provider_config(project, plan, opts)
    if cfg.script:  # a bad script is bad input now, not once per worker after worktrees exist
        from agentrun.providers.scripted import ScriptedProvider

        ScriptedProvider.from_file(cfg.script)
    settings, limits = worker_settings(config, cfg, opts)
    executor = choose_executor(opts["executor"] or config.executor
                               or worker_agent(project, plan).executor or "builtin",
                               cfg.provider, opts["dry_run"])
    if opts["record"]:
        from agentrun.providers.recording import reset_recording

        reset_recording(opts["record"])
    summary_console = out.stderr if out.mode == "json" else out.stdout
    max_parallel = opts["max_parallel"] or config.max_parallel
    plan_summary(spec, plan, summary_console, max_parallel=max_parallel)
    from agentrun.cli.common import kept_lines

    for line in kept_lines(spec):
        summary_console.print(line, markup=False)
    model_line = (f"not configured ({unconfigured.message}; a run needs one, the estimate "
                  f"assumes {cfg.model})" if unconfigured
                  else f"{cfg.provider}/{cfg.model} ({cfg.source})")
    summary_console.print(f"Model: {model_line} · token budget {limits.token_budget:,}/worker"
                          f" · timeout {limits.timeout_s:g}s/worker", markup=False)
    asking = out.interactive and not opts["yes"]
    estimate = run_estimate(project, spec, plan, cfg.model, limits.token_budget,
                            config.price_overrides(), measure=opts["dry_run"] or asking)
    summary_console.print(estimate.describe(), markup=False)
    summary_console.print(f"Sandbox: {sandbox_choice.describe()}"
                          + (" · network allowed" if sandbox.network and sandbox_choice.confined
                             else ""), markup=False)
    if executor != "builtin":
        summary_console.print(f"Executor: {executor} (its model calls need the network, so "
                              "its sandbox allows it)", markup=False)
    tty = out.interactive
    if opts["fix_cycles"] is None and not (tty and not opts["yes"]):
        opts["fix_cycles"] = 0  # nothing to ask: CI, no terminal, or --yes
    summary_console.print(f"Review: {review_plan(opts)}", markup=False)
    max_cost = opts["max_cost"] or config.max_cost_usd
    if max_cost is not None:
        summary_console.print(spending_line(max_cost, plan, cfg.model, limits.token_budget,
                                            config.price_overrides()), markup=False)
    setup_settings = worktree_setup(project, opts["setup"], limits.timeout_s)
    validation = opts["validation_command"] or config.validation_command
    if validation:  # what the workers' checks would import, where agentrun cannot arrange it
        from agentrun.layout import import_advice, node_advice

        warnings += import_advice(project.root, os.environ, validation)
        warnings += node_advice(project.root, config.worktree_copy,
                                setup_settings.command if setup_settings else None)
    summary_console.print(f"Validation: {validation} (each worker, the base commit and each "
                          "wave's merged result)" if validation else
                          "Validation: none — results will be not validated (set "
                          "validation_command in .specflow/config.yaml or pass --validate)",
                          markup=False)
    for w in warnings:
        out.warn(w)
    if opts["dry_run"]:
        if out.mode == "json":
            out.json({"ok": True, "dry_run": True, "plan": plan.to_dict(),
                      "provider": cfg.provider, "model": cfg.model,
                      "sandbox": sandbox_choice.describe(), "review": review_plan(opts),
                      "estimate": estimate.to_dict()})
        return EXIT_OK
    preflight_endpoint(cfg, out)  # before anything is made: no worktree, commit or record
    if tty and not opts["yes"] and not typer.confirm("Proceed?", default=True, err=True):
        out.progress("not started")
        return EXIT_OK
    if opts["fix_cycles"] is None and not opts["no_review"]:
        opts["fix_cycles"] = max(0, typer.prompt(
            "Fix cycles after a review that requests changes", default=0, type=int, err=True))
    on_failure = opts["on_failure"] or config.on_failure
    progress = progress_for(out, config.price_overrides())
    ask = None
    if tty and not opts["yes"] and opts["on_failure"] is None:
        def ask(failed: list[str]) -> bool:
            with progress.paused():  # the live table would paint over the question
                return typer.confirm(f"Groups {', '.join(failed)} failed. Continue with the "
                                     "remaining waves?", default=True, err=True)
    options = RunOptions(
        provider=settings, limits=limits, max_parallel=max_parallel,
        on_failure=on_failure, allow_dirty=opts["allow_dirty"], resume=opts["resume"],
        validation_command=validation, allow_failing_base=opts["allow_failing_base"],
        interactive=opts["interactive"] and tty, use_processes=not opts["sequential"],
        pricing=config.price_overrides(), ask_continue=ask, warnings=warnings,
        sandbox=sandbox, sandbox_description=sandbox_choice.describe(), executor=executor,
        review=None if opts["no_review"] else review_settings(project, opts, sandbox.mode),
        review_skipped="--no-review" if opts["no_review"] else None,
        setup=setup_settings, max_cost_usd=max_cost)
    if spec.source is not None:  # the spec file a run of the plan keeps its record in
        from agentrun.formats.companion import write as write_record

        write_record(spec, project.root)
    events.forward = progress
    with progress:
        orchestrator = Orchestrator(project, spec, plan, options, on_event=events)
        try:
            state = orchestrator.run()
        finally:
            from agentrun.run import pool

            pool.shut_down()
    from agentrun import telemetry

    for problem in telemetry.problems():  # tracing's trouble, said once: the run went on
        out.warn(problem)
    report_run(out, state, orchestrator, sandbox_choice.describe())
    publish_reports(out, state, spec, opts["junit"])
    if state.status == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_OK if state.status == "complete" else EXIT_FAILED


def preflight_endpoint(cfg, out) -> None:
    """The model endpoint answers and accepts the key (exit 2 naming it otherwise), before a
    run or a fix creates anything; nothing to check for the scripted provider."""
    from agentrun.providers.registry import provider_env
    from agentrun.run.endpoint import check_endpoint

    check = check_endpoint(cfg, provider_env())
    if check is not None:
        out.progress(f"model endpoint: {check.describe()}")


def nothing_to_run(out, spec) -> int:
    """Every group is kept (unchanged since it landed, or done in the plan): exit 0."""
    from dataclasses import asdict

    from agentrun.cli.common import kept_lines

    if out.mode == "json":
        out.json({"ok": True, "nothing_to_run": True, "spec": spec.id,
                  "kept": [asdict(k) for k in spec.kept]})
        return EXIT_OK
    for line in kept_lines(spec):
        out.stdout.print(line, markup=False)
    out.stdout.print(f"Nothing to run: all {len(spec.kept)} group(s) of {spec.id} are kept.",
                     markup=False)
    return EXIT_OK


def report_run(out, state, orchestrator, sandbox: str | None = None) -> None:
    """The final report: JSON document, or a table and where everything is."""
    from rich.markup import escape
    from rich.table import Table

    from agentrun.report.summary import STATUS_MARK, format_cost, kept_worktrees, review_words

    doc = {"ok": state.status == "complete", **state.to_dict(),
           "run_dir": str(orchestrator.run_dir), "state_file": str(orchestrator.state_file),
           **({"sandbox": sandbox} if sandbox else {})}
    if out.mode == "json":
        out.json(doc)
        return
    console = out.stdout
    table = Table(box=None, header_style="bold", pad_edge=False, title=None)
    for col in ("Group", "Wave", "Status", "Commits", "Files", "Tokens", "Note"):
        table.add_column(col)
    for g in state.groups.values():
        files = len(g.files_created) + len(g.files_modified)
        note = (g.error or "").splitlines()[0][:80] if g.error else ""
        table.add_row(g.id, g.wave, STATUS_MARK.get(g.status, g.status),
                      str(len(g.commits)), str(files), f"{g.usage.total:,}",
                      escape(note))
    console.print(table)
    usage = state.usage
    checked = "" if state.integration_command else " · not validated"
    console.print(f"Result: [bold]{state.status}[/bold]{checked} · tokens {usage.total:,} · "
                  f"cost {format_cost(state.cost_usd)}")
    console.print(f"Review: {escape(review_words(state))}")
    console.print(f"Spec summary: {escape(str(orchestrator.spec.path))}")
    spec = orchestrator.spec
    if spec.source is not None:
        from agentrun.core.fsutil import relpath

        marked = [relpath(p) for p in orchestrator.record.written
                  if not str(p).endswith("-landed.json")]
        console.print(f"Plan: {escape(spec.source.path)}: "
                      + (f"marked what landed in {escape(', '.join(marked))}" if marked
                         else "nothing new marked done"))
    for kept in spec.kept:
        console.print(f"Kept: {escape(kept.id)} — {escape(kept.reason)}")
    console.print(f"State: {escape(str(orchestrator.project.state_md))}, "
                  f"{escape(str(orchestrator.state_file))}")
    console.print(f"Run record: {escape(str(orchestrator.run_dir))}")
    report = orchestrator.run_dir / "report.html"
    if report.is_file():
        console.print(f"Report: {escape(str(report))}")
    if state.trace_id:
        console.print(f"Trace: {state.trace_id}")
    for ids, path, branch in kept_worktrees(state.groups.values()):
        console.print(f"Kept worktree for {', '.join(ids)}: {escape(path)} "
                      f"(branch {escape(branch)})")
    if state.status == "interrupted":
        console.print(f"Continue with: agentrun run {escape(state.spec_path)} --resume")
    elif state.stop_reason == "target_moved":
        console.print(f"Continue with: git switch {escape(state.target_branch or '')} && "
                      f"agentrun run {escape(state.spec_path)} --resume")
