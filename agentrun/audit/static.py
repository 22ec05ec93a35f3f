"""Static audit: checks that need no model, from frontmatter to wave drift.

Findings are critical (the spec cannot be executed as written), warning (it can, but something
is likely wrong) or info.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from agentrun.core.errors import PlanError
from agentrun.plan import Plan, SpecFinding, SpecSeverity, build_plan
from agentrun.spec.model import Spec
from agentrun.spec.template import paragraphs, placeholders

STATUSES = {"draft", "audited", "revision_requested", "needs_revision", "needs_decomposition",
            "running", "executing", "review", "done", "complete", "completed", "blocked",
            "failed", "archived", "approved"}
PRIORITIES = {"critical", "high", "medium", "low", "p0", "p1", "p2", "p3"}
COMPLEXITIES = {"small", "medium", "large"}
REQUIRED_SECTIONS = ("Context", "Task", "Requirements", "Acceptance Criteria")
RECOMMENDED_SECTIONS = ("Constraints",)
MAX_FILES_WITHOUT_GROUPS = 5
MAX_REQUIREMENT_SECTIONS_WITHOUT_GROUPS = 3


@dataclass
class StaticAudit:
    spec_id: str
    path: str
    findings: list[SpecFinding] = field(default_factory=list)
    plan: Plan | None = None

    @property
    def critical(self) -> list[SpecFinding]:
        return [f for f in self.findings if f.severity == "critical"]

    @property
    def needs_decomposition(self) -> bool:
        return any(f.code == "needs-decomposition" for f in self.findings)

    @property
    def verdict(self) -> str:
        if self.critical:
            return "NEEDS_REVISION"
        return "NEEDS_DECOMPOSITION" if self.needs_decomposition else "PASSED"

    def to_dict(self) -> dict[str, Any]:
        return {"spec": self.spec_id, "path": self.path, "verdict": self.verdict,
                "findings": [asdict(f) for f in self.findings],
                "counts": {s: sum(1 for f in self.findings if f.severity == s)
                           for s in ("critical", "warning", "info")},
                "plan": self.plan.to_dict() if self.plan else None}


def static_audit(spec: Spec) -> StaticAudit:
    findings = [*check_frontmatter(spec), *check_sections(spec), *check_template(spec),
                *check_groups(spec)]
    plan = None
    try:
        plan = build_plan(spec)
    except PlanError as exc:
        findings.append(SpecFinding("critical", "invalid-plan", exc.message))
    else:
        findings += plan.findings
    findings += check_scope(spec)
    return StaticAudit(spec.id, str(spec.path), findings, plan)


def check_frontmatter(spec: Spec) -> list[SpecFinding]:
    fm = spec.frontmatter
    if spec.frontmatter_style == "none":
        return [SpecFinding("warning", "no-frontmatter",
                        "no frontmatter: add a YAML block with id, type, status, priority, "
                        "complexity", line=1)]
    out = []
    for key in ("id", "status", "type"):
        if key not in fm:
            out.append(SpecFinding("warning", "frontmatter-missing", f"frontmatter has no `{key}`"))
    checks = (("status", STATUSES), ("priority", PRIORITIES), ("complexity", COMPLEXITIES))
    for key, allowed in checks:
        if key in fm and str(fm[key]).strip().lower() not in allowed:
            out.append(SpecFinding("warning", "frontmatter-value",
                               f"frontmatter `{key}: {fm[key]}` is not one of "
                               f"{', '.join(sorted(allowed))}"))
    if "id" in fm and spec.path.suffix == ".md" and str(fm["id"]) != spec.path.stem \
            and not spec.path.stem.startswith(str(fm["id"])):
        out.append(SpecFinding("info", "id-filename",
                           f"frontmatter id {fm['id']} differs from the file name "
                           f"{spec.path.name}"))
    return out


def check_sections(spec: Spec) -> list[SpecFinding]:
    out = []
    for title in REQUIRED_SECTIONS:
        if spec.section(title) is None:
            severity: SpecSeverity = ("critical" if title in ("Task", "Acceptance Criteria")
                                  else "warning")
            if title == "Task" and spec.section("Goal") is not None:
                continue
            out.append(SpecFinding(severity, "missing-section", f"no `## {title}` section"))
    for title in RECOMMENDED_SECTIONS:
        if spec.section(title) is None:
            out.append(SpecFinding("info", "missing-section", f"no `## {title}` section"))
    if spec.section("Acceptance Criteria") is not None and not spec.acceptance_criteria:
        out.append(SpecFinding("critical", "no-acceptance-criteria",
                           "`## Acceptance Criteria` has no items; list them as `- [ ] ...`"))
    return out


def check_template(spec: Spec) -> list[SpecFinding]:
    """What `agentrun new`'s template left unwritten. Its example files would be built and a
    Task in its words tells a worker nothing (critical); its Context or Requirements prose
    still there is a warning."""
    marks = placeholders()
    out = []
    named = {*spec.files_to_create, *spec.files_to_modify, *(f for g in spec.groups
                                                             for f in g.files)}
    examples = [f for f in marks.files if f in named]
    if examples:
        out.append(SpecFinding("critical", "template-text",
                           f"names the template's example file(s) {', '.join(examples)}; "
                           "name the files this work creates and changes"))
    for title, texts in marks.prose.items():
        section = spec.section(title)
        if section is None or not set(texts) & set(paragraphs(section.body)):
            continue
        out.append(SpecFinding("critical" if title == "Task" else "warning", "template-text",
                           f"`## {title}` still holds the template's placeholder text; "
                           f"write the {title.lower()} of this work", line=section.start + 1))
    return out


def check_groups(spec: Spec) -> list[SpecFinding]:
    section = spec.section("Implementation Tasks")
    out = []
    if section is not None and not spec.groups:
        body = section.body.strip()
        if re.search(r"\bG\d+[a-z]?\b", body, re.I):
            out.append(SpecFinding("critical", "groups-unparsed",
                               "`## Implementation Tasks` mentions groups but none could be "
                               "parsed; use a `| Group | Tasks | Dependencies |` table or "
                               "`### G1: Title` headings", line=section.start + 1))
        elif body:
            out.append(SpecFinding("warning", "no-groups",
                               "`## Implementation Tasks` has no task groups",
                               line=section.start + 1))
    for group in spec.groups:
        if not group.tasks:
            out.append(SpecFinding("warning", "empty-group", f"{group.id} has no tasks",
                               line=group.line, group=group.id))
    return out


def check_scope(spec: Spec) -> list[SpecFinding]:
    """A large spec without task groups should be decomposed first."""
    if spec.groups:
        return []
    files = len(set(spec.files_to_create) | set(spec.files_to_modify))
    reqs = spec.requirement_sections
    if files > MAX_FILES_WITHOUT_GROUPS or reqs > MAX_REQUIREMENT_SECTIONS_WITHOUT_GROUPS:
        return [SpecFinding("warning", "needs-decomposition",
                        f"needs decomposition: {files} files to create/modify and {reqs} "
                        "requirement sections but no task groups; run `agentrun audit --write` "
                        "to generate Implementation Tasks")]
    return []
