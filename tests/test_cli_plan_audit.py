"""`agentrun plan`, `audit --static` and `init` through the entry point."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from clirun import agentrun

from agentrun.resources import packaged_dir

EXAMPLE = packaged_dir("example")


@pytest.fixture()
def example(tmp_path: Path) -> Path:
    dest = tmp_path / "proj"
    shutil.copytree(EXAMPLE, dest)
    return dest


def sdk_imports(proc) -> set[str]:
    """Top-level model SDK packages a process run with PYTHONPROFILEIMPORTTIME=1 imported."""
    imported = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    assert "agentrun.cli.app" in imported, proc.stderr[-2000:]  # the log is complete
    return {m.split(".")[0] for m in imported} & {"anthropic", "openai"}


IMPORT_LOG = {"PYTHONPROFILEIMPORTTIME": "1"}


def test_plan_example_multiwave_is_orchestrated_without_model_sdks(example):
    # also the light-command check for `plan SPEC --json`: no model SDK imported
    proc = agentrun("plan", ".specflow/specs/SPEC-002.md", "--json", cwd=example,
                    env=IMPORT_LOG)
    assert proc.returncode == 0, proc.stderr
    assert sdk_imports(proc) == set()
    plan = proc.json["plan"]
    assert plan["mode"] == "orchestrated"
    assert len(plan["waves"]) == 3
    assert len(plan["waves"][0]["groups"]) >= 2
    assert all(len(b["groups"]) <= 3 for w in plan["waves"] for b in w["batches"])


def test_plan_human_output_names_mode_and_waves(example):
    proc = agentrun("plan", "SPEC-002", cwd=example)
    assert proc.returncode == 0, proc.stderr
    assert "orchestrated" in proc.stdout and "Parallelization" in proc.stdout


def test_the_plan_table_of_sixty_groups_stays_readable_at_any_width(tmp_path):
    """One line per group under its wave and worker: at 60 groups in one wave the workers
    were joined on one line, and the other columns were pushed off the table."""
    rows = "\n".join(f"| G{i} | Create `pkg/module_{i}.py` with its helper functions and tests |"
                     " — |" for i in range(1, 61))
    (tmp_path / "SPEC-60.md").write_text(
        "---\nid: SPEC-60\nstatus: audited\n---\n# SPEC-60: Sixty\n\n## Task\n\nSixty "
        "modules.\n\n## Acceptance Criteria\n\n- [ ] all\n\n## Implementation Tasks\n\n"
        f"| Group | Tasks | Dependencies |\n|---|---|---|\n{rows}\n")
    for width in (40, 200):
        proc = agentrun("plan", "SPEC-60.md", cwd=tmp_path, env={"COLUMNS": str(width)})
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        head = next(i for i, line in enumerate(lines) if line.startswith("Wave"))
        assert lines[head].split() == ["Wave", "Parallel", "Worker", "Groups"]
        table = lines[head + 1:head + 61]
        assert table[0].split()[:4] == ["1", "60", "G1", "G1"]
        for i, line in enumerate(table, 1):  # every group on its own line, columns aligned
            assert line[table[0].index("G1 "):].split()[:2] == [f"G{i}", f"G{i}"], line
            assert len(line) <= max(width, 40), line
        assert ("…" in table[-1]) == (width == 40)
        assert lines[head + 61].startswith("Parallelization: wave 1 runs 60 workers")


def test_plan_without_spec_uses_active_spec(example):
    proc = agentrun("plan", "--json", cwd=example)
    assert proc.returncode == 0, proc.stderr
    active = proc.json["spec"]["id"]
    assert active in (p.stem for p in (example / ".specflow/specs").glob("*.md"))


def test_plan_without_spec_and_no_active_spec_is_clear(tmp_path):
    (tmp_path / ".specflow").mkdir()
    (tmp_path / ".specflow/STATE.md").write_text("# State\n\n## Current Position\n\n"
                                                 "- **Active Specification:** none\n")
    proc = agentrun("plan", cwd=tmp_path)
    assert proc.returncode == 2
    assert "names no active specification" in proc.stderr and "Traceback" not in proc.stderr


def test_mode_override(example):
    proc = agentrun("plan", "SPEC-002", "--mode", "single", "--json", cwd=example)
    plan = proc.json["plan"]
    assert plan["mode"] == "single" and plan["detected_mode"] == "orchestrated"
    bad = agentrun("plan", "SPEC-002", "--mode", "parallel", cwd=example)
    assert bad.returncode == 2 and "--mode" in bad.stderr


CYCLE_SPEC = """---
id: SPEC-7
status: draft
---
# SPEC-7: cycle

