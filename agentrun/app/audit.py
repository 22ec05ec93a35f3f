"""The `audit` use case: the static checks, then the auditor agent, for one spec or every spec.

`AuditRequest` is what `agentrun audit` is asked to do, with the settings it resolves from the
flags and `.specflow/config.yaml`'s `audit:` section (flag, then `audit:`, then the run's
setting where one applies, then the default). The functions return what was found; the
command shows it (cli/audit_cmd.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agentrun.core.errors import BadInput, SpecError

if TYPE_CHECKING:
    from agentrun.audit.runner import AuditOptions, ModelAccess, SpecAudit
    from agentrun.audit.static import StaticAudit
    from agentrun.config import ProjectConfig
    from agentrun.project import Project
    from agentrun.spec.model import Spec

DEFAULT_MAX_PARALLEL = 4  # specs audited at once when neither flag nor config says


@dataclass(frozen=True)
class AuditRequest:
    """`agentrun audit`'s flags (None: not given)."""

    spec: str | None = None
    static: bool = False
    write: bool = False  # the auditor's proposed task groups into the spec
    dry_run: bool = False
    max_parallel: int | None = None
    group_context_max: float | None = None
    total_context_max: float | None = None
    provider: str | None = None
    model: str | None = None
    script: Path | None = None
    max_steps: int | None = None
    token_budget: int | None = None
    sandbox: str | None = None

    def __post_init__(self) -> None:
        if self.static and self.write:
            raise BadInput("--write needs the auditor's proposals; --static runs no model",
                           hint="drop --static to run the auditor, or drop --write")

    def parallel(self, config: ProjectConfig) -> int:
        """Specs audited at once: the flag, `audit.max_parallel`, `max_parallel`, or 4."""
        return (self.max_parallel or config.audit.max_parallel or config.max_parallel
                or DEFAULT_MAX_PARALLEL)

    def options(self, project: Project) -> tuple[AuditOptions, str]:
        """The audit's options, and its sandbox in words ("on (bubblewrap)", "off (why)")."""
        from agentrun.audit.estimates import thresholds_from
        from agentrun.audit.runner import AuditOptions
        from agentrun.sandbox.choice import resolve

        config = project.config
        limits = {"max_steps": self.max_steps or config.audit.max_steps,
                  "token_budget": self.token_budget or config.audit.token_budget}
        settings, choice = resolve(self.sandbox, False, config.sandbox)
        thresholds = thresholds_from(config.model_dump(exclude_none=True),
                                     self.group_context_max, self.total_context_max)
        return AuditOptions(write_groups=self.write, dry_run=self.dry_run,
                            sandbox=settings.mode, thresholds=thresholds,
                            limits={k: v for k, v in limits.items() if v is not None}), \
            choice.describe()

    def model_access(self, project: Project) -> ModelAccess:
        """Provider and model as `run` resolves them (flags > environment > config > the
        agent definition), resolved only when a spec first needs the model."""
        from agentrun.audit.auditor import AUDITOR
        from agentrun.audit.runner import ModelAccess
        from agentrun.providers.catalog import ProviderConfig

        def resolve() -> ProviderConfig:
            from agentrun.agent.definitions import load_agent
            from agentrun.provider_choice import resolve_provider_config
            from agentrun.providers.errors import NotConfigured

            agent = load_agent(AUDITOR, project.overrides_root)
            try:
                return resolve_provider_config(flag_provider=self.provider,
                                               flag_model=self.model, config=project.config,
                                               agent_model=agent.model, script=self.script)
            except NotConfigured as exc:
                raise NotConfigured(exc.message, f"{exc.hint} The checks that need no model: "
                                                 "`agentrun audit --static`.") from None

        return ModelAccess(resolve)


# --- the auditor -----------------------------------------------------------------------------

@dataclass
class Audited:
    """What the auditor judged: one result a spec, in the order of the specs."""

    results: list[SpecAudit]
    dry_run: bool
    sandbox: str  # the auditor's sandbox, in words
    parallel: int = 1
    trace_id: str | None = None  # the audit's OpenTelemetry trace, when traced


def _traced(ids: list[str], access: ModelAccess, options: AuditOptions,
            audit: Callable[[], list[SpecAudit]]) -> tuple[list[SpecAudit], str | None]:
    """`audit()`'s results, and its trace's id when the environment asks for traces: a span
    per spec, with the auditor's model and tool calls (telemetry/spans.py)."""
    from agentrun import telemetry

    def model() -> tuple[str, str]:
        return str(getattr(access.config(), "provider", "")), access.model

    trace = telemetry.audit_trace(ids, model)
    if trace is None:
        return audit(), None
    options.events = trace.sink
    results: list[SpecAudit] = []
    try:
        results = audit()
        for r in results:
            trace.spec_done(r.spec_id, r.status, r.usage.total, r.error)
    finally:
        trace.close(failed=not results or not all(r.ok for r in results))
    return results, trace.trace_id


