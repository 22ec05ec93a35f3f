"""Plans from other tools through the CLI: `plan` and `run` take them as they are, `import`
writes the agentrun spec, the run marks what landed in the plan's own file, and `--changed`
re-runs only what an edit touched. Real git repositories, worker processes, the scripted
model (tests/runkit.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml
from clirun import agentrun
from gitutil import init_repo, run_git
from runkit import STATE_MD, scripted, submit, writes
from test_review_cli import met, review_turn

from agentrun.plan import compute_layers
from agentrun.spec import load_spec

FIX = Path(__file__).parent / "fixtures" / "formats"

TASKS = """# Tasks: Calculator

**Input**: the calc package

## Phase 1: Setup

- [ ] T001 Create calc/__init__.py as an empty package

## Phase 2: User Story 1 - Operations (Priority: P1)

**Goal**: sub and mul work

- [ ] T002 [P] [US1] Create calc/sub.py with sub(a, b)
- [ ] T003 [P] [US1] Create calc/mul.py with mul(a, b)
"""
PLAN = "specs/001-calc/tasks.md"
RECORD = ".specflow/specs/speckit-001-calc.md"


def project(root: Path, files: dict[str, str]) -> Path:
    return init_repo(root, {"README.md": "# fixture\n", ".gitignore": ".specflow/runs/\n",
                            ".specflow/PROJECT.md": "# Project\n\nA fixture.\n",
                            ".specflow/STATE.md": STATE_MD.format(spec="none"), **files})


def script(root: Path, groups: dict, reviewer: list | None = None) -> None:
    doc = {"groups": groups, **({"agents": {"code-reviewer": reviewer}} if reviewer else {})}
    (root / ".specflow/script.yaml").write_text(yaml.safe_dump(doc))
    run_git(root, "add", ".specflow/script.yaml")
    run_git(root, "commit", "-q", "-m", "script")


def test_speckit_plan_runs_as_it_is_ticks_what_landed_and_reruns_what_changed(tmp_path):
    root = project(tmp_path / "p", {PLAN: TASKS})
    script(root, {"G1": writes("calc/__init__.py", ""),
                  "G2": writes("calc/sub.py", "def sub(a, b):\n    return a - b\n"),
                  "G3": [submit("failed", "cannot", error="no mul today")] * 2})
    # workers in this process (--in-process): the same run, with fewer processes to start
    first = agentrun("run", PLAN, *scripted("--retries", "0", "--in-process"), cwd=root)
    assert first.returncode == 1, first.stderr
    assert first.json["status"] == "partial"
    assert [w["groups"] for w in first.json["waves"]] == [["G1"], ["G2", "G3"]]
    # the plan says what landed, in its own notation, and nothing else changed
    assert (root / PLAN).read_text() == TASKS.replace("- [ ] T001", "- [X] T001").replace(
        "- [ ] T002", "- [X] T002")
    # the run's summary went to the spec it keeps for the plan, committed with the ticks
    record = (root / RECORD).read_text()
    assert 'source: "specs/001-calc/tasks.md"' in record and "## Execution Summary" in record
    assert run_git(root, "status", "--porcelain") == ""
    committed = run_git(root, "show", "--name-only", "--format=", "HEAD").splitlines()
    assert PLAN in committed and ".specflow/execution/speckit-001-calc-landed.json" in committed
    # the worker read the task as written, with its story's context
    transcript = (Path(first.json["run_dir"]) / "workers/G2/transcript.jsonl").read_text()
    assert "Create calc/sub.py with sub(a, b)" in transcript
    assert "Goal: sub and mul work" in transcript

    # edit T002; T001 stays as it landed, T003 never landed
    (root / PLAN).write_text((root / PLAN).read_text().replace(
        "sub.py with sub(a, b)", "sub.py with sub(a, b) that checks its arguments"))
    changed = agentrun("plan", PLAN, "--changed", "--json", cwd=root)
    assert [g["id"] for g in changed.json["groups"]] == ["G2", "G3"]
    assert [(k["id"], k["reason"].split(" run ")[0]) for k in changed.json["kept"]] == [
        ("G1", "unchanged since")]
    script(root, {"G2": writes("calc/sub.py", "def sub(a, b):\n    return int(a) - int(b)\n"),
                  "G3": writes("calc/mul.py", "def mul(a, b):\n    return a * b\n")},
           reviewer=[review_turn([met(n, "calc/ holds it") for n in (1, 2, 3)])])
    second = agentrun("run", PLAN, "--changed", *scripted("--in-process", review=True),
                      cwd=root)
    assert second.returncode == 0, second.stderr
    assert sorted(second.json["groups"]) == ["G2", "G3"]  # G1 was not run again
    assert second.json["review"]["result"] == "APPROVED"
    assert (root / PLAN).read_text().count("- [X] T00") == 3
    assert "that checks its arguments" in (root / PLAN).read_text()
    # the review went to the spec kept for the plan; the ticks were committed with the report
    assert "## Review History" in (root / RECORD).read_text()
    assert "Review History" not in (root / PLAN).read_text()
    assert run_git(root, "status", "--porcelain") == ""
    nothing = agentrun("run", PLAN, "--changed", *scripted(), cwd=root)
    assert nothing.returncode == 0 and nothing.json["nothing_to_run"] is True


def test_gsd_and_taskmaster_plans_and_their_errors(tmp_path):
    root = project(tmp_path / "p", {})
    shutil.copytree(FIX / "gsd/01-foundation", root / ".planning/phases/01-foundation")
    shutil.copytree(FIX / "taskmaster/typst-pdf-export", root / ".taskmaster/tasks")
    shutil.copytree(FIX / "speckit/template", root / "specs/template")
    gsd = agentrun("plan", ".planning/phases/01-foundation", "--json", cwd=root)
    assert gsd.returncode == 0, gsd.stderr
    assert [w["groups"] for w in gsd.json["plan"]["waves"]] == [["G1", "G3"], ["G2"]]
    assert gsd.json["groups"][1]["source_ids"] == ["01-02", "01-02#1", "01-02#2", "01-02#3"]
    tm = agentrun("plan", ".taskmaster/tasks/tasks.json", "--json", cwd=root)
    assert tm.returncode == 0, tm.stderr
    assert [g["id"] for g in tm.json["groups"]] == ["G3", "G4", "G5"]
    assert [k["id"] for k in tm.json["kept"]] == ["G1", "G2"]  # status done in the file
    bad = agentrun("run", "specs/template/tasks.md", "--yes", cwd=root)
    assert bad.returncode == 2
    assert "specs/template/tasks.md:154: a task without a task id: 'TXXX" in bad.stderr

    imported = agentrun("import", ".taskmaster/tasks/tasks.json", "--json", cwd=root)
    assert imported.returncode == 0, imported.stderr
    spec = Path(imported.json["path"])
    assert spec == root / ".specflow/specs/taskmaster.md"
    native = load_spec(spec)  # a spec of its own now, planned as the plan was
    assert "imported_from" in native.frontmatter and "source" not in native.frontmatter
    assert compute_layers(native.groups) == [["G1"], ["G2"], ["G3", "G4"], ["G5"]]
    again = agentrun("import", ".taskmaster/tasks/tasks.json", cwd=root)
    assert again.returncode == 2 and "never overwrites" in again.stderr
    assert json.loads((root / ".taskmaster/tasks/tasks.json").read_text()) == json.loads(
        (FIX / "taskmaster/typst-pdf-export/tasks.json").read_text())
