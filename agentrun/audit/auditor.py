"""The auditor agent: its task, its read-only tools, and its verdict.

The auditor runs in a fresh context over the repository with read-only tools, is given the
spec, PROJECT.md and what code already found (static findings, plan, measured estimates), and
answers with its verdict as the `output` of `submit_result`: the task declares `AuditVerdict` as
its result model, so a malformed verdict is refused in the conversation, field by field, and
the auditor corrects it there. An auditor that ends without a valid verdict is asked once
more, in another fresh context that is shown its last reply and what went wrong.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrun.agent.definitions import AgentDefinition, load_agent
from agentrun.agent.prompts import render
from agentrun.agent.terminator import Limits, limits_for
from agentrun.attempts import AgentOutcome, run_agent
from agentrun.audit.estimates import ContextEstimate, approx
from agentrun.audit.static import StaticAudit
from agentrun.audit.verdict import AuditVerdict
from agentrun.core.errors import EXIT_FAILED, AgentrunError, Interrupted
from agentrun.core.events import EventSink
from agentrun.core.fsutil import relpath
from agentrun.core.status import StopReason
from agentrun.core.usage import Usage
from agentrun.executors.base import AgentTask
from agentrun.plan import SpecFinding
from agentrun.project import Project
from agentrun.providers.base import Provider
from agentrun.sandbox.base import Sandbox
from agentrun.sandbox.choice import make_sandbox
from agentrun.spec.model import Spec

AUDITOR = "spec-auditor"
READ_ONLY_TOOLS = ("read_file", "list_files", "search_files")
AUDIT_TOKEN_BUDGET = 200_000  # per auditor run; reading a repository costs more than a task
MAX_REPLY_SHOWN = 6_000  # characters of the last reply sent back when re-asking


class AuditorFailed(AgentrunError):
    """The auditor agent stopped without a usable verdict (exit 1)."""

    exit_code = EXIT_FAILED


@dataclass
class AuditorAnswer:
    verdict: AuditVerdict
    usage: Usage
    steps: int
    asks: int  # auditor runs: 2 when the verdict had to be asked for again


def finding_text(f: SpecFinding) -> str:
    where = f" (line {f.line})" if f.line else ""
    return f"{f.code}{where}: {f.message}"


def auditor_agent(overrides_root: Path | None) -> AgentDefinition:
    """The auditor's definition (packaged, or the override committed at HEAD:
    `Project.overrides_root`, never a file or symlink in the working tree) with its tools cut
    down to read-only ones, whatever an override lists: an audit never changes the
    repository."""
    agent = load_agent(AUDITOR, overrides_root)
    tools = [t for t in agent.tools if t in READ_ONLY_TOOLS] or list(READ_ONLY_TOOLS)
    return dataclasses.replace(agent, tools=tools)


def _fence(text: str) -> str:
    """A code fence longer than any run of backticks in `text`, so the text cannot close it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(4, longest + 1)


def audit_task(spec: Spec, project: Project, static: StaticAudit,
               estimate: ContextEstimate) -> str:
    """The auditor's task text (prompts/audit.md, or its override committed at HEAD)."""
    counts = {s: sum(1 for f in static.findings if f.severity == s)
              for s in ("critical", "warning", "info")}
    plan = static.plan
    if plan is None:
        plan_summary = "no plan"
    else:
        waves = "; ".join(f"wave {w.label}: {', '.join(w.groups) or 'whole spec'}"
                          for w in plan.waves)
        plan_summary = f"{plan.mode} mode ({plan.mode_reason}); {waves}"
    lines = [f"{u.id}: {u.tokens:,} tokens, {approx(u.share)}"
             + (" — OVER the limit" if u.over else "")
             + (f" (files not there yet: {', '.join(u.absent_files)})" if u.absent_files
                else "") for u in estimate.groups]
    total = estimate.total
    lines.append(f"whole spec in one context: {total.tokens:,} tokens, {approx(total.share)}"
                 + ("" if estimate.single_context else " (it runs with workers, one context "
                    "per group)"))
    project_md = project.project_text()
    spec_path = relpath(spec.path, project.root)
    return render("audit", {
        "spec_id": spec.id, "spec_path": spec_path, "spec_text": spec.text,
        "fence": _fence(spec.text), "project_md": project_md.strip(),
        "static_summary": f"{counts['critical']} critical, {counts['warning']} warnings, "
                          f"{counts['info']} info",
        "static_findings": [f"{f.severity}: {finding_text(f)}" for f in static.findings
                            if f.severity != "info"],
        "plan_summary": plan_summary, "estimate_method": estimate.method,
        "window": f"{estimate.window:,}", "group_limit": f"{estimate.thresholds.group_max:.0%}",
        "total_limit": f"{estimate.thresholds.total_max:.0%}", "estimate_lines": lines,
        "estimate_problems": estimate.problems, "has_groups": bool(spec.groups),
    }, project.overrides_root)


