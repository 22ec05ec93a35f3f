"""`agentrun worker`: run one batch of task groups.

Two forms. `--assignment FILE` is the process the local orchestrator starts. `--spec SPEC
--groups G2,G3 --out FILE` is a CI matrix job: it runs the batch in the current checkout on the
branch `agentrun/<spec>/<batch>` with the same worker code, and leaves pushing the branch to
the job.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from agentrun.cli.common import JSON_OPT, output
from agentrun.cli.run_cmd import NETWORK_HELP, SANDBOX_HELP
from agentrun.core.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, BadInput


def worker(
    assignment: Path | None = typer.Option(None, "--assignment",
                                           help="Assignment JSON to execute (local form)."),
    spec: str | None = typer.Option(None, "--spec", help="CI form: the spec file or id."),
    groups: str | None = typer.Option(
        None, "--groups", help="CI form: the batch's groups (`G2,G3`) or batch id, as in the "
                               "matrix entry's `groups`."),
    base: str | None = typer.Option(None, "--base",
                                    help="CI form: commit to branch from (default HEAD)."),
    start: str | None = typer.Option(
        None, "--start-commit", metavar="COMMIT",
        help="CI form: the run's start commit (where its plan was made); its "
             ".specflow/config.yaml applies, not the checkout's."),
    out_path: Path | None = typer.Option(None, "--out", help="CI form: where to write the "
                                                             "result JSON."),
    mode: str | None = typer.Option(None, "--mode", help="CI form: as given to `plan`."),
    max_workers: int | None = typer.Option(None, "--max-workers", min=1,
                                           help="CI form: as given to `plan`."),
    provider: str | None = typer.Option(None, "--provider",
                                        help="anthropic, openai or scripted."),
    model: str | None = typer.Option(None, "--model", help="Model name."),
    script: Path | None = typer.Option(None, "--script",
                                       help="Script file for the scripted provider."),
    max_steps: int | None = typer.Option(None, "--max-steps", min=1),
    token_budget: int | None = typer.Option(None, "--token-budget", min=1000),
    worker_timeout: float | None = typer.Option(None, "--worker-timeout", min=1,
                                                help="Seconds the agent may take."),
    retries: int | None = typer.Option(None, "--retries", min=0, metavar="N",
                                       help="Fresh attempts after a failed one."),
    old_retries: int | None = typer.Option(None, "--max-retries", min=0, hidden=True,
                                           help="Deprecated spelling of --retries."),
    validation_command: str | None = typer.Option(
        None, "--validate", help="Command that must pass before work counts as done."),
    sandbox: str | None = typer.Option(None, "--sandbox", metavar="auto|on|off",
                                       help=SANDBOX_HELP),
    allow_network: bool = typer.Option(False, "--allow-network", help=NETWORK_HELP),
    json_out: bool = JSON_OPT,
) -> None:
    """Execute one worker batch and write its result JSON.

    Local form (started by `agentrun run`): --assignment FILE.

    CI form (one entry of `agentrun plan SPEC --matrix`): --spec SPEC --groups G2,G3
    [--base REF] [--start-commit SHA] --out result.json. Runs the batch in this checkout on
    the branch agentrun/<spec>/<batch>, created from --base (default HEAD), commits there and
    writes the result (with its branch and base commit) to --out. agentrun does not push: the
    job hands the branch to `agentrun aggregate` (a push, or a `git bundle`). Write --out
    outside the checkout. Jobs of wave 2 and later run on the commit the previous wave's
    `agentrun aggregate` made; a batch whose dependencies failed writes a `blocked` result
    without calling the model. The settings (config, agents, prompts) are the run's: those of
    --start-commit, else those its execution state recorded when it started, whatever earlier
    waves merged since.

    Exit codes: 0 complete · 1 failed, partial or blocked · 2 bad input (unknown groups, bad
    --base or --start-commit) · 3 could not start (dirty checkout, previous wave not
    aggregated, a run that started elsewhere than --start-commit, branch exists, no model,
    --sandbox on without bubblewrap) · 130 interrupted.
    """
    import signal
    import threading

    from agentrun.app.ci import worker_batch
    from agentrun.app.requests import RunFlags, check_flags

    out = output(json_out)
    if old_retries is not None:
        out.warn("--max-retries is deprecated; use --retries")
        retries = old_retries if retries is None else retries
    ci_given = [n for n, v in (("--spec", spec), ("--groups", groups), ("--out", out_path))
                if v is not None]
    if assignment is not None and ci_given:
        raise BadInput(f"--assignment cannot be combined with {', '.join(ci_given)}",
                       hint="use either --assignment FILE or --spec SPEC --groups G1 --out FILE")
    cancel = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: cancel.set())
    if assignment is not None:
        raise typer.Exit(_local(assignment, out, cancel, sandbox, allow_network))
    missing = [n for n, v in (("--spec", spec), ("--groups", groups), ("--out", out_path))
               if v is None]
    if missing:
        raise BadInput(f"missing {', '.join(missing)}",
                       hint="run a CI batch with --spec SPEC --groups G1,G2 --out result.json, "
                            "or an assignment with --assignment FILE")
    flags = RunFlags(mode=mode, provider=provider, model=model, script=script,
                     max_steps=max_steps, token_budget=token_budget,
                     worker_timeout=worker_timeout, retries=retries,
                     validation_command=validation_command, sandbox=sandbox,
                     allow_network=allow_network)
    check_flags(flags)
    done = worker_batch(spec, groups, base, start, out_path, flags,  # type: ignore[arg-type]
                        max_workers=max_workers, warn=out.warn, note=out.progress,
                        cancel=cancel)
    doc = {**done.result.model_dump(), **done.extras}
    _print(out, doc, str(out_path))
    raise typer.Exit(_code(done.result.status, done.result.stop_reason))


def _local(assignment: Path, out, cancel, sandbox: str | None, allow_network: bool) -> int:
    from agentrun.protocol import Assignment
    from agentrun.sandbox.choice import resolve
    from agentrun.worker import run_assignment

    parsed = Assignment.read(assignment)
    # the flags win over what the assignment says; `on` without bubblewrap stops here (exit 3)
    settings, choice = resolve(sandbox, allow_network, _as_config(parsed.sandbox))
    parsed = parsed.model_copy(update={"sandbox": settings})
    result = run_assignment(parsed, cancel)
    _print(out, {**result.model_dump(), "sandbox": choice.describe()}, parsed.result_path)
    return _code(result.status, result.stop_reason)


def _as_config(settings):
    """An assignment's sandbox settings as the config section `resolve` reads."""
    from agentrun.config import SandboxConfig

    return SandboxConfig(mode=settings.mode, network=settings.network,
                         home_allow=list(settings.home_allow), limits=settings.limits)


def _print(out, doc: dict[str, Any], where: str) -> None:
    if out.mode == "json":
        out.json(doc)
        return
    from agentrun.core.status import Status

    # a blocked batch never started its agent: there is no reason it stopped
    stop = "" if doc["status"] == Status.BLOCKED else f", stop: {doc['stop_reason']}"
    out.stdout.print(f"{', '.join(doc['groups'])}: {doc['status']} "
                     f"({len(doc['commits'])} commit(s){stop})", markup=False)
    if doc.get("error"):
        out.stdout.print(f"error: {doc['error']}", markup=False)
    if doc.get("base_commit") and doc.get("branch"):
        out.stdout.print(f"branch: {doc['branch']} (push or bundle it for `agentrun "
                         "aggregate`)", markup=False)
    out.stdout.print(f"result: {where}", markup=False)


def _code(status: str, stop_reason: str) -> int:
    if stop_reason == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_OK if status == "complete" else EXIT_FAILED
