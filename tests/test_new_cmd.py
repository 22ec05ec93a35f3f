"""`agentrun new "Title"`: the next free SPEC-NNN from the template, active in STATE.md."""

from __future__ import annotations

from clirun import agentrun


def _init(root):
    proc = agentrun("init", "--json", cwd=root)
    assert proc.returncode == 0, proc.stderr


def test_new_spec_is_numbered_active_and_the_audit_names_what_is_left_to_write(tmp_path):
    """As created, the template's example files and Task would be run: critical. Written,
    the spec passes, even with the template's Context and Requirements prose left (warned)."""
    _init(tmp_path)
    proc = agentrun("new", "Add CSV export", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.json == {"ok": True, "id": "SPEC-001", "path": ".specflow/specs/SPEC-001.md"}
    text = (tmp_path / ".specflow/specs/SPEC-001.md").read_text()
    assert text.startswith("---\nid: SPEC-001\ntitle: \"Add CSV export\"\n")
    for section in ("## Context", "## Task", "## Requirements", "### Files to Create",
                    "### Files to Modify", "## Acceptance Criteria", "## Constraints",
                    "## Implementation Tasks"):
        assert f"\n{section}\n" in text
    assert "**Active Specification:** SPEC-001" in (tmp_path / ".specflow/STATE.md").read_text()
    plan = agentrun("plan", "--json", cwd=tmp_path).json  # the active spec
    assert plan["spec"]["id"] == "SPEC-001"
    assert plan["plan"]["layers"] == [["G1"], ["G2"]]
    audit = agentrun("audit", "--static", "--json", cwd=tmp_path)
    assert audit.returncode == 1, audit.stdout + audit.stderr
    found = {(f["severity"], f["message"].split(";")[0])
             for f in audit.json["specs"][0]["findings"] if f["code"] == "template-text"}
    assert found == {
        ("critical", "names the template's example file(s) src/example/new_module.py, "
                     "src/example/existing.py"),
        ("critical", "`## Task` still holds the template's placeholder text"),
        ("warning", "`## Context` still holds the template's placeholder text"),
        ("warning", "`## Requirements` still holds the template's placeholder text")}
    refused = agentrun("run", "--provider", "scripted", "--script", "none.yaml", "--yes",
                       cwd=tmp_path)
    assert refused.returncode == 2 and "`## Task` still holds" in refused.stderr

    spec = tmp_path / ".specflow/specs/SPEC-001.md"
    spec.write_text(spec.read_text()
                    .replace("What to build, in one or two paragraphs. A worker reads this "
                             "before its task group.", "Export the report table as CSV.")
                    .replace("src/example/new_module.py", "src/report/csv_export.py")
                    .replace("src/example/existing.py", "src/report/cli.py"))
    audit = agentrun("audit", "--static", "--json", cwd=tmp_path)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    doc = audit.json["specs"][0]
    assert (doc["verdict"], doc["counts"]["critical"]) == ("PASSED", 0)


def test_new_takes_the_next_free_number_including_archived_specs(tmp_path):
    _init(tmp_path)
    (tmp_path / ".specflow/specs/SPEC-0007.md").write_text("mine")
    (tmp_path / ".specflow/archive").mkdir()
    (tmp_path / ".specflow/archive/SPEC-0012-old.md").write_text("old")
    proc = agentrun("new", "Next one", "--json", cwd=tmp_path)
    assert proc.json["id"] == "SPEC-0013", proc.stderr
    assert (tmp_path / ".specflow/specs/SPEC-0007.md").read_text() == "mine"
    second = agentrun("new", "And another", "--json", cwd=tmp_path)
    assert second.json["id"] == "SPEC-0014"
    assert "**Active Specification:** SPEC-0014" in (tmp_path / ".specflow/STATE.md").read_text()


def test_new_refuses_without_specflow_and_with_an_empty_title(tmp_path):
    proc = agentrun("new", "Title", cwd=tmp_path)
    assert proc.returncode == 3
    assert "agentrun init" in proc.stderr and "Traceback" not in proc.stderr
    _init(tmp_path)
    empty = agentrun("new", "   ", "--json", cwd=tmp_path)
    assert empty.returncode == 2
    assert empty.json["error"]["message"] == "the title is empty"
    assert list((tmp_path / ".specflow/specs").iterdir()) == []