def ask_auditor(spec: Spec, project: Project, provider: Provider, static: StaticAudit,
                estimate: ContextEstimate, *, limits: dict[str, Any] | None = None,
                cancel: threading.Event | None = None, sandbox: str = "auto",
                on_event: EventSink | None = None) -> AuditorAnswer:
    """Run the auditor in a fresh context; re-ask once (another fresh context, shown its last
    reply and what went wrong) if it ended without a valid verdict. Raises AuditorFailed when
    there is still none, or when the auditor stops early.

    Its tools only read; should anything of it ever run a command, that runs in a read-only
    sandbox (`sandbox` mode), so an audit cannot change the repository."""
    agent = auditor_agent(project.overrides_root)
    jail, _ = make_sandbox(sandbox, project.root, writable=False)
    run_limits = limits_for(spec.complexity, agent, {"retry_on_failure": False,
                                                     "token_budget": AUDIT_TOKEN_BUDGET,
                                                     **(limits or {})})
    cancel = cancel if cancel is not None else threading.Event()
    task = audit_task(spec, project, static, estimate)
    outcome = _run(agent, task, spec, project, provider, run_limits, cancel, jail, on_event)
    if isinstance(outcome.output, AuditVerdict):
        return AuditorAnswer(outcome.output, outcome.usage, outcome.steps, 1)
    first = outcome.error or "no verdict was submitted"
    reply = outcome.summary
    if len(reply) > MAX_REPLY_SHOWN:
        reply = reply[:MAX_REPLY_SHOWN] + "\n[... cut ...]"
    reask = render("audit_reask", {"error": first, "reply": reply, "fence": _fence(reply),
                                   "original_task": task}, project.overrides_root)
    again = _run(agent, reask, spec, project, provider, run_limits, cancel, jail, on_event)
    usage, steps = outcome.usage + again.usage, outcome.steps + again.steps
    if isinstance(again.output, AuditVerdict):
        return AuditorAnswer(again.output, usage, steps, 2)
    raise AuditorFailed(
        f"{spec.id}: the auditor's verdict was missing or malformed, and again after it was "
        f"asked for once more ({first}; then: {again.error or 'no verdict was submitted'})",
        hint="run the audit again, or use a stronger model (--model); "
             "`agentrun audit --static` runs the checks that need no model")


def _run(agent: AgentDefinition, task: str, spec: Spec, project: Project, provider: Provider,
         limits: Limits, cancel: threading.Event, sandbox: Sandbox,
         on_event: EventSink | None) -> AgentOutcome:
    """One fresh auditor conversation, whose result model is the verdict."""
    outcome = run_agent(AgentTask(agent=agent, task=task, worktree=project.root, limits=limits,
                                  group=spec.id, project_root=project.overrides_root,
                                  output=AuditVerdict),
                        provider, cancel=cancel, sandbox=sandbox, on_event=on_event)
    if outcome.stop_reason == StopReason.INTERRUPTED:
        raise Interrupted(f"the audit of {spec.id} was interrupted",
                          hint="nothing was written; audit again")
    if outcome.stop_reason != StopReason.COMPLETED:
        raise AuditorFailed(f"{spec.id}: the auditor stopped ({outcome.stop_reason}) without "
                            f"a verdict: {outcome.error or outcome.summary}",
                            hint="raise --max-steps or --token-budget, or check the model "
                                 "settings; `agentrun audit --static` needs no model")
    return outcome
