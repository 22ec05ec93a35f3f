"""The model-based audit of one spec, and of many in parallel.

Order of work, cheapest first: parse; static checks (critical findings stop there, no model);
measure the context estimates; ask the auditor agent (fresh context, read-only tools) for a
JSON verdict, re-asking once if the verdict is malformed; apply the measurement (a spec over its
limits needs decomposition whatever the model says); check and render proposed task groups;
then append the `### Audit vN` entry and set the frontmatter status in one atomic write.

`audit_spec` and `audit_specs` return `SpecAudit` results and print nothing: the CLI renders
them as text or JSON, and a CI report (JUnit) can be built from the same list.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from agentrun.audit.auditor import AuditorFailed, ask_auditor, finding_text
from agentrun.audit.estimates import ContextEstimate, Thresholds, estimate_context
from agentrun.audit.history import EntryData, render_entry
from agentrun.audit.static import StaticAudit, static_audit
from agentrun.audit.taskgen import check_proposal, generate_tasks, proposal_groups
from agentrun.audit.verdict import AuditVerdict
from agentrun.core.errors import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    AgentrunError,
    Interrupted,
    PlanError,
    SpecError,
)
from agentrun.core.events import EventSink
from agentrun.core.usage import Usage
from agentrun.plan import build_plan
from agentrun.project import Project
from agentrun.provider_choice import create_provider
from agentrun.providers.base import Provider
from agentrun.providers.errors import NotConfigured
from agentrun.spec import load_spec, parse_spec
from agentrun.spec.model import Spec
from agentrun.spec.writeback import (
    append_to_section,
    next_audit_version,
    replace_if_unchanged,
    set_frontmatter_value,
)

APPROVED = "APPROVED"
NEEDS_REVISION = "NEEDS_REVISION"
NEEDS_DECOMPOSITION = "NEEDS_DECOMPOSITION"
INVALID = "INVALID"  # the spec could not be read or parsed
ERROR = "ERROR"  # the auditor gave no usable verdict
MEASURED = "**Context estimate**: "  # marks the critical issues the measurement adds


@dataclass(frozen=True)
class _FixedModel:
    model: str


class ModelAccess:
    """How audits reach the model. The provider settings are resolved on first use (a spec
    that fails its static checks needs no model), once, under a lock; each spec audit gets a
    provider of its own, so parallel audits share no client state."""

    def __init__(self, resolve: Callable[[], Any],
                 make: Callable[[Any], Provider] | None = None) -> None:
        self._resolve = resolve
        self._make = make
        self._cfg: Any = None
        self._lock = threading.Lock()

    @classmethod
    def fixed(cls, provider: Provider, model: str | None = None) -> ModelAccess:
        """Every audit uses `provider` (tests: one scripted provider, its cursors shared)."""
        fixed = _FixedModel(model or str(getattr(provider, "model", "unknown")))
        return cls(lambda: fixed, lambda _cfg: provider)

    def config(self) -> Any:
        with self._lock:
            if self._cfg is None:
                self._cfg = self._resolve()
            return self._cfg

    @property
    def model(self) -> str:
        return str(self.config().model)

    def provider(self) -> Provider:
        cfg = self.config()
        if self._make is None:
            return create_provider(cfg)
        return self._make(cfg)


@dataclass
class AuditOptions:
    write_groups: bool = False  # --write/--fix: put proposed groups into the spec
    dry_run: bool = False  # write nothing at all
    thresholds: Thresholds = field(default_factory=Thresholds)
    limits: dict[str, Any] = field(default_factory=dict)  # max_steps, token_budget overrides
    now: Callable[[], datetime] = datetime.now
    cancel: threading.Event = field(default_factory=threading.Event)
    sandbox: str = "auto"  # the auditor's read-only sandbox: auto | on | off
    events: Callable[[str], EventSink | None] = lambda _spec: None  # a spec's auditor's events


@dataclass
class TasksResult:
    """What happened to the auditor's proposed task groups."""

    proposed: list[str]
    generated: bool = False  # a checked Implementation Tasks section is in the new text
    rejected: str | None = None  # why not (cycle, unknown group, did not read back)
    section: str | None = None
    plan: dict[str, Any] | None = None  # the re-parsed spec's plan

    def note(self, write_groups: bool, dry_run: bool) -> str:
        ids = ", ".join(self.proposed)
        if self.rejected:
            return f"{len(self.proposed)} proposed ({ids}); rejected, not written: " \
                   f"{self.rejected}"
        if self.generated:
            where = "would be written" if dry_run else "written"
            return f"{len(self.proposed)} proposed ({ids}); {where} to `## Implementation " \
                   "Tasks` with computed waves; audit again to approve them"
        if not write_groups:
            return f"{len(self.proposed)} proposed ({ids}); not written (run `agentrun audit " \
                   "--write` to add them)"
        return f"{len(self.proposed)} proposed ({ids})"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class SpecAudit:
    """The result of auditing one spec: what the history entry, the table and JSON show."""

    spec_id: str
    path: str
    status: str  # APPROVED | NEEDS_REVISION | NEEDS_DECOMPOSITION | INVALID | ERROR
    source: str = "auditor"  # "static": stopped by critical static findings; "load"
    critical: list[str] = field(default_factory=list)
    recommendations: list[str] = field(default_factory=list)
    dimensions: dict[str, str] = field(default_factory=dict)
    comment: str = ""
    static: StaticAudit | None = None
    estimate: ContextEstimate | None = None
    proposed_estimate: ContextEstimate | None = None
    tasks: TasksResult | None = None
    version: int | None = None  # N of the `### Audit vN` entry
    entry: str | None = None
    frontmatter_status: str | None = None
    written: bool = False
    error: str | None = None
    hint: str | None = None
    usage: Usage = field(default_factory=Usage)
    steps: int = 0
    asks: int = 0  # auditor runs: 2 when the verdict had to be re-asked

    @property
    def ok(self) -> bool:
        return self.status == APPROVED

    @property
    def exit_code(self) -> int:
        if self.status == INVALID:
            return EXIT_BAD_INPUT
        return EXIT_OK if self.ok else EXIT_FAILED

    def findings(self) -> list[dict[str, Any]]:
        """Static findings plus the auditor's, in the static audit's shape, so that reports
        (JUnit, annotations) read one list: critical issues are critical, recommendations
        warnings, and a verdict other than APPROVED always has a critical finding."""
        out = [dataclasses.asdict(f) for f in self.static.findings] if self.static else []
        if self.source == "auditor" and self.status != ERROR:
            for text in self.critical:
                measured = text.startswith(MEASURED)
                out.append(_finding("critical", "context-estimate" if measured
                                    else "auditor-critical", text.removeprefix(MEASURED)))
            out += [_finding("warning", "auditor-recommendation", r)
                    for r in self.recommendations]
            if not self.ok and not any(f["severity"] == "critical" for f in out):
                out.append(_finding("critical", "auditor-verdict",
                                    f"{self.status}: {self.comment or 'see the audit entry'}"))
        return out

    def to_dict(self) -> dict[str, Any]:
        findings = self.findings()
        return {
            "spec": self.spec_id, "path": self.path, "status": self.status,
            "verdict": self.status, "source": self.source, "critical_issues": self.critical,
            "recommendations": self.recommendations, "dimensions": self.dimensions,
            "comment": self.comment, "findings": findings,
            "counts": {s: sum(1 for f in findings if f["severity"] == s)
                       for s in ("critical", "warning", "info")},
            "plan": self.static.plan.to_dict() if self.static and self.static.plan else None,
            "context_estimate": self.estimate.to_dict() if self.estimate else None,
            "proposed_estimate": self.proposed_estimate.to_dict()
            if self.proposed_estimate else None,
            "task_groups": self.tasks.to_dict() if self.tasks else None,
            "audit_version": self.version, "history_entry": self.entry,
            "frontmatter_status": self.frontmatter_status, "written": self.written,
            "error": self.error, "hint": self.hint, "usage": self.usage.to_dict(),
            "steps": self.steps, "asks": self.asks,
        }


