"""`agentrun aggregate`: merge one wave's CI worker results, as a local run would."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agentrun.cli.common import JSON_OPT, output
from agentrun.cli.run_cmd import Events, Junit, Script

if TYPE_CHECKING:
    from agentrun.app.ci import Aggregated
    from agentrun.cli.ci_report import EventStream
    from agentrun.cli.output import Output
    from agentrun.core.events import EventSink

AGGREGATE_HELP = """Aggregate one wave of CI worker jobs into the checked-out branch.

Run it in a clone of the target branch after `git fetch origin
'+refs/heads/agentrun/*:refs/remotes/origin/agentrun/*'`. Every result is verified
against its branch (a local branch or origin/<branch>), branches are merged in group
order with the failure rules of a local run, and the spec's Execution Summary, STATE.md
and .specflow/execution/<SPEC>-state.json are written and committed. Push the branch
afterwards: the next wave's jobs run on that commit, and its aggregate continues the
same execution state. Wave 1's results start a new run; a later wave needs the
previous one aggregated. After the last wave (or when the failure rules abort) the run
is finished; otherwise --json reports "status": "running" and "next_wave".
The settings (config, agents, prompts) are the run's: those of --start-commit, else those
its execution state recorded when wave 1 was aggregated, whatever earlier waves merged
since. With --github-output, a later job can act
on the outcome: `status` is one of running, complete, partial, failed, aborted or
interrupted, and `commit` the commit made (both unset when nothing was).

After the last wave, when every group completed, the reviewer reviews the merged result
as at the end of `agentrun run` (its model from --provider/--model, else the environment,
.specflow/config.yaml or the agent definition), and the run is complete only when it
approves; fix cycles are `agentrun fix`'s, in a job of their own.

Under a spending cap (--max-cost, config max_cost_usd) every result of the wave is merged,
whatever its job spent: once the run's spend (every wave so far) reaches the cap, the
next waves do not start and the review is not run (stop_reason cost_cap, exit 1).

