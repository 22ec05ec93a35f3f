"""`agentrun run`: execute a spec — single or orchestrated — and report."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from agentrun.app.requests import RunFlags
from agentrun.cli.ci_report import EVENTS_HELP, JUNIT_HELP
from agentrun.cli.common import CHANGED_OPT, FORMAT_OPT, JSON_OPT, SPEC_ARG, RunMode, output
from agentrun.core.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK

if TYPE_CHECKING:
    from agentrun.app.run import PreparedRun, RunOutcome
    from agentrun.cli.ci_report import EventStream
    from agentrun.cli.output import Output
    from agentrun.cli.progress import Progress
    from agentrun.core.events import EventSink
    from agentrun.providers.catalog import ProviderConfig
    from agentrun.report.execution_state import RunState
    from agentrun.run.orchestrator import Orchestrator
    from agentrun.spec.model import Spec

SANDBOX_HELP = ("Confine model-issued commands with bubblewrap: auto (where it works), on "
                "(refuse to start without it) or off (config: sandbox.mode; default auto).")
EXECUTOR_HELP = ("Who works in each worktree: builtin (agentrun's own loop), claude-code (the "
                 "Claude Code CLI) or codex (the Codex CLI); the CLIs are installed separately "
                 "(config: executor).")
NETWORK_HELP = "Let sandboxed commands reach the network (config: sandbox.network)."


RUN_HELP = """Execute a spec: plan, run workers wave by wave, merge, review, and write the summary.

SPEC may also be a spec-kit or Kiro tasks.md, a GSD PLAN.md or phase folder, or a
Taskmaster tasks.json: it runs as it is, and afterwards its own file marks the tasks that
landed (see docs/formats.md).