## Task

Do it.

## Acceptance Criteria

- [ ] works

## Implementation Tasks

| Group | Tasks | Dependencies |
|-------|-------|--------------|
| G1 | a | — |
| G2 | b | G4 |
| G3 | c | G2 |
| G4 | d | G3 |
"""


def test_cycle_prints_the_chain(tmp_path):
    spec = tmp_path / "SPEC-7.md"
    spec.write_text(CYCLE_SPEC)
    proc = agentrun("plan", str(spec), cwd=tmp_path)
    assert proc.returncode == 2
    assert "G2 -> G4 -> G3 -> G2" in proc.stderr and "Traceback" not in proc.stderr
    audit = agentrun("audit", str(spec), "--static", "--json", cwd=tmp_path)
    assert audit.returncode == 1
    findings = audit.json["findings"]
    assert any(f["severity"] == "critical" and "G2 -> G4 -> G3 -> G2" in f["message"]
               for f in findings)


def test_unknown_group_names_the_referrer(tmp_path):
    spec = tmp_path / "SPEC-8.md"
    spec.write_text(CYCLE_SPEC.replace("| G2 | b | G4 |", "| G2 | b | G9 |"))
    proc = agentrun("plan", str(spec), cwd=tmp_path)
    assert proc.returncode == 2
    assert "G2" in proc.stderr and "G9" in proc.stderr


@pytest.mark.parametrize("make, words", [
    (lambda p: p.write_bytes(b"\x00\x01\x02binary\x00"), "binary"),
    (lambda p: p.write_bytes("caf\xe9 au lait".encode("latin-1")), "UTF-8"),
    (lambda p: p.mkdir(), "directory"),
    (lambda p: None, "not found"),
])
def test_unreadable_specs_exit_2_with_a_message(tmp_path, make, words):
    target = tmp_path / "SPEC-1.md"
    make(target)
    for command in (("plan",), ("audit", "--static")):
        proc = agentrun(*command, str(target), cwd=tmp_path)
        assert proc.returncode == 2, (command, proc.stderr)
        assert words.lower() in proc.stderr.lower()
        assert "Traceback" not in proc.stderr


def test_json_error_document(tmp_path):
    proc = agentrun("plan", str(tmp_path / "nope.md"), "--json", cwd=tmp_path)
    assert proc.returncode == 2
    doc = proc.json
    assert doc["ok"] is False and doc["error"]["exit_code"] == 2


def test_audit_static_example_specs_pass_without_model_sdks(example):
    # also the light-command check for `audit --static --json`: no model SDK imported
    proc = agentrun("audit", "--static", "--json", cwd=example, env=IMPORT_LOG)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sdk_imports(proc) == set()
    doc = proc.json
    assert doc["summary"]["total"] >= 2 and doc["summary"]["critical"] == 0


def test_audit_without_static_says_what_to_do(example):
    no_model = {"ANTHROPIC_API_KEY": "", "OPENAI_API_KEY": "", "OPENAI_BASE_URL": "",
                "AGENTRUN_PROVIDER": "", "AGENTRUN_MODEL": ""}
    proc = agentrun("audit", "SPEC-001", cwd=example, env=no_model)
    assert proc.returncode == 3
    assert "ANTHROPIC_API_KEY" in proc.stderr and "--static" in proc.stderr


def test_audit_static_scope_check_needs_decomposition(tmp_path):
    files = "\n".join(f"- `src/m{i}.py`" for i in range(7))
    spec = tmp_path / "SPEC-5.md"
    spec.write_text(f"---\nid: SPEC-5\nstatus: draft\n---\n# SPEC-5\n\n## Context\n\nx\n\n"
                    f"## Task\n\ny\n\n## Requirements\n\n### Files to Create\n\n{files}\n\n"
                    "## Acceptance Criteria\n\n- [ ] ok\n")
    proc = agentrun("audit", str(spec), "--static", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = proc.json
    assert doc["verdict"] == "NEEDS_DECOMPOSITION"
    assert any(f["code"] == "needs-decomposition" for f in doc["findings"])


def test_init_scaffolds_without_overwriting_and_imports_no_model_sdk(tmp_path):
    # the user's lines stay as they are; what they cover already is not added again
    (tmp_path / ".gitignore").write_text("# mine\n/.venv\nnode_modules")
    proc = agentrun("init", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    created = set(proc.json["created"])
    assert {".specflow/PROJECT.md", ".specflow/STATE.md", ".specflow/config.yaml",
            ".specflow/specs"} <= created
    assert (tmp_path / ".gitignore").read_text() == (
        "# mine\n/.venv\nnode_modules\n.specflow/runs/\nvenv/\n__pycache__/\n.pytest_cache/\n"
        ".mypy_cache/\ndist/\nbuild/\n")
    (tmp_path / ".specflow/PROJECT.md").write_text("mine")
    # the light-command check for `init --json` in an initialised project: no model SDK
    again = agentrun("init", "--json", cwd=tmp_path, env=IMPORT_LOG)
    assert again.json["created"] == []
    assert sdk_imports(again) == set()
    assert (tmp_path / ".specflow/PROJECT.md").read_text() == "mine"
    assert (tmp_path / ".gitignore").read_text().count(".specflow/runs/") == 1


# `plan`, `audit --static` and `init` are checked in the tests that already run them
@pytest.mark.parametrize("args", [["--help"], ["status", "--json"]])
def test_light_commands_do_not_import_model_sdks(example, args):
    proc = agentrun(*args, cwd=example, env=IMPORT_LOG)
    assert sdk_imports(proc) == set()


def test_audit_all_reports_critical_in_junit_and_github_summary_then_invalid(example, tmp_path):
    # one project covers the audit of every spec with a critical finding (exit 1, --json,
    # JUnit file, GitHub step summary and annotations) and then with an unreadable spec (exit 2)
    import xml.etree.ElementTree as ET

    specs = example / ".specflow/specs"
    (specs / "SPEC-900.md").write_text(CYCLE_SPEC.replace("SPEC-7", "SPEC-900"))
    junit = tmp_path / "audit.xml"
    summary = tmp_path / "summary.md"
    proc = agentrun("audit", "--static", "--json", "--junit", str(junit), cwd=example,
                    env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    assert proc.returncode == 1
    assert proc.json["summary"]["critical"] >= 1
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    assert set(cases) >= {"SPEC-001", "SPEC-002", "SPEC-900"}
    assert cases["SPEC-900"].find("failure") is not None
    assert cases["SPEC-001"].find("failure") is None
    assert "SPEC-900" in summary.read_text()
    assert "::error" in proc.stderr and "G2 -> G4 -> G3 -> G2" in proc.stderr
    (specs / "SPEC-901.md").write_bytes(b"\xff\xfe\x00")
    proc = agentrun("audit", "--static", cwd=example)
    assert proc.returncode == 2
    assert "INVALID" in proc.stdout and "SPEC-900" in proc.stdout