def audit_one(request: AuditRequest, note: Callable[[str], None]) -> Audited:
    """Audit the spec `request.spec` (its verdict written into it unless a dry run)."""
    from agentrun.audit.runner import audit_spec
    from agentrun.core.fsutil import relpath
    from agentrun.project import project_for_spec

    project, path = project_for_spec(request.spec)
    options, sandbox = request.options(project)
    if not options.dry_run:  # the verdict is written into the spec: found before the model
        from agentrun.run.session import check_writable

        check_writable([path.resolve().parent])
    note(f"auditing {relpath(path)} (sandbox {sandbox})")
    access = request.model_access(project)
    results, trace_id = _traced([path.stem], access, options,
                                lambda: [audit_spec(path, project, access, options)])
    return Audited(results, options.dry_run, sandbox, trace_id=trace_id)


def audit_all(request: AuditRequest, note: Callable[[str], None]) -> Audited:
    """Audit every spec in .specflow/specs/, several at once; `note` hears of each verdict."""
    from agentrun.audit.runner import audit_specs

    project = specs_project()
    parallel = request.parallel(project.config)
    options, sandbox = request.options(project)
    paths = project.spec_paths()
    if not options.dry_run:
        from agentrun.run.session import check_writable

        check_writable(list({p.resolve().parent for p in paths}))
    note(f"auditing {len(paths)} spec(s), up to {parallel} at once (sandbox {sandbox})")

    def done(result: SpecAudit) -> None:
        why = f" ({result.error})" if result.error else ""
        note(f"{result.spec_id}: {result.status}{why}")

    access = request.model_access(project)
    results, trace_id = _traced([p.stem for p in paths], access, options, lambda: audit_specs(
        paths, project, access, options, max_parallel=parallel, on_result=done))
    return Audited(results, options.dry_run, sandbox, parallel, trace_id)


def specs_project() -> Project:
    """The project of an audit of every spec: it needs its specs folder."""
    from agentrun.core.fsutil import relpath
    from agentrun.project import find_project

    project = find_project()
    if not project.specs_dir.is_dir():
        raise BadInput(f"no SPEC given and no {relpath(project.specs_dir)} directory here",
                       hint="pass a spec path, or run `agentrun init` to create .specflow/")
    return project


# --- the static checks -----------------------------------------------------------------------

# a spec in these statuses has not been judged yet: passing the static checks audits it
UNJUDGED = ("", "draft")


@dataclass
class Checked:
    """One spec's static checks: `result` None when the spec could not be read (`error`)."""

    spec_id: str
    path: Path
    result: StaticAudit | None
    before: str | None = None  # the spec's status before the checks
    status: str | None = None  # and after them
    error: SpecError | None = None


def static_one(spec_arg: str, *, write: bool) -> Checked:
    """The static checks of one spec; a draft that passes them becomes `audited` (`write`)."""
    from agentrun.app.loading import load
    from agentrun.audit.static import static_audit

    project, spec = load(spec_arg, names_paths=False)
    result = static_audit(spec)
    return Checked(spec.id, spec.path, result, spec.status,
                   passed_status(project, spec, result, write))


def static_all(*, write: bool) -> list[Checked]:
    """The static checks of every spec in .specflow/specs/ (an unreadable one is INVALID)."""
    from agentrun.audit.static import static_audit
    from agentrun.spec import load_spec

    project = specs_project()
    checked = []
    for path in project.spec_paths():
        try:
            spec = load_spec(path)
            result = static_audit(spec)
        except SpecError as exc:
            checked.append(Checked(path.stem, path, None, error=exc))
            continue
        checked.append(Checked(spec.id, path, result, spec.status,
                               passed_status(project, spec, result, write)))
    return checked


def passed_status(project: Project, spec: Spec, result: StaticAudit, write: bool) -> str | None:
    """The spec's status after its static checks: a draft that passes them is `audited`
    (written into its frontmatter, and STATE.md's position when it is the active spec), so that
    `run` no longer calls it unaudited. A status a person or the auditor gave stays."""
    from agentrun.report.state_md import StateUpdate, update_state_file
    from agentrun.spec.writeback import replace_if_unchanged, set_frontmatter_value

    status = (spec.status or "").strip().lower()
    if result.verdict != "PASSED" or status not in UNJUDGED:
        return spec.status
    if write:
        replace_if_unchanged(spec.path, spec.text,
                             set_frontmatter_value(spec.text, "status", "audited"), "audit")
        if _is_active(project, spec.id):
            update_state_file(project.state_md, StateUpdate(
                spec.id, status="audited",
                next_step=f"`agentrun plan`, then `agentrun run` ({spec.id})"))
    return "audited"


def _is_active(project: Project, spec_id: str) -> bool:
    from agentrun.project import active_spec_name
    from agentrun.report.state_md import read_state_md

    if not project.state_md.is_file():
        return False
    name = active_spec_name(read_state_md(project.state_md))
    return name is not None and Path(name).name.removesuffix(".md") == spec_id
