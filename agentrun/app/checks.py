"""What a run is asked to do, worked out and checked before anything starts.

`run`, `fix` and `worker` share these: the provider and worker settings from flags and config,
the executor, the review, the worktree set-up and the spending cap, and the refusals of specs
that cannot or should not run. Heavy modules are imported inside the functions, so that
importing this one (from the CLI) stays cheap.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentrun.core.errors import BadInput

if TYPE_CHECKING:
    from agentrun.agent.definitions import AgentDefinition
    from agentrun.app.requests import RunFlags, RunRequest
    from agentrun.plan import Plan
    from agentrun.project import Project
    from agentrun.protocol import SetupSettings
    from agentrun.providers.catalog import Price, ProviderConfig
    from agentrun.providers.errors import NotConfigured
    from agentrun.run.review_step import ReviewSettings
    from agentrun.spec.model import Spec


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


def choose_executor(name: str, provider: str, dry_run: bool) -> str:
    """The executor asked for (a known name: the flag, the config and agent definitions are
    checked as they are read), checked before any worktree exists: a CLI executor needs its
    CLI installed (exit 3) and its own provider's models (exit 2)."""
    clis = {"claude-code": ("anthropic", "claude-*"), "codex": ("openai", "gpt-*")}
    if name in clis:
        needed, models = clis[name]
        if provider != needed:
            raise BadInput(f"the {name} executor calls {needed} models, but the provider is "
                           f"{provider}", hint=f"use --provider {needed} (and a {models} "
                                               "model), or --executor builtin")
        if not dry_run:
            from agentrun.executors import claude_code, codex

            (claude_code if name == "claude-code" else codex).find_cli()
    return name


FINISHED = ("review", "done")  # spec statuses whose work a run has merged already


def refuse_finished(spec: Spec) -> None:
    """Running a finished spec again redoes merged work on top of any later fixes."""
    status = (spec.status or "").lower()
    if status in FINISHED:
        raise BadInput(f"{spec.id} is already {status}: running it again would redo its merged "
                       "work over any changes made since",
                       hint=f"review it with `agentrun review {spec.id}`, or pass --rerun to "
                            "run it again anyway")


def unfinished_review(project: Project, spec: Spec) -> bool:
    """Whether the spec's last run merged all its work but stopped before its review's
    verdict (killed or interrupted during it): `--resume` completes that run."""
    from agentrun.report.execution_state import load_state, state_path
    from agentrun.run.review_step import review_pending

    state = load_state(state_path(project.execution_dir, spec.id))
    return state is not None and review_pending(state)


def review_plan(request: RunRequest) -> str:
    """The pre-run summary's review line."""
    if not request.review:
        return "skipped (--no-review)"
    cycles = request.fix_cycles
    fixes = "fix cycles: asked before starting" if cycles is None else f"fix cycles: {cycles}"
    return f"code-reviewer once the work is merged ({fixes})"


def review_settings(project: Project, request: RunRequest,
                    sandbox_mode: str) -> ReviewSettings:
    """The end-of-run review: the reviewer's model from the same flags as the workers'."""
    from agentrun.app.review import model_access
    from agentrun.run.review_step import ReviewSettings

    flags = request.flags
    return ReviewSettings(
        access=model_access(project, flags.provider, flags.model, flags.script),
        fix_cycles=request.fix_cycles or 0, sandbox=sandbox_mode,
        pricing=project.config.price_overrides())


def capped_price(cap: float | None, model: str, pricing: Mapping[str, Any]) -> Price | None:
    """The model's price when there is a spending cap to hold it to (BadInput when the cap is
    not a positive amount or the price is unknown: the cap could never be reached)."""
    from agentrun.providers.pricing import price_for

    if cap is None:
        return None
    if cap <= 0:
        raise BadInput(f"invalid --max-cost {cap:g}", hint="give a positive USD amount")
    price = price_for(model, pricing)
    if price is None:
        raise BadInput(f"--max-cost needs the price of {model}, which is not known",
                       hint=f"add `pricing: {{{model}: {{input: ..., output: ...}}}}` to "
                            ".specflow/config.yaml (USD per million tokens)")
    return price


def spending_line(cap: float, plan: Plan, model: str, token_budget: int,
                  pricing: Mapping[str, Any]) -> str:
    """The cap beside the estimate: every worker spending its whole token budget (as input,
    the cheaper side) is what a run can be expected to cost at most."""
    price = capped_price(cap, model, pricing)
    assert price is not None  # a cap was given
    workers = sum(len(w.batches) for w in plan.waves)
    estimate = workers * token_budget * price.input / 1_000_000
    return (f"Spending cap: ${cap:g} for the whole run · estimate ${estimate:.2f} "
            f"({workers} worker(s) × {token_budget:,} tokens at ${price.input:g}/M input)")


def worktree_setup(project: Project, request: RunRequest) -> SetupSettings | None:
    """What makes each new worktree ready (`request.setup_command`, the config's copies),
    checked before anything starts; None when there is nothing to do."""
    from agentrun.protocol import SetupSettings
    from agentrun.workspace import repo_root
    from agentrun.worktree_setup import check_copies

    config = project.config
    command = request.setup_command
    root = repo_root(project.root)
    copies = check_copies(root, config.worktree_copy)
    if not command and not copies:
        return None
    return SetupSettings(command=command, copies=copies, source=str(root),
                         network=config.sandbox.setup_network,
                         timeout_s=request.worker_timeout_s)


def worker_agent(project: Project, plan: Plan) -> AgentDefinition:
    """The agent definition the run's workers use (the packaged one, or the override in the
    commit the run starts from: never the working tree's)."""
    from agentrun.agent.definitions import load_agent

    return load_agent("spec-executor" if plan.mode == "single" else "spec-executor-worker",
                      project.overrides_root)


def provider_config(project: Project, plan: Plan, flags: RunFlags) -> ProviderConfig:
    """The workers' provider and model, with where they came from (`provider_choice.py`
    decides)."""
    from agentrun.provider_choice import resolve_provider_config

    agent = worker_agent(project, plan)
    return resolve_provider_config(flag_provider=flags.provider, flag_model=flags.model,
                                   config=project.config, agent_model=agent.model,
                                   script=flags.script)


def run_provider_config(project: Project, plan: Plan, flags: RunFlags
                        ) -> tuple[ProviderConfig, NotConfigured | None]:
    """The run's provider settings, and why there are none: a dry run shows the plan and its
    estimate without a model key (priced as the default model), a real run stops here."""
    from agentrun.provider_choice import DEFAULT_MODELS
    from agentrun.providers.catalog import ProviderConfig
    from agentrun.providers.errors import NotConfigured

    try:
        return provider_config(project, plan, flags), None
    except NotConfigured as exc:
        if not flags.dry_run:
            raise
        provider = next(iter(DEFAULT_MODELS))
        return ProviderConfig(provider=provider, model=DEFAULT_MODELS[provider],
                              base_url=None, request_retries=project.config.request_retries,
                              timeout_s=project.config.timeout_s, source="none"), exc
