"""JUnit XML, the report format every CI system reads.

`run_junit`: one test case per task group of a run (failed, partial or interrupted → failure
with the error; blocked or never run → skipped with the reason), and once the run has ended,
one for its review (approved → passed; changes requested or no review submitted → failure;
not reviewed → skipped with the reason), so a run that ends partial on its review says why.
`audit_junit`: one test case per audited spec (critical findings → failure; a spec that cannot
be read → error).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agentrun.core.fsutil import atomic_write_text
from agentrun.core.status import Status
from agentrun.report.execution_state import RunState
from agentrun.report.summary import review_outcome, review_words

FAILURE_STATUSES = (Status.FAILED, Status.PARTIAL, Status.INTERRUPTED)
SKIPPED_STATUSES = (Status.BLOCKED, Status.PENDING, Status.RUNNING)
# characters XML 1.0 cannot carry at all, even escaped (ANSI escapes in tool output, NUL, ...)
_INVALID_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def clean(text: Any) -> str:
    """Text safe for an XML 1.0 document."""
    return _INVALID_XML.sub("\ufffd", "" if text is None else str(text))


def first_line(text: str | None, default: str) -> str:
    lines = [line for line in (text or "").splitlines() if line.strip()]
    line = lines[0].strip() if lines else default
    return line if len(line) <= 200 else line[:197] + "..."


def add_element(parent: ET.Element, tag: str, text: str | None = None, **attrs: Any) -> ET.Element:
    element = ET.SubElement(parent, tag, {k: clean(v) for k, v in attrs.items()
                                          if v is not None})
    if text:
        element.text = clean(text)
    return element


def serialise(root: ET.Element) -> str:
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") \
        + "\n"


def run_junit(state: RunState) -> str:
    """A run (or an aggregated CI run) as JUnit XML: one test case per task group."""
    groups = list(state.groups.values())
    failures = sum(1 for g in groups if g.status in FAILURE_STATUSES)
    skipped = sum(1 for g in groups if g.status in SKIPPED_STATUSES)
    review = review_outcome(state)
    failures += review == "failure"
    skipped += review == "skipped"
    tests = len(groups) + (review is not None)
    total_time = f"{sum(g.duration_s for g in groups):.3f}"
    root = ET.Element("testsuites", {"name": "agentrun", "tests": str(tests),
                                     "failures": str(failures), "errors": "0",
                                     "skipped": str(skipped), "time": total_time})
    suite = add_element(root, "testsuite", name=state.spec_id, tests=tests, failures=failures,
                errors=0, skipped=skipped, time=total_time, timestamp=state.started)
    props = add_element(suite, "properties")
    usage = state.usage
    for name, value in (("run_id", state.run_id), ("mode", state.mode),
                        ("status", state.status), ("spec", state.spec_path),
                        ("model", f"{state.provider}/{state.model}" if state.provider else ""),
                        ("tokens", usage.total),
                        ("cost_usd", "unknown" if state.cost_usd is None else state.cost_usd)):
        add_element(props, "property", name=name, value=value)
    for g in groups:
        name = f"{g.id}: {g.title}" if g.title else g.id
        case = add_element(suite, "testcase", classname=state.spec_id, name=name,
                   time=f"{g.duration_s:.3f}", file=state.spec_path or None)
        if g.status in FAILURE_STATUSES:
            detail = "\n".join([g.error or f"{g.id} ended {g.status}",
                                *(f"deviation: {d}" for d in g.deviations)])
            add_element(case, "failure", detail, message=first_line(g.error, f"{g.id} {g.status}"),
                type=g.status)
        elif g.status in SKIPPED_STATUSES:
            reason = g.error or ("not run yet" if g.status == Status.PENDING else g.status)
            add_element(case, "skipped", message=first_line(reason, g.status))
        out = [f"status: {g.status}", f"wave: {g.wave}", f"batch: {g.batch}",
               f"attempts: {g.attempts}", f"steps: {g.steps}",
               f"tokens: {g.usage.total}",
               f"cost_usd: {'unknown' if g.cost_usd is None else round(g.cost_usd, 6)}"]
        out += [f"commit: {c}" for c in g.commits]
        out += [f"created: {p}" for p in g.files_created]
        out += [f"modified: {p}" for p in g.files_modified]
        if g.summary:
            out.append(f"summary: {g.summary}")
        add_element(case, "system-out", "\n".join(out))
    if review is not None:
        case = add_element(suite, "testcase", classname=state.spec_id, name="review",
                           file=state.spec_path or None)
        words = review_words(state)
        if review == "failure":
            add_element(case, "failure", words, message=first_line(words, "not approved"),
                        type="review")
        elif review == "skipped":
            add_element(case, "skipped", message=first_line(words, "not reviewed"))
        else:
            add_element(case, "system-out", words)
    return serialise(root)


def audit_junit(results: Iterable[Any]) -> str:
    """Audit results as JUnit XML: one test case per spec.

    Takes `StaticAudit` objects or their `to_dict()` form; a dict with `verdict: INVALID` and
    an `error` (a spec that could not be read) becomes an error case.
    """
    docs = [r.to_dict() if hasattr(r, "to_dict") else dict(r) for r in results]
    failures = errors = 0
    root = ET.Element("testsuites", {"name": "agentrun audit"})
    suite = add_element(root, "testsuite", name="agentrun audit")
    for doc in docs:
        spec_id = str(doc.get("spec") or Path(str(doc.get("path", "spec"))).stem)
        case = add_element(suite, "testcase", classname="agentrun.audit", name=spec_id,
                   file=doc.get("path"))
        findings = list(doc.get("findings") or [])
        critical = [f for f in findings if f.get("severity") == "critical"]
        if doc.get("verdict") == "INVALID" or doc.get("error"):
            errors += 1
            add_element(case, "error", "\n".join(filter(None, [doc.get("error"), doc.get("hint")])),
                message=first_line(doc.get("error"), "invalid spec"), type="invalid-spec")
        elif critical:
            failures += 1
            first = critical[0]
            add_element(case, "failure", "\n".join(_finding_line(f) for f in critical),
                message=f"{doc.get('verdict', 'NEEDS_REVISION')}: {len(critical)} critical "
                        f"finding(s); first: {first_line(first.get('message'), '')}",
                type=str(doc.get("verdict") or "critical"))
        rest = [f for f in findings if f.get("severity") != "critical"]
        if rest or doc.get("verdict"):
            lines = [f"verdict: {doc.get('verdict', '')}"] + [_finding_line(f) for f in rest]
            add_element(case, "system-out", "\n".join(lines))
    for element, tests in ((root, len(docs)), (suite, len(docs))):
        element.set("tests", str(tests))
        element.set("failures", str(failures))
        element.set("errors", str(errors))
        element.set("skipped", "0")
    return serialise(root)


def _finding_line(f: dict[str, Any]) -> str:
    where = f" (line {f['line']})" if f.get("line") else ""
    return f"{f.get('severity', '')} {f.get('code', '')}{where}: {f.get('message', '')}"


def write_junit(path: Path, xml_text: str) -> None:
    atomic_write_text(Path(path), xml_text)
