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
from agentrun.core.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, BadInput, CannotStart
from agentrun.core.fsutil import relpath


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
    if mode not in (None, "single", "orchestrated"):
        raise BadInput(f"invalid --mode {mode!r}", hint="use single or orchestrated")
    opts = {"mode": mode, "max_workers": max_workers, "provider": provider, "model": model,
            "script": script, "max_steps": max_steps, "token_budget": token_budget,
            "worker_timeout": worker_timeout, "max_retries": retries,
            "validation_command": validation_command, "sandbox": sandbox,
            "allow_network": allow_network}
    raise typer.Exit(_ci(spec, groups, base, start, out_path, opts, out,  # type: ignore[arg-type]
                         cancel))



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


def _ci(spec_arg: str, groups: str, base_arg: str | None, start_arg: str | None,
        out_path: Path, opts: dict[str, Any], out, cancel) -> int:
    from agentrun import workspace
    from agentrun.cli.common import load
    from agentrun.core.fsutil import atomic_write_json, check_file_or_absent
    from agentrun.core.results import WorkerResult
    from agentrun.core.status import Status
    from agentrun.plan import build_plan
    from agentrun.run.ci import (
        ci_branch,
        describe_batches,
        find_batch,
        pinned_project,
        previous_waves_problem,
        read_state_at,
    )
    from agentrun.sandbox.choice import resolve

    check_file_or_absent(out_path, "the result",  # before the work, not after it
                         hint="pass a file path to --out, outside the checkout")
    project, spec = load(spec_arg)
    root = workspace.repo_root(project.root)
    base = workspace.resolve_ref(root, base_arg or "HEAD")
    if base is None:
        raise BadInput(f"--base {base_arg or 'HEAD'} is not a commit in {root}",
                       hint="pass a branch, tag or commit that exists in this checkout")
    plan = build_plan(spec, mode=opts["mode"], max_workers=opts["max_workers"])
    match = find_batch(plan, groups)
    if match is None:
        raise BadInput(f"{groups} is not a worker batch of {spec.id}'s plan "
                       f"({describe_batches(plan)})",
                       hint="pass one matrix entry's `groups` from `agentrun plan SPEC --matrix` "
                            "(with the same --mode/--max-workers)")
    wave, batch = match
    ids = batch.ids
    state_rel = relpath(project.execution_dir / f"{spec.id}-state.json", root)
    state = read_state_at(root, base, state_rel)
    # the run's settings, never those of what its earlier waves merged
    project = pinned_project(project, root, start_arg, base, f"--base {base[:12]}",
                             state if wave.number > 1 else None)
    for note in project.config.deprecations:
        out.warn(note)
    sandbox, choice = resolve(opts["sandbox"], opts["allow_network"], project.config.sandbox)
    opts = {**opts, "sandbox_settings": sandbox}
    dirty = workspace.dirty_paths(root)
    if dirty:
        raise CannotStart(f"uncommitted changes in the checkout: {', '.join(dirty[:5])}",
                          hint="a CI worker commits everything in the checkout: run it in a "
                               "clean clone, and write --out outside it")
    spec_rel = relpath(spec.path, root)
    problem = previous_waves_problem(root, plan, state, wave, base, f"--base {base[:12]}")
    if problem:
        raise CannotStart(problem, hint="run this job on the commit the previous wave's "
                                        "`agentrun aggregate` pushed (check out the branch tip, "
                                        "not the workflow's triggering commit)")
    blocked = None
    if state is not None and wave.number > 1:
        if state.status != "running":
            own = state.groups.get(ids[0])
            blocked = (own.error if own and own.status == "blocked" and own.error
                       else f"run {state.run_id} already ended ({state.status})")
        else:
            deps = {d for gid in ids for d in (spec.group(gid).dependencies
                                               if spec.group(gid) else [])}
            failed = sorted(d for d in deps if d in state.groups
                            and Status(state.groups[d].status).blocks_dependents)
            if failed:
                blocked = f"dependency {', '.join(failed)} did not complete"
    branch = ci_branch(spec.id, batch.id)
    _switch(root, branch, base)
    extras: dict[str, Any] = {"spec": spec.id, "wave": wave.number, "base_commit": base,
                              "provider": None, "model": None, "sandbox": choice.describe()}
    if blocked:
        result = WorkerResult(group=ids[0], groups=ids, status="blocked", error=blocked,
                              batch=batch.id, branch=branch, worktree=str(root))
        out.progress(f"{', '.join(ids)}: blocked — {blocked}")
    else:
        result = _run(project, spec, plan, batch.id, ids, root, branch, base, spec_rel,
                      state.run_id if state and wave.number > 1 else "ci", out_path, opts,
                      extras, cancel)
    atomic_write_json(out_path, {**result.model_dump(), **extras})
    _print(out, {**result.model_dump(), **extras}, str(out_path))
    return _code(result.status, result.stop_reason)


def _run(project, spec, plan, batch_id, ids, root, branch, base, spec_rel, run_id, out_path,
         opts, extras, cancel):
    from agentrun import workspace
    from agentrun.cli.run_settings import provider_config, worker_settings
    from agentrun.run.assignment import make_assignment
    from agentrun.run.options import RunOptions
    from agentrun.worker import run_assignment

    config = project.config
    cfg = provider_config(project, plan, opts)
    settings, limits = worker_settings(config, cfg, opts)
    options = RunOptions(provider=settings, limits=limits,
                         validation_command=opts["validation_command"]
                         or config.validation_command,
                         pricing=config.price_overrides(), sandbox=opts["sandbox_settings"])
    extras.update(provider=cfg.provider, model=cfg.model)
    git_dir = Path(workspace.git("rev-parse", "--absolute-git-dir", cwd=root))
    record_dir = git_dir / "agentrun" / branch.removeprefix("agentrun/")
    record_dir.mkdir(parents=True, exist_ok=True)
    for name in ("transcript.jsonl", "progress.ndjson"):
        (record_dir / name).unlink(missing_ok=True)
    assignment = make_assignment(project, spec, plan, options, run_id=run_id,
                                 spec_path=spec_rel, batch_id=batch_id, groups=ids,
                                 worktree=root, branch=branch, base=base,
                                 result_path=Path(out_path).absolute(), record_dir=record_dir)
    if config.setup_command:  # the job's checkout is this worker's worktree: make it ready
        from agentrun.protocol import SetupSettings

        assignment.setup = SetupSettings(command=config.setup_command, source=str(root),
                                         network=config.sandbox.setup_network,
                                         timeout_s=limits.timeout_s)
    return run_assignment(assignment, cancel)


def _as_config(settings):
    """An assignment's sandbox settings as the config section `resolve` reads."""
    from agentrun.config import SandboxConfig

    return SandboxConfig(mode=settings.mode, network=settings.network,
                         home_allow=list(settings.home_allow), limits=settings.limits)


def _switch(root: Path, branch: str, base: str) -> None:
    """Check out `branch` at `base`: created here, or reused when it already points there."""
    from agentrun import workspace

    existing = workspace.resolve_ref(root, f"refs/heads/{branch}")
    if existing is None:
        workspace.git("switch", "--quiet", "-c", branch, base, cwd=root)
    elif existing == base:
        workspace.git("switch", "--quiet", branch, cwd=root)
    else:
        raise CannotStart(f"branch {branch} already exists at {existing[:12]}, not at the base "
                          f"{base[:12]}",
                          hint=f"run in a fresh clone, or delete it: `git branch -D {branch}`")


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
