"""After a run, a plan's own file marks what landed — in its own notation, nothing else
changed — and the next run keeps what is done or unchanged (agentrun/formats/writeback.py,
living.py). In-process on copies of the fixtures; tests/test_formats_cli.py runs it all."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from agentrun.core.status import Status
from agentrun.formats import read_plan, to_spec
from agentrun.formats.living import after_run, read_landed, record_landed, select
from agentrun.formats.writeback import write_back

FIX = Path(__file__).parent / "fixtures" / "formats"


def copy(rel: str, tmp_path: Path) -> Path:
    src = FIX / rel
    dest = tmp_path / rel
    if src.is_dir():
        shutil.copytree(src, dest)
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, dest)
    return dest


def spec_of(path: Path, fmt: str, root: Path):
    return to_spec(read_plan(path, fmt), root)


def changed_bytes(before: bytes, after: bytes) -> list[tuple[int, bytes, bytes]]:
    assert len(before) == len(after)
    return [(i, before[i:i + 1], after[i:i + 1]) for i in range(len(before))
            if before[i] != after[i]]


def test_speckit_ticks_only_what_landed_and_nothing_else(tmp_path):
    path = copy("speckit/mock-auth/tasks.md", tmp_path)
    before = path.read_bytes()
    spec = spec_of(path, "speckit", tmp_path)
    assert write_back(spec, tmp_path, ["G1", "G6"]) == [path]
    after = path.read_bytes()
    assert [c[1:] for c in changed_bytes(before, after)] == [(b" ", b"X"), (b" ", b"X")]
    text = after.decode()
    assert "- [X] T001 Create mock user definitions module" in text
    assert "- [X] T006 [US1] Modify `getServerSession()`" in text
    assert "- [ ] T002 [P] Create the dev API route" in text
    assert write_back(spec, tmp_path, ["G1"]) == []  # already ticked: the file stays


def test_speckit_keeps_crlf_and_a_task_a_person_removed_meanwhile(tmp_path):
    path = tmp_path / "specs/001/tasks.md"
    path.parent.mkdir(parents=True)
    plan = ("# Tasks: X\r\n\r\n## Phase 1: Setup\r\n\r\n- [ ] T001 Create a.py\r\n"
            "- [ ] T002 [P] Create b.py\r\n")
    path.write_bytes(plan.encode())
    spec = spec_of(path, "speckit", tmp_path)
    path.write_bytes(plan.replace("- [ ] T002 [P] Create b.py\r\n", "").encode())
    write_back(spec, tmp_path, ["G1", "G2"])
    assert path.read_bytes() == (b"# Tasks: X\r\n\r\n## Phase 1: Setup\r\n\r\n"
                                 b"- [X] T001 Create a.py\r\n")


def test_kiro_ticks_a_major_task_once_all_its_subtasks_landed(tmp_path):
    path = copy("kiro/player-trail-effect/tasks.md", tmp_path)
    before = path.read_bytes()
    spec = spec_of(path, "kiro", tmp_path)
    write_back(spec, tmp_path, ["G1a", "G1b", "G1c", "G1d", "G1e", "G2a"])
    after = path.read_text(encoding="utf-8")
    assert "- [x] 1. Create the Particle System" in after
    assert "  - [x] 1.5. Write unit tests for ParticleSystem" in after
    assert "  - [x] 2.1. Add particle state to game store" in after
    assert "- [ ] 2. Integrate Particle System with Game Store" in after  # 2.2-2.4 did not land
    assert len(changed_bytes(before, path.read_bytes())) == 7


def test_taskmaster_sets_status_of_the_task_and_its_subtasks(tmp_path):
    path = copy("taskmaster/typst-pdf-export/tasks.json", tmp_path)
    before = path.read_text(encoding="utf-8")
    spec = spec_of(path, "taskmaster", tmp_path)
    write_back(spec, tmp_path, ["G3"])
    after = path.read_text(encoding="utf-8")
    data = json.loads(after)["master"]["tasks"]
    assert data[2]["status"] == "done"
    assert {s["status"] for s in data[2]["subtasks"]} == {"done"}
    assert data[3]["status"] == "pending" and data[3]["subtasks"][0]["status"] == "pending"
    # every other byte as it was: the only changed lines are six statuses
    pairs = [(a, b) for a, b in zip(before.splitlines(True), after.splitlines(True),
                                    strict=True) if a != b]
    assert len(pairs) == 6
    assert all(b == a.replace('"status": "pending"', '"status": "done"') for a, b in pairs)


def test_taskmaster_adds_a_missing_status_in_the_object_indentation(tmp_path):
    path = tmp_path / ".taskmaster/tasks/tasks.json"
    path.parent.mkdir(parents=True)
    path.write_text('{\n  "tasks": [\n    {\n      "id": 1,\n      "title": "A"\n    }\n  ]\n}\n')
    spec = spec_of(path, "taskmaster", tmp_path)
    write_back(spec, tmp_path, ["G1"])
    assert path.read_text() == ('{\n  "tasks": [\n    {\n      "id": 1,\n      "title": "A",\n'
                                '      "status": "done"\n    }\n  ]\n}\n')


ROADMAP = """# Roadmap

