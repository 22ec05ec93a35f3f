"""`agentrun worker`: run one batch of task groups.

Two forms. `--assignment FILE` is the process the local orchestrator starts. `--spec SPEC
--groups G2,G3 --out FILE` is a CI matrix job: it runs the batch in the current checkout on the
branch `agentrun/<spec>/<batch>` with the same worker code, and leaves pushing the branch to
the job.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentrun.cli.common import JSON_OPT, output
from agentrun.cli.run_cmd import (
    SANDBOX_HELP,
    AllowNetwork,
    MaxSteps,
    Model,
    OldRetries,
    ProviderOpt,
    Script,
    TokenBudget,
    Validate,
)
from agentrun.core.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, BadInput

if TYPE_CHECKING:
    import threading

    from agentrun.cli.output import Output
    from agentrun.config import SandboxConfig
    from agentrun.protocol import SandboxSettings

WORKER_HELP = """Execute one worker batch and write its result JSON.

Local form (started by `agentrun run`): --assignment FILE.

CI form (one entry of `agentrun plan SPEC --matrix`): --spec SPEC --groups G2,G3
[--base REF] [--start-commit SHA] --out result.json. Runs the batch in this checkout on
the branch agentrun/<spec>/<batch>, created from --base (default HEAD), commits there and
writes the result (with its branch and base commit) to --out. agentrun does not push: the
job hands the branch to `agentrun aggregate` (a push, or a `git bundle`). Write --out
outside the checkout. Jobs of wave 2 and later run on the commit the previous wave's
`agentrun aggregate` made; a batch whose dependencies failed writes a `blocked` result
without calling the model. Under a spending cap (--max-cost, config max_cost_usd) a job
may spend an equal share, with the wave's other jobs, of what the earlier waves left: its
worker stops at that share (`cost_cap`), and a job with nothing left writes a `blocked`
result. The settings (config, agents, prompts) are the run's: those of
--start-commit, else those its execution state recorded when it started, whatever earlier
waves merged since.

Exit codes: 0 complete · 1 failed, partial or blocked · 2 bad input (unknown groups, bad
--base or --start-commit) · 3 could not start (dirty checkout, previous wave not
aggregated, a run that started elsewhere than --start-commit, branch exists, no model,
--sandbox on without bubblewrap) · 130 interrupted.
"""

CIOpt = typer.Option
AssignmentOpt = Annotated[Path | None, CIOpt("--assignment", help=(
    "Assignment JSON to execute (local form)."))]
SpecOpt = Annotated[str | None, CIOpt("--spec", help="CI form: the spec file or id.")]
Groups = Annotated[str | None, CIOpt("--groups", help=(
    "CI form: the batch's groups (`G2,G3`) or batch id, as in the matrix entry's `groups`."))]
Base = Annotated[str | None, CIOpt("--base",
                                   help="CI form: commit to branch from (default HEAD).")]
Start = Annotated[str | None, CIOpt("--start-commit", metavar="COMMIT", help=(
    "CI form: the run's start commit (where its plan was made); its .specflow/config.yaml "
    "applies, not the checkout's."))]
OutPath = Annotated[Path | None, CIOpt("--out", help="CI form: where to write the result JSON.")]
PlanModeOpt = Annotated[str | None, CIOpt("--mode", help="CI form: as given to `plan`.")]
MaxWorkers = Annotated[int | None, CIOpt("--max-workers", min=1,
                                         help="CI form: as given to `plan`.")]
AgentTimeout = Annotated[float | None, CIOpt("--worker-timeout", min=1,
                                             help="Seconds the agent may take.")]
WorkerRetries = Annotated[int | None, CIOpt("--retries", min=0, metavar="N",
                                            help="Fresh attempts after a failed one.")]
SandboxModeOpt = Annotated[str | None, CIOpt("--sandbox", metavar="auto|on|off",
                                          help=SANDBOX_HELP)]
JobMaxCost = Annotated[float | None, CIOpt("--max-cost", metavar="USD", help=(
    "CI form: the whole run's spending cap (config: max_cost_usd); this job may spend an "
    "equal share, with the wave's other jobs, of what the earlier waves left. Give every job "
    "and aggregate the same."))]


def worker(assignment: AssignmentOpt = None, spec: SpecOpt = None, groups: Groups = None,
           base: Base = None, start: Start = None, out_path: OutPath = None,
           mode: PlanModeOpt = None, max_workers: MaxWorkers = None, provider: ProviderOpt = None,
           model: Model = None, script: Script = None, max_steps: MaxSteps = None,
           token_budget: TokenBudget = None, worker_timeout: AgentTimeout = None,
           retries: WorkerRetries = None, old_retries: OldRetries = None,
           validation_command: Validate = None, sandbox: SandboxModeOpt = None,
           allow_network: AllowNetwork = False, max_cost: JobMaxCost = None,
           json_out: bool = JSON_OPT) -> None:
    """`agentrun worker` (its help is WORKER_HELP): one of its two forms, its exit code."""
    import signal
    import threading

    from agentrun.app.ci import worker_batch
    from agentrun.app.requests import RunFlags, check_flags

    out = output(json_out)
    if old_retries is not None:
        out.warn("--max-retries is deprecated; use --retries")
        retries = old_retries if retries is None else retries
    _one_form(assignment, {"--spec": spec, "--groups": groups, "--out": out_path})
    cancel = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: cancel.set())
    if assignment is not None:
        raise typer.Exit(_local(assignment, out, cancel, sandbox, allow_network))
    flags = RunFlags(mode=mode, provider=provider, model=model, script=script,
                     max_steps=max_steps, token_budget=token_budget,
                     worker_timeout=worker_timeout, retries=retries,
                     validation_command=validation_command, sandbox=sandbox,
                     allow_network=allow_network, max_cost=max_cost)
    check_flags(flags)
    # _one_form refused a CI form with any of these missing
    assert spec is not None and groups is not None and out_path is not None
    done = worker_batch(spec, groups, base, start, out_path, flags,
                        max_workers=max_workers, warn=out.warn, note=out.progress,
                        cancel=cancel)
    _print(out, {**done.result.model_dump(), **done.extras}, str(out_path))
    raise typer.Exit(_code(done.result.status, done.result.stop_reason))


def _one_form(assignment: Path | None, ci: dict[str, object]) -> None:
    """--assignment alone, or every option of the CI form."""
    given = [name for name, value in ci.items() if value is not None]
    if assignment is not None and given:
        raise BadInput(f"--assignment cannot be combined with {', '.join(given)}",
                       hint="use either --assignment FILE or --spec SPEC --groups G1 --out FILE")
    missing = [name for name, value in ci.items() if value is None]
    if assignment is None and missing:
        raise BadInput(f"missing {', '.join(missing)}",
                       hint="run a CI batch with --spec SPEC --groups G1,G2 --out result.json, "
                            "or an assignment with --assignment FILE")


def _local(assignment: Path, out: Output, cancel: threading.Event, sandbox: str | None,
           allow_network: bool) -> int:
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


def _as_config(settings: SandboxSettings) -> SandboxConfig:
    """An assignment's sandbox settings as the config section `resolve` reads."""
    from agentrun.config import SandboxConfig

    return SandboxConfig(mode=settings.mode, network=settings.network,
                         home_allow=list(settings.home_allow), limits=settings.limits)


def _print(out: Output, doc: dict[str, Any], where: str) -> None:
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


def _code(status: str, stop_reason: str | None) -> int:
    if stop_reason == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_OK if status == "complete" else EXIT_FAILED