Exit codes: 0 every group aggregated so far completed (and, after the last wave, the
review approved) · 1 a group failed, was partial or blocked, or the review requested
changes · 2 bad input: a result file missing or unreadable, a result for a group not
in the plan, a completed result whose branch is not in the repository (never pushed or
not fetched), a batch of the wave without a result (see --allow-missing), results of
several waves, a wave whose previous wave is not aggregated, a bad --start-commit, or
--github-output outside a GitHub Actions step · 3 could not start (detached HEAD, dirty
tree, lock held, no model for the last wave's review, a run that started elsewhere than
--start-commit) · 130 interrupted.
"""

Opt = typer.Option
SpecArg = Annotated[str, typer.Argument(metavar="SPEC", show_default=False,
                                        help="Spec file or id.")]
ResultsArg = Annotated[list[Path], typer.Argument(
    metavar="RESULTS", show_default=False, help="The result files of one wave's worker jobs.")]
Remote = Annotated[str, Opt("--remote",
                            help="Remote whose fetched branches hold the jobs' commits.")]
OnFailureOpt = Annotated[str | None, Opt("--on-failure", help=(
    "After a wave with failures: continue (default) or abort."))]
AllowMissing = Annotated[bool, Opt("--allow-missing", help=(
    "Count batches without a result file as failed instead of refusing."))]
PlanModeOpt = Annotated[str | None, Opt("--mode", help="As given to `plan --matrix`.")]
MaxWorkers = Annotated[int | None, Opt("--max-workers", min=1,
                                       help="As given to `plan --matrix`.")]
Start = Annotated[str | None, Opt("--start-commit", metavar="COMMIT", help=(
    "The run's start commit (where its plan was made): its .specflow/config.yaml applies, "
    "not the checkout's."))]
SandboxModeOpt = Annotated[str | None, Opt("--sandbox", metavar="auto|on|off", help=(
    "Confine the integration check's and the reviewer's commands with bubblewrap: auto "
    "(where it works), on (refuse to start without it) or off (config: sandbox.mode; "
    "default auto)."))]
GithubOutput = Annotated[bool, Opt("--github-output", help=(
    "Set the step's outputs `status` (the run's) and `commit` (the one this aggregate "
    "made), in the file GITHUB_OUTPUT names."))]
NoReview = Annotated[bool, Opt("--no-review", help=(
    "After the last wave, do not review the merged result (review it later with "
    "`agentrun review SPEC`)."))]
ReviewProvider = Annotated[str | None, Opt("--provider", help=(
    "The reviewer's provider: anthropic, openai or scripted."))]
ReviewModel = Annotated[str | None, Opt("--model", help="The reviewer's model.")]
MaxCost = Annotated[float | None, Opt("--max-cost", metavar="USD", help=(
    "The whole run's spending cap, as its jobs were given it (config: max_cost_usd): once the "
    "waves so far have spent it, the run stops (cost_cap) and the review does not start."))]


def aggregate(spec: SpecArg, results: ResultsArg, remote: Remote = "origin",
              on_failure: OnFailureOpt = None, allow_missing: AllowMissing = False,
              mode: PlanModeOpt = None, max_workers: MaxWorkers = None, start: Start = None,
              sandbox: SandboxModeOpt = None, github_output: GithubOutput = False,
              no_review: NoReview = False, provider: ReviewProvider = None,
              model: ReviewModel = None, script: Script = None, max_cost: MaxCost = None,
              junit: Junit = None, events: Events = None, json_out: bool = JSON_OPT) -> None:
    """`agentrun aggregate` (its help is AGGREGATE_HELP): the wave aggregated, its exit code."""
    from agentrun.app.ci import aggregate_wave
    from agentrun.app.requests import RunFlags, check_flags
    from agentrun.cli.ci_report import event_stream

    out = output(json_out, events)
    # the stream is open before the first check, so that a refusal ends it with run_done too
    with event_stream(events, out=out) as stream:
        flags = RunFlags(on_failure=on_failure, mode=mode, sandbox=sandbox,
                         no_review=no_review, provider=provider, model=model, script=script,
                         max_cost=max_cost, fix_cycles=0)
        check_flags(flags)
        if github_output:
            from agentrun.report.github import outputs_file

            outputs_file()  # outside a step: bad input before anything changes
        done = aggregate_wave(spec, results, flags, remote=remote, allow_missing=allow_missing,
                              max_workers=max_workers, start=start,
                              on_event=lambda: _progress(out, stream))
    raise typer.Exit(_rendered(out, done, github_output, junit))


@contextlib.contextmanager
def _progress(out: Output, stream: EventStream) -> Iterator[EventSink]:
    """The aggregate's `--events` stream, its events shown as progress lines too."""
    from agentrun.cli.progress import PlainProgress

    with PlainProgress(out) as progress:
        stream.forward = progress
        yield stream


def _rendered(out: Output, aggregated: Aggregated, github_output: bool,
              junit: Path | None) -> int:
    """What the aggregate did, shown (and set as the step's outputs); its exit code."""
    from agentrun import telemetry, workspace
    from agentrun.cli.ci_report import publish_reports
    from agentrun.cli.run_cmd import report_run

    done, plan = aggregated.done, aggregated.plan
    state, code = done.state, done.exit_code
    for problem in telemetry.problems():  # tracing's trouble, said once: the run went on
        out.warn(problem)
    if github_output:
        from agentrun.report.github import write_outputs

        made = workspace.head_commit(aggregated.root)
        write_outputs({"status": str(state.status),
                       **({"commit": made} if made != aggregated.head else {})})
    if out.mode == "json":
        out.json({"ok": code == 0, **state.to_dict(), "wave": done.wave.label,
                  "next_wave": done.next_wave.label if done.next_wave else None,
                  "run_dir": str(done.orchestrator.run_dir),
                  "state_file": str(done.orchestrator.state_file)})
    else:
        report_run(out, state, done.orchestrator)
        if done.next_wave is not None:
            out.stdout.print(f"Wave {done.wave.label} aggregated; next: push this branch, run "
                             f"wave {done.next_wave.label}'s jobs on it, then aggregate their "
                             "results.", markup=False)
    earlier = [g for w in plan.waves[:done.wave.number - 1] for g in w.groups]
    publish_reports(out, state, aggregated.spec, junit, settled=earlier)
    return code