def _finding(severity: str, code: str, message: str) -> dict[str, Any]:
    return {"severity": severity, "code": code, "message": message, "line": None,
            "group": None}


# -- one spec -------------------------------------------------------------------------------

def audit_spec(path: Path | str, project: Project, access: ModelAccess,
               options: AuditOptions | None = None) -> SpecAudit:
    """Audit one spec. Raises SpecError for a spec that cannot be read or parsed and
    NotConfigured when a model is needed and none is configured; an auditor that gives no
    usable verdict is an ERROR result, with the reason."""
    options = options or AuditOptions()
    spec = load_spec(path)
    static = static_audit(spec)
    result = SpecAudit(spec.id, str(spec.path), NEEDS_REVISION, static=static)
    warnings = [finding_text(f) for f in static.findings if f.severity == "warning"]
    if static.critical:
        result.source = "static"
        result.critical = [finding_text(f) for f in static.critical]
        return _record(result, spec, spec.text, options, warnings)
    model = access.model
    project_md = project.project_text()
    estimate = estimate_context(
        spec, spec.groups, root=project.root, project_md=project_md, model=model,
        thresholds=options.thresholds, source="spec" if spec.groups else "none",
        single_context=static.plan is None or static.plan.mode == "single")
    result.estimate = estimate
    try:
        answer = ask_auditor(spec, project, access.provider(), static, estimate,
                             limits=options.limits, cancel=options.cancel,
                             sandbox=options.sandbox, on_event=options.events(spec.id))
    except AuditorFailed as exc:
        result.status, result.error, result.hint = ERROR, exc.message, exc.hint
        return result
    verdict = answer.verdict
    result.usage, result.steps, result.asks = answer.usage, answer.steps, answer.asks
    result.status = verdict.status
    result.critical = list(verdict.critical_issues)
    result.recommendations = list(verdict.recommendations)
    result.dimensions = dict(verdict.dimensions)
    result.comment = verdict.comment
    if estimate.problems:  # measured, not guessed: the limits hold whatever the model says
        result.critical += [MEASURED + p for p in estimate.problems]
        if result.status == APPROVED:
            result.status = NEEDS_DECOMPOSITION
    text = spec.text
    if verdict.task_groups:
        text = _proposed_groups(result, spec, project.root, project_md, verdict, model,
                                options)
    return _record(result, spec, text, options, warnings)


