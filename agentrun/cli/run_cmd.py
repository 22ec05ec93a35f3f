"""`agentrun run`: execute a spec — single or orchestrated — and report."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import typer

from agentrun.cli.ci_report import EVENTS_HELP, JUNIT_HELP
from agentrun.cli.common import JSON_OPT, SPEC_ARG, Mode, output
from agentrun.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, AgentrunError, BadInput

if TYPE_CHECKING:
    from agentrun.config import ProjectConfig
    from agentrun.spec.model import Spec


SANDBOX_HELP = ("Confine model-issued commands with bubblewrap: auto (where it works), on "
                "(refuse to start without it) or off (config: sandbox.mode; default auto).")
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
    max_retries: int | None = typer.Option(
        None, "--max-retries", min=0,
        help="Fresh attempts after a failed one (config: retries; default 3)."),
    validation_command: str | None = typer.Option(
        None, "--validate", help="Command that must pass before work counts as done."),
    sequential: bool = typer.Option(False, "--in-process",
                                    help="Run workers in this process, one at a time."),
    interactive: bool = typer.Option(False, "--interactive",
                                     help="Let agents ask before risky steps (TTY only)."),
    sandbox: Literal["auto", "on", "off"] | None = typer.Option(None, "--sandbox",
                                                                help=SANDBOX_HELP),
    allow_network: bool = typer.Option(False, "--allow-network", help=NETWORK_HELP),
    junit: Path | None = typer.Option(None, "--junit", metavar="FILE", help=JUNIT_HELP),
    events: str | None = typer.Option(None, "--events", metavar="FILE|-", help=EVENTS_HELP),
    json_out: bool = JSON_OPT,
) -> None:
    """Execute a spec: plan, run workers wave by wave, merge, and write the summary."""
    out = output(json_out)
    code = execute(
        spec, out, yes=yes, dry_run=dry_run, mode=mode, max_parallel=max_parallel,
        on_failure=on_failure, allow_dirty=allow_dirty, require_audit=require_audit,
        force=force, resume=resume, provider=provider, model=model, script=script, record=record,
        max_steps=max_steps, token_budget=token_budget, worker_timeout=worker_timeout,
        max_retries=max_retries, validation_command=validation_command,
        sequential=sequential, interactive=interactive, sandbox=sandbox,
        allow_network=allow_network, junit=junit, events=events)
    raise typer.Exit(code)


# What `run` does when an option is not given (callers like `demo` pass only what differs).
RUN_DEFAULTS: dict[str, Any] = {
    "yes": False, "dry_run": False, "mode": None, "max_parallel": None, "on_failure": None,
    "allow_dirty": False, "require_audit": False, "force": False, "resume": False, "provider": None,
    "model": None, "script": None, "record": None, "max_steps": None, "token_budget": None,
    "worker_timeout": None, "max_retries": None, "validation_command": None,
    "sequential": False, "interactive": False, "sandbox": None, "allow_network": False,
    "junit": None, "events": None,
}


def refuse_critical(spec: Spec) -> None:
    """A spec the static checks call critical has nothing a worker could do (or verify)."""
    from agentrun.audit.static import static_audit

    critical = static_audit(spec).critical
    if critical:
        lines = "".join(f"\n  - {f.message}" for f in critical)
        raise BadInput(f"{spec.id} cannot be executed as written ({len(critical)} critical "
                       f"finding{'s' if len(critical) > 1 else ''}):{lines}",
                       hint=f"fix {spec.path} (see `agentrun audit --static`), or pass --force "
                            "to run it anyway")


def execute(spec_arg: str | None, out, **given: Any) -> int:
    """The body of `run` (also used by `demo`); returns the exit code."""
    unknown = set(given) - set(RUN_DEFAULTS)
    if unknown:
        raise TypeError(f"unknown run options: {', '.join(sorted(unknown))}")
    opts = {**RUN_DEFAULTS, **given}
    from agentrun.cli.ci_report import event_stream, publish_reports
    from agentrun.cli.common import load
    from agentrun.cli.live import progress_for
    from agentrun.cli.render import plan_summary
    from agentrun.cli.run_estimate import run_estimate
    from agentrun.plan import build_plan
    from agentrun.run.options import RunOptions
    from agentrun.run.orchestrator import Orchestrator
    from agentrun.sandbox.choice import resolve as resolve_sandbox

    if opts["mode"] not in (None, "single", "orchestrated"):
        raise BadInput(f"invalid --mode {opts['mode']!r}", hint="use single or orchestrated")
    if opts["on_failure"] not in (None, "continue", "abort"):
        raise BadInput(f"invalid --on-failure {opts['on_failure']!r}",
                       hint="use --on-failure continue or --on-failure abort")
    project, spec = load(spec_arg)
    plan = build_plan(spec, mode=opts["mode"])
    if not opts["force"]:
        refuse_critical(spec)
    config = project.config
    warnings = []
    if (spec.status or "").lower() != "audited":
        note = f"{spec.id} status is {spec.status or 'unset'}, not audited"
        if opts["require_audit"]:
            raise NotAudited(note, hint=f"run `agentrun audit {spec.path}` first, or drop "
                                        "--require-audit")
        warnings.append(note + "; run `agentrun audit` first")
    sandbox, sandbox_choice = resolve_sandbox(opts["sandbox"], opts["allow_network"],
                                              config.sandbox)
    if sandbox_choice.fell_back:
        warnings.append(f"commands run unconfined: sandbox {sandbox_choice.describe()}")
    cfg, unconfigured = _run_provider_config(project, plan, opts)
    if cfg.script:  # a bad script is bad input now, not once per worker after worktrees exist
        from agentrun.providers.scripted import ScriptedProvider

        ScriptedProvider.from_file(cfg.script)
    if not opts["dry_run"] and not opts["sequential"]:
        from agentrun.run import pool

        pool.warm_up(cfg.provider)
    settings, limits = worker_settings(config, cfg, opts)
    if opts["record"]:
        from agentrun.providers.recording import reset_recording

        reset_recording(opts["record"])
    summary_console = out.stderr if out.mode == "json" else out.stdout
    max_parallel = opts["max_parallel"] or config.max_parallel
    plan_summary(spec, plan, summary_console, max_parallel=max_parallel)
    model_line = (f"not configured ({unconfigured.message}; a run needs one, the estimate "
                  f"assumes {cfg.model})" if unconfigured
                  else f"{cfg.provider}/{cfg.model} ({cfg.source})")
    summary_console.print(f"Model: {model_line} · token budget {limits.token_budget:,}/worker"
                          f" · timeout {limits.timeout_s:g}s/worker", markup=False)
    estimate = run_estimate(project, spec, plan, cfg.model, limits.token_budget,
                            config.price_overrides())
    summary_console.print(estimate.describe(), markup=False)
    summary_console.print(f"Sandbox: {sandbox_choice.describe()}"
                          + (" · network allowed" if sandbox.network and sandbox_choice.confined
                             else ""), markup=False)
    for w in warnings:
        out.warn(w)
    if opts["dry_run"]:
        if out.mode == "json":
            out.json({"ok": True, "dry_run": True, "plan": plan.to_dict(),
                      "provider": cfg.provider, "model": cfg.model,
                      "sandbox": sandbox_choice.describe(), "estimate": estimate.to_dict()})
        return EXIT_OK
    tty = sys.stdin.isatty() and not os.environ.get("CI")
    if tty and not opts["yes"] and not typer.confirm("Proceed?", default=True, err=True):
        out.progress("not started")
        return EXIT_OK
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
        validation_command=opts["validation_command"] or config.validation_command,
        interactive=opts["interactive"] and tty, use_processes=not opts["sequential"],
        pricing=config.price_overrides(), ask_continue=ask, warnings=warnings,
        sandbox=sandbox, sandbox_description=sandbox_choice.describe())
    with progress, \
            event_stream(opts["events"], progress, out) as on_event:
        orchestrator = Orchestrator(project, spec, plan, options, on_event=on_event)
        try:
            state = orchestrator.run()
        finally:
            from agentrun.run import pool

            pool.shut_down()
    report_run(out, state, orchestrator, sandbox_choice.describe())
    publish_reports(out, state, spec, opts["junit"])
    if state.status == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_OK if state.status == "complete" else EXIT_FAILED


def worker_settings(config: ProjectConfig, cfg, opts: dict[str, Any]):
    """The provider settings and limits every worker of a run gets: flags, then config."""
    from agentrun.protocol import ProviderSettings, WorkerLimits

    limits = WorkerLimits(
        max_steps=opts["max_steps"] or config.max_steps,
        token_budget=opts["token_budget"] or config.token_budget,
        timeout_s=opts["worker_timeout"] or config.worker_timeout_s,
        max_retries=opts["max_retries"] if opts["max_retries"] is not None
        else config.retries)
    record = opts.get("record")
    settings = ProviderSettings(provider=cfg.provider, model=cfg.model, base_url=cfg.base_url,
                                max_retries=cfg.max_retries, timeout_s=cfg.timeout_s,
                                script=str(Path(cfg.script).resolve()) if cfg.script else None,
                                record=str(record.resolve()) if record else None)
    return settings, limits


def _provider_config(project, plan, opts):
    from agentrun.agent.definitions import load_agent
    from agentrun.providers.registry import resolve_provider_config

    agent = load_agent("spec-executor" if plan.mode == "single" else "spec-executor-worker",
                       project.root)
    return resolve_provider_config(flag_provider=opts["provider"], flag_model=opts["model"],
                                   config=project.config, agent_model=agent.model,
                                   script=opts["script"])


def _run_provider_config(project, plan, opts):
    """The run's provider settings, and why there are none: a dry run shows the plan and its
    estimate without a model key (priced as the default model), a real run stops here."""
    from agentrun.providers.catalog import ProviderConfig
    from agentrun.providers.registry import DEFAULT_MODELS, NotConfigured

    try:
        return _provider_config(project, plan, opts), None
    except NotConfigured as exc:
        if not opts["dry_run"]:
            raise
        provider = next(iter(DEFAULT_MODELS))
        return ProviderConfig(provider=provider, model=DEFAULT_MODELS[provider],
                              base_url=None, max_retries=project.config.max_retries,
                              timeout_s=project.config.timeout_s, source="none"), exc


def report_run(out, state, orchestrator, sandbox: str | None = None) -> None:
    """The final report: JSON document, or a table and where everything is."""
    from rich.markup import escape
    from rich.table import Table

    from agentrun.report.summary import STATUS_MARK, format_cost

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
                      str(len(g.commits)), str(files), f"{sum(g.usage.values()):,}",
                      escape(note))
    console.print(table)
    usage = state.usage
    console.print(f"Result: [bold]{state.status}[/bold] · tokens {usage.total:,} · cost "
                  f"{format_cost(state.cost_usd)}")
    console.print(f"Spec summary: {escape(str(orchestrator.spec.path))}")
    console.print(f"State: {escape(str(orchestrator.project.state_md))}, "
                  f"{escape(str(orchestrator.state_file))}")
    console.print(f"Run record: {escape(str(orchestrator.run_dir))}")
    for g in state.groups.values():
        if g.worktree:
            console.print(f"Kept worktree for {g.id}: {escape(g.worktree)} "
                          f"(branch {escape(g.branch or '')})")
    if state.status == "interrupted":
        console.print(f"Continue with: agentrun run {escape(state.spec_path)} --resume")