Once the work is merged and integration-checked, the reviewer agent judges the run's diff
against the spec (as `agentrun review` does; --no-review skips it). Exit 0 only when the
run completed and the review approved; 1 when something failed or the review requested
changes (fix with `agentrun fix`, or --fix-cycles N).
"""

Opt = typer.Option
Yes = Annotated[bool, Opt("--yes", "-y", help="Do not ask before starting.")]
DryRun = Annotated[bool, Opt("--dry-run", help="Stop after the pre-execution summary.")]
ModeOpt = Annotated[RunMode | None, Opt("--mode", help="Override the chosen mode.")]
MaxParallel = Annotated[int | None, Opt("--max-parallel", min=1,
                                        help="Workers at once (default: the whole wave).")]
OnFailureOpt = Annotated[Literal["continue", "abort"] | None, Opt(
    "--on-failure", help="After a wave with failures: continue or abort (default: ask in a "
                         "terminal, continue otherwise).")]
AllowDirty = Annotated[bool, Opt("--allow-dirty", help="Run with uncommitted changes the spec "
                                                       "does not touch.")]
RequireAudit = Annotated[bool, Opt("--require-audit",
                                   help="Exit 1 unless the spec's status is audited.")]
Force = Annotated[bool, Opt("--force",
                            help="Run a spec even though static checks found it critical.")]
Resume = Annotated[bool, Opt("--resume",
                             help="Continue the last interrupted or failed run of the spec.")]
Rerun = Annotated[bool, Opt("--rerun",
                            help="Run a spec that is already in review or done again.")]
AllowFailingBase = Annotated[bool, Opt(
    "--allow-failing-base", help="Run even though the validation command fails before any "
                                 "change; merged results then pass when they add no new "
                                 "failures.")]
ProviderOpt = Annotated[str | None, Opt("--provider", help="anthropic, openai or scripted.")]
Model = Annotated[str | None, Opt("--model", help="Model name.")]
Script = Annotated[Path | None, Opt("--script", help="Script file for the scripted provider.")]
Record = Annotated[Path | None, Opt("--record",
                                    help="Record the model replies into a script file.")]
MaxSteps = Annotated[int | None, Opt("--max-steps", min=1)]
TokenBudget = Annotated[int | None, Opt("--token-budget", min=1000)]
WorkerTimeout = Annotated[float | None, Opt("--worker-timeout", min=1,
                                            help="Seconds before a worker is killed.")]
Retries = Annotated[int | None, Opt("--retries", min=0, metavar="N", help=(
    "Fresh attempts after a failed one (config: retries; default 3)."))]
OldRetries = Annotated[int | None, Opt("--max-retries", min=0, hidden=True,
                                       help="Deprecated spelling of --retries.")]
Validate = Annotated[str | None, Opt("--validate", help="Command that must pass before work "
                                                        "counts as done.")]
InProcess = Annotated[bool, Opt("--in-process",
                                help="Run workers in this process, one at a time.")]
Interactive = Annotated[bool, Opt("--interactive",
                                  help="Let agents ask before risky steps (TTY only).")]
SandboxOpt = Annotated[Literal["auto", "on", "off"] | None, Opt("--sandbox", help=SANDBOX_HELP)]
AllowNetwork = Annotated[bool, Opt("--allow-network", help=NETWORK_HELP)]
Setup = Annotated[str | None, Opt("--setup", metavar="CMD", help=(
    "Run CMD in every new worktree before its worker starts (config: setup_command)."))]
MaxCost = Annotated[float | None, Opt("--max-cost", metavar="USD", help=(
    "Stop the run once it has spent USD, every worker included (config: max_cost_usd)."))]
Junit = Annotated[Path | None, Opt("--junit", metavar="FILE", help=JUNIT_HELP)]
Events = Annotated[str | None, Opt("--events", metavar="FILE|-", help=EVENTS_HELP)]
ExecutorOpt = Annotated[str | None, Opt("--executor", metavar="builtin|claude-code|codex",
                                        help=EXECUTOR_HELP)]
NoReview = Annotated[bool, Opt("--no-review", help=(
    "Do not review the merged result at the end (the run is then complete without an "
    "approval)."))]
FixCycles = Annotated[int | None, Opt("--fix-cycles", min=0, metavar="N", help=(
    "After a review that requests changes: fix and review again up to N times (default: "
    "asked in a terminal, 0 otherwise)."))]


def run(spec: str | None = SPEC_ARG, yes: Yes = False, dry_run: DryRun = False,
        mode: ModeOpt = None, max_parallel: MaxParallel = None, on_failure: OnFailureOpt = None,
        allow_dirty: AllowDirty = False, require_audit: RequireAudit = False,
        force: Force = False, resume: Resume = False, rerun: Rerun = False,
        allow_failing_base: AllowFailingBase = False, provider: ProviderOpt = None,
        model: Model = None, script: Script = None, record: Record = None,
        max_steps: MaxSteps = None, token_budget: TokenBudget = None,
        worker_timeout: WorkerTimeout = None, retries: Retries = None,
        old_retries: OldRetries = None, validation_command: Validate = None,
        sequential: InProcess = False, interactive: Interactive = False,
        sandbox: SandboxOpt = None, allow_network: AllowNetwork = False, setup: Setup = None,
        max_cost: MaxCost = None, junit: Junit = None, events: Events = None,
        executor: ExecutorOpt = None, no_review: NoReview = False,
        fix_cycles: FixCycles = None, fmt: str | None = FORMAT_OPT,
        changed: bool = CHANGED_OPT, json_out: bool = JSON_OPT) -> None:
    """`agentrun run` (its help is RUN_HELP): the flags, the run, its exit code."""
    out = output(json_out, events)
    if old_retries is not None:
        out.warn("--max-retries is deprecated; use --retries")
        retries = old_retries if retries is None else retries
    flags = RunFlags(
        yes=yes, dry_run=dry_run, mode=mode, max_parallel=max_parallel, on_failure=on_failure,
        allow_dirty=allow_dirty, require_audit=require_audit, force=force, resume=resume,
        rerun=rerun, allow_failing_base=allow_failing_base, provider=provider, model=model,
        script=script, record=record, max_steps=max_steps, token_budget=token_budget,
        worker_timeout=worker_timeout, retries=retries, validation_command=validation_command,
        sequential=sequential, interactive=interactive, sandbox=sandbox,
        allow_network=allow_network, setup=setup, max_cost=max_cost, junit=junit,
        events=events, executor=executor, no_review=no_review, fix_cycles=fix_cycles,
        fmt=fmt, changed=changed)
    raise typer.Exit(execute(spec, out, flags))


def execute(spec_arg: str | None, out: Output, flags: RunFlags) -> int:
    """The body of `run` (also used by `demo`); returns the exit code. The event stream is
    open from the start, so that a run refused before it starts says so too."""
    from agentrun.app.run import run as run_spec
    from agentrun.cli.ci_report import event_stream

    with event_stream(flags.events, out=out) as events:
        return _rendered(out, run_spec(spec_arg, flags, _Terminal(out, events)), flags)


def _rendered(out: Output, outcome: RunOutcome, flags: RunFlags) -> int:
    """What the run came to, shown; its exit code."""
    from agentrun.app.checks import review_plan
    from agentrun.app.run import Ended
    from agentrun.cli.ci_report import publish_reports

    if outcome.ended == Ended.NOTHING_TO_RUN:
        return nothing_to_run(out, outcome.spec)
    p = outcome.prepared
    assert p is not None, "a run that got as far as its plan"
    if outcome.ended == Ended.DRY_RUN:
        if out.mode == "json":
            out.json({"ok": True, "dry_run": True, "plan": p.plan.to_dict(),
                      "provider": p.cfg.provider, "model": p.cfg.model,
                      "sandbox": p.choice.describe(), "review": review_plan(p.request),
                      "estimate": p.estimate.to_dict(), "settings": p.request.provenance()})
        return EXIT_OK
    if outcome.ended == Ended.NOT_STARTED:
        out.progress("not started")
        return EXIT_OK
    from agentrun import telemetry

    for problem in telemetry.problems():  # tracing's trouble, said once: the run went on
        out.warn(problem)
    state = outcome.state
    assert state is not None and outcome.orchestrator is not None
    report_run(out, state, outcome.orchestrator, p.choice.describe())
    publish_reports(out, state, outcome.spec, flags.junit)
    if state.status == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_OK if state.status == "complete" else EXIT_FAILED


class _Terminal:
    """How `run` shows its plan and asks (app/run.py's `RunFrontend`)."""

    def __init__(self, out: Output, events: EventStream) -> None:
        self.out, self.events = out, events
        self.interactive = out.interactive
        self.progress: Progress | None = None

    def warn(self, text: str) -> None:
        self.out.warn(text)

    def note(self, text: str) -> None:
        self.out.progress(text)

    def summary(self, prepared: PreparedRun) -> None:
        plan_lines(self.out, prepared)

    def confirm_start(self) -> bool:
        return bool(typer.confirm("Proceed?", default=True, err=True))

    def ask_fix_cycles(self) -> int:
        return int(typer.prompt("Fix cycles after a review that requests changes", default=0,
                                type=int, err=True))

    def ask_continue(self, failed: list[str]) -> bool:
        assert self.progress is not None, "asked only while the run is running"
        with self.progress.paused():  # the live table would paint over the question
            return bool(typer.confirm(f"Groups {', '.join(failed)} failed. Continue with the "
                                 "remaining waves?", default=True, err=True))

    @contextlib.contextmanager
    def running(self, pricing: dict[str, Any]) -> Iterator[EventSink]:
        from agentrun.cli.live import progress_for

        progress = self.progress = progress_for(self.out, pricing)
        self.events.forward = progress
        with progress:
            yield self.events


def plan_lines(out: Output, p: PreparedRun) -> None:
    """The pre-run summary: the plan, the model, the estimate and every setting that matters."""
    from agentrun.app.checks import review_plan, spending_line
    from agentrun.cli.common import kept_lines
    from agentrun.cli.render import plan_summary

    console = out.stderr if out.mode == "json" else out.stdout
    request, cfg, config = p.request, p.cfg, p.project.config
    plan_summary(p.spec, p.plan, console, max_parallel=request.max_parallel)
    lines = kept_lines(p.spec)
    model = (f"not configured ({p.unconfigured.message}; a run needs one, the estimate "
             f"assumes {cfg.model})" if p.unconfigured else
             f"{cfg.provider}/{cfg.model} ({cfg.source})")
    lines.append(f"Model: {model} · token budget {request.token_budget:,}/worker"
                 f" · timeout {request.worker_timeout_s:g}s/worker")
    lines.append(p.estimate.describe())
    lines.append(f"Sandbox: {p.choice.describe()}" + (
        " · network allowed" if p.sandbox.network and p.choice.confined else ""))
    if p.executor != "builtin":
        lines.append(f"Executor: {p.executor} (its model calls need the network, so its "
                     "sandbox allows it)")
    lines.append(f"Review: {review_plan(request)}")
    if request.max_cost_usd is not None:
        lines.append(spending_line(request.max_cost_usd, p.plan, cfg.model,
                                   request.token_budget, config.price_overrides()))
    validation = request.validation_command
    lines.append(f"Validation: {validation} (each worker, the base commit and each wave's "
                 "merged result)" if validation else
                 "Validation: none — results will be not validated (set validation_command "
                 "in .specflow/config.yaml or pass --validate)")
    for line in lines:
        console.print(line, markup=False)
    for w in p.warnings:
        out.warn(w)


def preflight_endpoint(cfg: ProviderConfig, out: Output) -> None:
    """The model endpoint answers and accepts the key (exit 2 naming it otherwise)."""
    from agentrun.app.run import check_endpoint

    check_endpoint(cfg, out.progress)


def nothing_to_run(out: Output, spec: Spec) -> int:
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


def report_run(out: Output, state: RunState, orchestrator: Orchestrator,
               sandbox: str | None = None) -> None:
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