def _proposed_groups(result: SpecAudit, spec: Spec, root: Path, project_md: str,
                     verdict: AuditVerdict, model: str, options: AuditOptions) -> str:
    """Measure and, with --write, render the proposed groups; returns the spec text to write."""
    groups = proposal_groups(verdict.task_groups)
    tasks = result.tasks = TasksResult([g.id for g in groups])
    try:
        check_proposal(groups)
    except PlanError as exc:
        tasks.rejected = exc.message
        return spec.text
    candidate = dataclasses.replace(spec, groups=groups, declared_waves={})
    result.proposed_estimate = estimate_context(
        candidate, groups, root=root, project_md=project_md, model=model,
        thresholds=options.thresholds, source="proposed",
        single_context=build_plan(candidate).mode == "single")
    if not options.write_groups:
        return spec.text
    units = {u.id: u for u in result.proposed_estimate.groups}
    try:
        generated = generate_tasks(spec.text, spec.path, verdict.task_groups, units)
    except PlanError as exc:
        tasks.rejected = exc.message
        return spec.text
    tasks.generated, tasks.section = True, generated.section
    tasks.plan = generated.plan.to_dict()
    return generated.text


def _record(result: SpecAudit, spec: Spec, text: str, options: AuditOptions,
            warnings: list[str]) -> SpecAudit:
    """Append the history entry and set the status; write unless this is a dry run."""

    result.version = next_audit_version(text)
    result.entry = render_entry(EntryData(
        version=result.version, when=options.now(), status=result.status,
        critical=result.critical, recommendations=result.recommendations,
        dimensions=result.dimensions, comment=result.comment, estimate=result.estimate,
        proposed=result.proposed_estimate, static_notes=warnings,
        static_stop=result.source == "static",
        tasks_note=result.tasks.note(options.write_groups, options.dry_run)
        if result.tasks else None))
    result.frontmatter_status = "audited" if result.ok else "revision_requested"
    new = append_to_section(text, "Audit History", result.entry)
    new = set_frontmatter_value(new, "status", result.frontmatter_status)
    parse_spec(new, spec.path)  # what we write must read back (SpecError otherwise)
    if not options.dry_run:
        replace_if_unchanged(spec.path, spec.text, new, "audit")
        result.written = True
    return result


# -- many specs -----------------------------------------------------------------------------

def invalid_result(path: Path, exc: SpecError) -> SpecAudit:
    return SpecAudit(path.stem, str(path), INVALID, source="load", error=exc.message,
                     hint=exc.hint)


def audit_specs(paths: list[Path], project: Project, access: ModelAccess,
                options: AuditOptions | None = None, *, max_parallel: int = 4,
                on_result: Callable[[SpecAudit], None] | None = None) -> list[SpecAudit]:
    """Audit every spec, up to `max_parallel` at once (each audit is an independent agent
    run). Results come back in the order of `paths`; `on_result` sees each as it finishes.
    NotConfigured (no model) and interruptions stop everything; other failures are results."""
    options = options or AuditOptions()

    def one(path: Path) -> SpecAudit:
        try:
            return audit_spec(path, project, access, options)
        except SpecError as exc:
            return invalid_result(path, exc)
        except (NotConfigured, Interrupted):
            raise
        except AgentrunError as exc:
            return SpecAudit(path.stem, str(path), ERROR, error=exc.message, hint=exc.hint)

    results: dict[int, SpecAudit] = {}
    workers = max(1, min(max_parallel, len(paths) or 1))
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="audit")
    try:
        futures = {pool.submit(one, p): i for i, p in enumerate(paths)}
        for future in as_completed(futures):
            result = future.result()
            results[futures[future]] = result
            if on_result is not None:
                on_result(result)
    except BaseException:
        options.cancel.set()  # running agents stop at their next step
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return [results[i] for i in range(len(paths))]
