"""`agentrun audit` with the auditor, through the entry point: exit codes, --json, writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from clirun import agentrun
from otlp_receiver import OtlpReceiver

SPEC = """---
id: {id}
status: draft
---
# {id}: Greeting

## Context

The tool cannot greet.

## Task

Add `greet()` to `src/hello.py`.

## Requirements

`greet("Ann")` returns "Hello, Ann".

## Acceptance Criteria

- [ ] `greet` returns the greeting

## Constraints

- No dependencies
"""
NO_MODEL = {"ANTHROPIC_API_KEY": "", "OPENAI_API_KEY": "", "OPENAI_BASE_URL": "",
            "AGENTRUN_PROVIDER": "", "AGENTRUN_MODEL": ""}


def submit(status: str, **extra: Any) -> dict[str, Any]:
    verdict = {"status": status, "critical_issues": [], "recommendations": [], **extra}
    return {"tool_calls": [{"name": "submit_result", "arguments": {
        "status": "complete", "summary": "Audited.", "criteria_met": [], "deviations": [],
        "output": verdict}}]}


def project(tmp_path: Path, specs: dict[str, str], script: dict[str, Any]) -> Path:
    root = tmp_path / "proj"
    (root / ".specflow/specs").mkdir(parents=True)
    (root / "src").mkdir()
    (root / "src/hello.py").write_text("")
    for name, text in specs.items():
        (root / ".specflow/specs" / f"{name}.md").write_text(text)
    (root / "script.yaml").write_text(yaml.safe_dump(script))
    return root


def test_one_spec_approved_writes_history_and_status(tmp_path):
    root = project(tmp_path, {"SPEC-1": SPEC.format(id="SPEC-1")},
                   {"groups": {"SPEC-1": [submit("APPROVED", comment="ready")]}})
    proc = agentrun("audit", "SPEC-1", "--script", "script.yaml", "--json", cwd=root,
                    env=NO_MODEL)
    assert proc.returncode == 0, proc.stderr
    doc = proc.json
    assert doc["ok"] and doc["status"] == "APPROVED" and doc["written"]
    assert doc["audit_version"] == 1 and doc["frontmatter_status"] == "audited"
    est = doc["context_estimate"]
    assert est["method"].startswith("tiktoken:") and est["total"]["tokens"] > 0
    text = (root / ".specflow/specs/SPEC-1.md").read_text()
    assert "status: audited" in text and text.endswith(doc["history_entry"] + "\n")
    assert "**Comment:** ready" in text


def test_revision_exits_1_and_human_output_names_the_issues(tmp_path):
    root = project(tmp_path, {"SPEC-1": SPEC.format(id="SPEC-1")},
                   {"default": [submit("NEEDS_REVISION",
                                       critical_issues=["Say what happens for an empty name"])]})
    proc = agentrun("audit", ".specflow/specs/SPEC-1.md", "--script", "script.yaml", cwd=root,
                    env=NO_MODEL)
    assert proc.returncode == 1, proc.stderr
    assert "NEEDS_REVISION" in proc.stdout and "Say what happens for an empty name" in proc.stdout
    assert "status: revision_requested" in proc.stdout + \
        (root / ".specflow/specs/SPEC-1.md").read_text()


def test_write_dry_run_prints_generated_tasks_and_changes_nothing(tmp_path):
    groups = [{"id": "G1", "title": "Greet", "tasks": ["Add `greet` to `src/hello.py`"]},
              {"id": "G2", "title": "Tests", "tasks": ["Add `tests/test_hello.py`"],
               "dependencies": ["G1"]}]
    original = SPEC.format(id="SPEC-1")
    root = project(tmp_path, {"SPEC-1": original},
                   {"default": [submit("NEEDS_DECOMPOSITION", critical_issues=["split"],
                                       task_groups=groups)]})
    proc = agentrun("audit", "SPEC-1", "--script", "script.yaml", "--write", "--dry-run",
                    cwd=root, env=NO_MODEL)
    assert proc.returncode == 1, proc.stderr
    assert "Generated ## Implementation Tasks (not written)" in proc.stdout
    assert "| G2 | 2 | Tests |" in proc.stdout and "Dry run: nothing written" in proc.stdout
    assert (root / ".specflow/specs/SPEC-1.md").read_text() == original


def test_malformed_verdict_twice_exits_1_with_a_clear_message(tmp_path):
    original = SPEC.format(id="SPEC-1")
    root = project(tmp_path, {"SPEC-1": original},
                   {"default": [{"text": "I think it is fine."}, {"text": "Yes, fine."},
                                {"text": "Still fine."}]})
    proc = agentrun("audit", "SPEC-1", "--script", "script.yaml", "--json", cwd=root,
                    env=NO_MODEL)
    assert proc.returncode == 1
    doc = proc.json
    assert doc["status"] == "ERROR" and "malformed" in doc["error"]
    assert "malformed" in proc.stderr and "Traceback" not in proc.stderr
    assert (root / ".specflow/specs/SPEC-1.md").read_text() == original


def test_no_model_configured_exits_3_and_points_at_static(tmp_path):
    root = project(tmp_path, {"SPEC-1": SPEC.format(id="SPEC-1")}, {"default": []})
    proc = agentrun("audit", "SPEC-1", cwd=root, env=NO_MODEL)
    assert proc.returncode == 3
    assert "no model provider is configured" in proc.stderr and "--static" in proc.stderr


def test_invalid_spec_exits_2(tmp_path):
    root = project(tmp_path, {}, {"default": []})
    (root / ".specflow/specs/SPEC-1.md").write_bytes(b"\xff\xfe")
    proc = agentrun("audit", "SPEC-1", "--script", "script.yaml", cwd=root, env=NO_MODEL)
    assert proc.returncode == 2 and "not valid UTF-8" in proc.stderr


def test_every_spec_in_parallel_with_one_json_document(tmp_path):
    specs = {f"SPEC-{n}": SPEC.format(id=f"SPEC-{n}") for n in (1, 2, 3)}
    script = {"groups": {"SPEC-1": [submit("APPROVED")], "SPEC-2": [submit("APPROVED")],
                         "SPEC-3": [submit("NEEDS_REVISION", critical_issues=["x"])]}}
    root = project(tmp_path, specs, script)
    with OtlpReceiver() as collector:
        proc = agentrun("audit", "--script", "script.yaml", "--max-parallel", "3", "--json",
                        cwd=root, env={**NO_MODEL,
                                       "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint})
    assert proc.returncode == 1, proc.stderr
    doc = proc.json
    assert [(s["spec"], s["status"]) for s in doc["specs"]] == [
        ("SPEC-1", "APPROVED"), ("SPEC-2", "APPROVED"), ("SPEC-3", "NEEDS_REVISION")]
    assert doc["summary"] == {"total": 3, "approved": 2, "needs_revision": 1,
                              "needs_decomposition": 0, "invalid": 0, "error": 0}
    # one trace for the audit, audited in three threads: a span per spec, the auditor's
    # model call inside each
    spans = collector.spans
    assert {sp.trace_id for sp in spans} == {doc["trace_id"]}
    root_span = next(sp for sp in spans if not sp.parent_id)
    assert root_span.name == "agentrun audit" and root_span.status == "ERROR"
    for n, verdict in ((1, "APPROVED"), (2, "APPROVED"), (3, "NEEDS_REVISION")):
        audit = next(sp for sp in spans if sp.name == f"audit SPEC-{n}")
        assert audit.parent_id == root_span.span_id and audit["agentrun.status"] == verdict
        assert audit["gen_ai.agent.name"] == "spec-auditor"
        calls = [sp for sp in spans if sp.parent_id == audit.span_id
                 and sp.name.startswith("chat")]
        assert len(calls) == 1 and calls[0]["gen_ai.provider.name"] == "scripted"
        assert calls[0]["gen_ai.usage.input_tokens"] > 0
    (root / ".specflow/specs/SPEC-3.md").write_text(SPEC.format(id="SPEC-3"))
    (root / ".specflow/specs/SPEC-4.md").write_bytes(b"\0")
    script["groups"]["SPEC-3"] = [submit("APPROVED")]
    (root / "script.yaml").write_text(yaml.safe_dump(script))
    again = agentrun("audit", "--script", "script.yaml", "--dry-run", cwd=root, env=NO_MODEL)
    assert again.returncode == 2, again.stderr
    assert "INVALID" in again.stdout and "dry run: nothing written" in again.stdout