Plans:
- [ ] 01-01-PLAN.md — Fix type names
- [x] 01-02-PLAN.md — Memoize
- [ ] 01-03-PLAN.md — Rename screenshot util
"""


def test_gsd_ticks_the_plans_line_in_the_roadmap(tmp_path):
    phase = tmp_path / ".planning/phases/01-foundation"
    shutil.copytree(FIX / "gsd/01-foundation", phase)
    roadmap = tmp_path / ".planning/ROADMAP.md"
    roadmap.write_text(ROADMAP)
    imported = read_plan(phase, "gsd")
    # 01-02's line is ticked already: GSD's own record says it is done
    assert {u.gid: u.done for u in imported.units} == {"G1": False, "G2": True, "G3": False}
    spec = to_spec(imported, tmp_path)
    assert write_back(spec, tmp_path, ["G3"]) == [roadmap]
    assert roadmap.read_text() == ROADMAP.replace("- [ ] 01-03", "- [x] 01-03")


def test_changed_runs_what_changed_and_its_dependents(tmp_path):
    path = copy("speckit/template-phases/tasks.md", tmp_path)
    execution = tmp_path / ".specflow/execution"
    spec = spec_of(path, "speckit", tmp_path)
    full = select(spec, execution, changed=True)
    assert full.kept == [] and len(full.groups) == 28  # nothing landed yet
    record_landed(full, execution, [x.id for x in spec.groups], "run-1", "now")
    assert select(spec_of(path, "speckit", tmp_path), execution, changed=True).groups == []
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("Implement [Service] in src/services/[service].py (depends "
                                 "on T020)", "Implement [Service] in src/services/[service].py")
                    .replace("T021 [US2] Implement [Service] in src/services/[service].py",
                             "T021 [US2] Implement [Service] in src/services/[other].py"),
                    encoding="utf-8")
    edited = select(spec_of(path, "speckit", tmp_path), execution, changed=True)
    # T021 changed its file; T022..T028 come after it (phase order)
    assert [x.id for x in edited.groups] == [f"G{n}" for n in range(21, 29)]
    assert edited.group("G21").dependencies == []  # G20 is kept: its work is in the branch
    assert {k.id: k.reason for k in edited.kept}["G20"] == "unchanged since run run-1"
    assert len(edited.kept) == 20


def test_done_in_the_plan_is_kept_and_landed_groups_recorded(tmp_path):
    path = copy("taskmaster/typst-pdf-export/tasks.json", tmp_path)
    execution = tmp_path / ".specflow/execution"
    spec = select(spec_of(path, "taskmaster", tmp_path), execution, changed=False)
    assert [x.id for x in spec.groups] == ["G3", "G4", "G5"]
    assert [(k.id, k.reason) for k in spec.kept] == [("G1", "status done in tasks.json"),
                                                      ("G2", "status done in tasks.json")]
    assert spec.group("G3").dependencies == []  # on G2, which is done

    class State:  # what a finished run hands over
        run_id, finished = "run-7", "2026-01-01 10:00 UTC"
        groups = {"G3": type("G", (), {"status": Status.COMPLETE})(),
                  "G4": type("G", (), {"status": Status.FAILED})()}

    written = after_run(spec, tmp_path, execution, State())
    assert written == [execution / "taskmaster-landed.json", path]
    assert set(read_landed(execution / "taskmaster-landed.json")) == {"G3"}
    data = json.loads(path.read_text())["master"]["tasks"]
    assert [t["status"] for t in data] == ["done", "done", "done", "pending", "pending"]


def test_changed_works_for_a_native_spec_too(tmp_path):
    from runkit import spec_text

    from agentrun.spec.parse import parse_spec

    groups = [("G1", [], "src/a.py"), ("G2", ["G1"], "src/b.py"), ("G3", [], "src/c.py")]
    execution = tmp_path / "execution"
    spec = select(parse_spec(spec_text("SPEC-1", groups), "SPEC-1.md"), execution, changed=True)
    assert spec.kept == [] and spec.source is None
    record_landed(spec, execution, ["G1", "G2", "G3"], "r1", "then")
    edited = [("G1", [], "src/a2.py"), *groups[1:]]  # G1 now creates another file
    again = select(parse_spec(spec_text("SPEC-1", edited), "SPEC-1.md"), execution, changed=True)
    assert [x.id for x in again.groups] == ["G1", "G2"]  # G2 depends on it
    assert [(k.id, k.reason) for k in again.kept] == [("G3", "unchanged since run r1")]
    # what the run records is the whole spec's fingerprint, G2's dependency on G1 included
    assert again.fingerprints["G2"] == spec.fingerprints["G2"]


def test_the_worker_reads_the_plans_context_and_checks():
    from agentrun.agent.prompts import render_worker_assignment

    imported = read_plan(FIX / "gsd/03-features/03-01-PLAN.md", "gsd")
    group = to_spec(imported, FIX).groups[0]
    text = render_worker_assignment({"spec_id": "gsd-03-01", "groups": [{
        "id": group.id, "title": group.title, "tasks": group.tasks, "files": group.files,
        "context": group.context, "checks": group.checks}]})
    assert ("- Task 1: Create User model\n  Files: src/features/user/model.ts\n  Define User "
            "type with id, email, name, createdAt. Export TypeScript interface.") in text
    assert "Context from the plan:\n\nPlan 03-01 (03-01-PLAN.md)\n\nImplement complete User " \
           "feature as vertical slice." in text
    assert "Checks the plan gives (run them before you finish):\n- Task 1: Create User model: " \
           "tsc --noEmit passes" in text


def test_the_summary_of_a_plan_goes_to_its_record_made_when_missing(tmp_path):
    """As in a CI job's aggregate, where no local `run` wrote the record first."""
    from gitutil import init_repo

    from agentrun.project import Project
    from agentrun.report.execution_state import GroupState, RunState
    from agentrun.run.record import Recorder

    init_repo(tmp_path)
    path = copy("kiro/cc-sdd-template/tasks.md", tmp_path)
    spec = select(spec_of(path, "kiro", tmp_path), tmp_path / ".specflow/execution",
                  changed=False)
    assert not spec.path.exists()
    state = RunState(run_id="r1", spec_id=spec.id, spec_path="x", mode="orchestrated",
                     base_commit="0" * 40, target_branch="main", started="then",
                     finished="now")
    state.groups = {"G1a": GroupState(id="G1a", status=Status.COMPLETE, wave="1", batch="G1a"),
                    "G2a": GroupState(id="G2a", status=Status.FAILED, wave="2", batch="G2a")}
    record = Recorder(Project(tmp_path), spec, "orchestrated", "r1", tmp_path / "run",
                      tmp_path / "state.json")
    record.state = state
    record.write_summary("now")
    kept = spec.path.read_text(encoding="utf-8")
    assert "source: \"kiro/cc-sdd-template/tasks.md\"" in kept and "## Execution Summary" in kept
    plan = path.read_text(encoding="utf-8")
    assert "- [x] 1.1 Sub-task description" in plan and "- [x] 1. Foundation" in plan
    assert "- [ ] 2.1 (P) Sub-task description" in plan
    assert record.written == [tmp_path / ".specflow/execution/kiro-cc-sdd-template-landed.json",
                              path]
