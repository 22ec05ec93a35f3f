"""Plans from other tools read from their own files (tests/fixtures/formats/<format>/, each
fixture's SOURCE.md names the repository, path and commit it was taken from).

The expected groups and dependency layers below are written by hand from each format's
documentation (the rules are in docs/formats.md), not produced by the readers: a layer is the
set of tasks that can run once the layers before it are done.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agentrun.core.errors import SpecError
from agentrun.formats import detect, read_plan, to_spec
from agentrun.formats.render import render
from agentrun.plan import build_plan, compute_layers
from agentrun.spec.parse import parse_spec

FIX = Path(__file__).parent / "fixtures" / "formats"


def plan_of(path: Path, fmt: str):
    imported = read_plan(path, fmt)
    return imported, to_spec(imported, path.parent)


def layers(spec) -> list[list[str]]:
    return [sorted(layer, key=_gid_key) for layer in compute_layers(spec.groups)]


def _gid_key(gid: str) -> tuple:
    m = re.fullmatch(r"G(\d+)([a-z]?)", gid)
    assert m, gid
    return int(m.group(1)), m.group(2)


def g(*numbers: int) -> list[str]:
    return [f"G{n}" for n in numbers]


def run(a: int, b: int) -> list[list[str]]:
    """Layers of one task each, T<a> .. T<b>."""
    return [[f"G{n}"] for n in range(a, b + 1)]


# -- spec-kit ------------------------------------------------------------------------------

def test_speckit_template_phases_layers_and_context():
    imported, spec = plan_of(FIX / "speckit/template-phases/tasks.md", "speckit")
    assert [x.source_ids for x in spec.groups] == [[f"T{n:03d}"] for n in range(1, 29)]
    # Setup: T001, T002, then T003 [P] with T002; Foundational: T004 with [P] T005, T006,
    # then T007..T009; each story: its tests section ([P] together), then implementation
    # (models [P] together, then one task after another)
    assert layers(spec) == [
        g(1), g(2, 3), g(4, 5, 6), g(7), g(8), g(9),
        g(10, 11), g(12, 13), *run(14, 17),
        g(18, 19), *run(20, 23),
        g(24, 25), *run(26, 28)]
    t014 = spec.group("G14")
    assert t014.dependencies == ["G12", "G13"]  # `(depends on T012, T013)`, also the order
    assert t014.tasks == ["Implement [Service] in src/services/[service].py (depends on T012, "
                          "T013)"]
    assert t014.files == ["src/services/[service].py"]
    assert "Phase: Phase 3: User Story 1 - [Title] (Priority: P1) 🎯 MVP" in t014.context
    assert "Section: Implementation for User Story 1" in t014.context
    assert spec.group("G10").dependencies == ["G9"]  # a story starts after the phase before
    assert spec.id == "speckit-template-phases"
    assert spec.title == "[FEATURE NAME]"


def test_speckit_template_placeholder_ids_are_an_error_naming_the_line():
    with pytest.raises(SpecError) as err:
        read_plan(FIX / "speckit/template/tasks.md", "speckit")
    assert err.value.line == 154  # `- [ ] TXXX [P] Documentation updates in docs/`
    assert "tasks.md:154" in err.value.message and "TXXX" in err.value.message


def test_speckit_real_plan_with_its_spec_md():
    imported, spec = plan_of(FIX / "speckit/mock-auth/tasks.md", "speckit")
    assert len(spec.groups) == 25
    assert layers(spec) == [g(1, 2, 3), g(4), g(5), *run(6, 21), g(22, 23, 24), g(25)]
    t002 = spec.group("G2")
    assert t002.files == ["src/app/api/dev/mock-user/"]
    t006 = spec.group("G6")
    assert t006.tasks[0].startswith("Modify `getServerSession()` in src/lib/auth/session.ts to "
                                    "add a mock auth guard: when `isMockAuthEnabled()` is true")
    assert "Goal: A developer clones the repo, runs `npm run dev`" in t006.context
    assert "Independent Test: Start the app with `NODE_ENV=development`" in t006.context
    assert "User story (spec.md): User Story 1 - Developer Runs App Locally" in t006.context
    assert imported.criteria[0].startswith("US1: **Given** the app is running in development")
    assert any(c.startswith("**SC-001**") for c in imported.criteria)
    assert imported.requirements.startswith("- **FR-001**: System MUST provide")
    # the fenced "Parallel Example" quotes `Task T006: ...`: an example, not a task
    assert all(len(x.source_ids) == 1 for x in spec.groups)


def test_speckit_same_file_tasks_never_share_a_wave():
    imported, spec = plan_of(FIX / "speckit/code-review-fixes/tasks.md", "speckit")
    assert len(spec.groups) == 55
    assert layers(spec) == [
        g(1), g(2),
        g(*range(3, 15)), g(15),  # Spec 001 routes [P], then the suite run
        g(*range(16, 30)), g(30),
        g(*range(31, 36)), g(36),
        g(37), g(38),
        g(39, 40, 41, 42), g(43), g(44), g(45),
        g(46, 47, 48, 49, 50), g(51, 52, 53, 54), g(55)]
    plan = build_plan(spec)
    _no_shared_files(spec, plan)
    # T004 and T005 both change src/app/api/events/[id]/route.ts
    wave_of = {gid: w.label for w in plan.waves for gid in w.groups}
    assert wave_of["G4"] != wave_of["G5"]
    assert spec.group("G4").files == spec.group("G5").files == ["src/app/api/events/[id]/route.ts"]
    # the four ownership tests all write one file: one after another
    assert len({wave_of[x] for x in g(39, 40, 41, 42)}) == 4


# -- Kiro and cc-sdd -----------------------------------------------------------------------

def test_kiro_nested_subtasks_run_in_order_with_requirement_context():
    imported, spec = plan_of(FIX / "kiro/player-trail-effect/tasks.md", "kiro")
    ids = ["1.1", "1.2", "1.3", "1.4", "1.5", "2.1", "2.2", "2.3", "2.4", "3.1", "3.2", "3.3",
           "3.4", "4.1", "4.2", "4.3", "4.4", "5.1", "5.2", "5.3", "6.1", "6.2", "6.3", "6.4"]
    assert [x.source_ids for x in spec.groups] == [[i] for i in ids]
    assert [x.id for x in spec.groups][:6] == ["G1a", "G1b", "G1c", "G1d", "G1e", "G2a"]
    assert len(layers(spec)) == 24  # Kiro runs its tasks one after another
    assert spec.group("G2a").dependencies == ["G1e"]
    assert imported.containers["1"] == ["1.1", "1.2", "1.3", "1.4", "1.5"]
    g1b = spec.group("G1b")
    assert g1b.tasks == ["Implement the ParticleSystem class\n"
                         "- Create the core system with particle management functionality\n"
                         "- Implement particle creation method with proper error handling\n"
                         "- Add performance monitoring to limit total particles"]
    assert "Part of task 1: Create the Particle System" in g1b.context
    assert ("- 1.4: WHEN the player moves at different speeds THEN the system SHALL adjust the "
            "density of sparkle effects accordingly") in g1b.context  # from requirements.md
    assert imported.criteria[0] == ("1.1: WHEN the player character moves THEN the system SHALL "
                                    "generate sparkle effects at the character's previous "
                                    "position")


def test_kiro_flat_major_tasks():
    imported, spec = plan_of(FIX / "kiro/tool-approval-layer/tasks.md", "kiro")
    assert [x.id for x in spec.groups] == [f"G{n}" for n in range(9)]
    assert layers(spec) == run(0, 8)
    assert spec.title == "Human-in-the-Loop Tool-Approval Layer"
    assert imported.context.startswith("This plan enriches the render + resume steps")
    first = spec.group("G0").tasks[0]
    assert first.splitlines()[:3] == [
        "Establish the `PendingDecision` frontend model and confirm the resume seam",
        "- Define `PendingDecision` (`slot`, `toolCallId`, `title`, `rawInput`, `invocation`) "
        "and",
        "  the `ToolInvocationState` union in a shared types module, mirroring AI-SDK"]
    assert "_Requirements" not in first
    assert "Requirements: 3.3, 3.4, 5.1, 6.4" in spec.group("G0").context


def test_cc_sdd_parallel_marks_and_heading_majors():
    imported, spec = plan_of(FIX / "kiro/customer-support-rag/tasks.md", "kiro")
    assert len(spec.groups) == 28
    # (P): runs with the task before it; a task without it waits for everything before
    assert layers(spec) == [
        ["G1a", "G1b", "G1c"], ["G2a", "G2b", "G2c"], ["G3a", "G3b", "G3c"], ["G4a"],
        ["G4b", "G4c"], ["G5a", "G5b", "G5c"], ["G6a"], ["G6b"],
        ["G7a", "G7b", "G7c", "G7d"], ["G7e"], ["G7f", "G7g"], ["G7h", "G7i"],
        ["G8a", "G8b"]]
    assert "Part of task 1: Project Foundation and Setup" in spec.group("G1a").context
    assert "Optional test task" in spec.group("G7i").context  # `7.9*`
    assert imported.containers == {}  # its major tasks are headings: nothing to tick


def test_cc_sdd_template_depends_and_boundary():
    imported, spec = plan_of(FIX / "kiro/cc-sdd-template/tasks.md", "kiro")
    assert layers(spec) == [["G1a"], ["G2a", "G2b"], ["G3a"]]
    assert spec.group("G3a").dependencies == ["G2a", "G2b"]  # order and `_Depends: 2.1, 2.2_`
    assert "Boundary: AuthService" in spec.group("G2a").context


def test_cc_sdd_parallel_mark_at_the_end_of_the_title(tmp_path):
    path = tmp_path / "tasks.md"  # as tools/cc-sdd/templates/shared/settings/templates/specs
    path.write_text("# Implementation Plan\n\n- [ ] 1. Set up\n- [ ] 2. Core\n"
                    "- [ ] 2.1 Build A (P)\n- [ ] 2.2 Build B (P)\n")
    imported, spec = plan_of(path, "kiro")
    assert layers(spec) == [["G1"], ["G2a", "G2b"]]
    assert spec.group("G2b").title == "2.2 Build B"


def test_kiro_container_and_subtasks_at_one_indentation():
    imported, spec = plan_of(FIX / "kiro/photo-albums/tasks.md", "kiro")
    assert len(spec.groups) == 28
    assert len(layers(spec)) == 28
    assert imported.containers["10"] == ["10.1", "10.2", "10.3"]
    assert spec.group("G10c").source_ids == ["10.3"]


# -- GSD -----------------------------------------------------------------------------------

def test_gsd_phase_folder_waves_and_checks():
    imported, spec = plan_of(FIX / "gsd/01-foundation", "gsd")
    assert spec.id == "gsd-01-foundation"
    assert [x.source_ids for x in spec.groups] == [
        ["01-01", "01-01#1", "01-01#2"], ["01-02", "01-02#1", "01-02#2", "01-02#3"],
        ["01-03", "01-03#1"]]
    assert layers(spec) == [["G1", "G3"], ["G2"]]
    # 01-02 is wave 2: after every wave-1 plan, not only its `depends_on: [01]`
    assert spec.group("G2").dependencies == ["G1", "G3"]
    assert spec.declared_waves == {"G1": 1, "G2": 2, "G3": 1}
    assert build_plan(spec).findings == []
    g2 = spec.group("G2")
    assert g2.files[:4] == ["packages/webview-ui/src/components/edges/RelationEdge.tsx",
                            "packages/webview-ui/src/lib/contexts/filter.tsx",
                            "packages/webview-ui/src/lib/contexts/settings.tsx",
                            "packages/webview-ui/src/lib/hooks/useGraph.ts"]
    assert g2.tasks[0].startswith("Task 1: Wrap RelationEdge in React.memo and verify")
    assert "Per D-08: modify `packages/webview-ui/src/components/edges/RelationEdge.tsx`" \
        in g2.tasks[0]
    assert g2.checks[0].startswith("Task 1: Wrap RelationEdge in React.memo and verify "
                                   "ModelNode/EnumNode are already memoized: pnpm --filter "
                                   "webview-ui exec tsc --noEmit && grep -q")
    assert "Complete the rendering-side performance foundations" in g2.context
    assert "01-02: RelationEdge is wrapped in React.memo" in imported.criteria


def test_gsd_single_plan_from_the_template():
    imported, spec = plan_of(FIX / "gsd/03-features/03-01-PLAN.md", "gsd")
    assert spec.id == "gsd-03-01"
    [group] = spec.groups
    assert group.tasks == [
        "Task 1: Create User model\nFiles: src/features/user/model.ts\nDefine User type with id, "
        "email, name, createdAt. Export TypeScript interface.\nDone when: User type exported "
        "and usable",
        "Task 2: Create User API endpoints\nFiles: src/features/user/api.ts\nGET /users (list), "
        "GET /users/:id (single), POST /users (create). Use User type from model.\nDone when: "
        "All CRUD operations work"]
    assert group.checks == ["Task 1: Create User model: tsc --noEmit passes",
                            "Task 2: Create User API endpoints: fetch tests pass for all "
                            "endpoints", "npm run build succeeds",
                            "API endpoints respond correctly"]
    assert "03-01: User feature works end-to-end" in imported.criteria


def test_gsd_dependency_on_a_plan_that_is_not_there():
    with pytest.raises(SpecError) as err:
        read_plan(FIX / "gsd/03-features", "gsd")
    assert err.value.message.startswith(str(FIX / "gsd/03-features/03-03-PLAN.md") + ":6: plan "
                                        "03-03 depends on 03-02")


# -- Taskmaster ----------------------------------------------------------------------------

def test_taskmaster_tags_each_with_their_own_dependencies():
    imported, spec = plan_of(FIX / "taskmaster/task-master-tags/tasks.json", "taskmaster")
    assert [x.id for x in spec.groups] == ["G1001", "G1003", "G1004", "G1007", "G1002", "G1008",
                                           "G2001", "G2002", "G2003", "G2004"]
    assert layers(spec) == [["G1001", "G1008", "G2001"], ["G1003", "G2002", "G2003"],
                            ["G1004", "G2004"], ["G1007"], ["G1002"]]
    assert spec.group("G2004").source_ids == ["cc-kiro-hooks:4", *(f"cc-kiro-hooks:4.{n}"
                                                                    for n in range(1, 6))]
    done = {x.gid for x in imported.units if x.done}
    assert done == {"G1001", "G1003", "G1004", "G1007", "G1002"}  # tm-start's done tasks


def test_taskmaster_subtasks_in_dependency_order_with_test_strategy():
    imported, spec = plan_of(FIX / "taskmaster/typst-pdf-export/tasks.json", "taskmaster")
    assert layers(spec) == [["G1"], ["G2"], ["G3", "G4"], ["G5"]]
    g3 = spec.group("G3")
    # 3.2 needs 3.1; 3.4 needs 3.1-3.3; 3.5 needs 3.1, 3.2
    assert g3.source_ids == ["3", "3.1", "3.3", "3.2", "3.4", "3.5"]
    assert g3.tasks[0].startswith("Implement Dependency Checker and External Tool Management\n\n"
                                  "Create system to verify and manage Pandoc and Typst")
    assert g3.tasks[1].startswith("Subtask 3.1: Create DependencyChecker class with platform "
                                  "detection\n\n")
    assert g3.checks[0].startswith("Test strategy: Test on Windows, macOS, and Linux")
    assert {x.gid for x in imported.units if x.done} == {"G1", "G2"}


def test_taskmaster_file_without_tags_and_plain_numbered_subtask_dependencies():
    imported, spec = plan_of(FIX / "taskmaster/task-master-legacy/tasks.json", "taskmaster")
    assert layers(spec) == [["G1"], ["G2", "G3", "G5"], ["G4", "G6", "G7"]]
    # task 7 depends on 3 and 5: sub-task 7.2's `5` is task 5; 7.3's `1` and 7.5's `1, 2, 4`
    # are its siblings
    assert spec.group("G7").source_ids == ["7", "7.1", "7.2", "7.4", "7.3", "7.5"]
    assert spec.group("G7").dependencies == ["G3", "G5"]


def test_taskmaster_unknown_dependency_names_the_line():
    with pytest.raises(SpecError) as err:
        read_plan(FIX / "taskmaster/task-master-unknown-dep/tasks.json", "taskmaster")
    assert err.value.line == 4
    assert "task 1 depends on 16, which is not a task of this list" in err.value.message


@pytest.mark.parametrize(("tasks", "words"), [
    ([{"id": 1, "dependencies": [2]}, {"id": 2, "dependencies": [1]}],
     "dependency cycle: 1 (line 3) -> 2 (line 4) -> 1 (line 3)"),
    ([{"id": 1, "subtasks": [{"id": 1, "dependencies": ["1.2"]},
                             {"id": 2, "dependencies": ["1.1"]}]}],
     "dependency cycle: 1.1 (line 3) -> 1.2 (line 3) -> 1.1 (line 3)"),
])
def test_taskmaster_cycles_name_the_lines(tmp_path, tasks, words):
    path = tmp_path / "tasks.json"
    path.write_text('{\n  "tasks": [\n' + ",\n".join(
        "    " + json.dumps(t) for t in tasks) + "\n  ]\n}\n")
    with pytest.raises(SpecError) as err:
        read_plan(path, "taskmaster")
    assert words in err.value.message


# -- every fixture -------------------------------------------------------------------------

READABLE = [
    ("speckit", "speckit/template-phases/tasks.md"), ("speckit", "speckit/mock-auth/tasks.md"),
    ("speckit", "speckit/code-review-fixes/tasks.md"),
    ("kiro", "kiro/player-trail-effect/tasks.md"), ("kiro", "kiro/tool-approval-layer/tasks.md"),
    ("kiro", "kiro/customer-support-rag/tasks.md"), ("kiro", "kiro/photo-albums/tasks.md"),
    ("kiro", "kiro/cc-sdd-template/tasks.md"),
    ("gsd", "gsd/01-foundation"), ("gsd", "gsd/03-features/03-01-PLAN.md"),
    ("taskmaster", "taskmaster/task-master-tags/tasks.json"),
    ("taskmaster", "taskmaster/typst-pdf-export/tasks.json"),
    ("taskmaster", "taskmaster/task-master-legacy/tasks.json"),
]


@pytest.mark.parametrize(("fmt", "rel"), READABLE)
def test_every_task_once_and_the_import_plans_the_same(fmt, rel):
    path = FIX / rel
    text = None if path.is_dir() else path.read_text(encoding="utf-8")
    assert detect(path, text) == fmt  # found from the content alone
    imported, spec = plan_of(path, fmt)
    held = [sid for x in spec.groups for sid in x.source_ids]
    assert len(held) == len(set(held))
    assert set(held) | set(imported.containers) == _task_ids(fmt, path)
    plan = build_plan(spec, mode="orchestrated")
    _no_shared_files(spec, plan)
    # no needless waits: as many dependency layers as the longest chain of dependencies
    assert len(plan.layers) == _longest_chain(spec)
    native = parse_spec(render(imported, rel), "imported.md")
    assert [(x.id, sorted(x.dependencies)) for x in native.groups] == \
        [(x.id, sorted(x.dependencies)) for x in spec.groups]
    assert compute_layers(native.groups) == plan.layers


def _task_ids(fmt: str, path: Path) -> set[str]:
    """The task ids the plan's files hold, read with a plain pattern per format."""
    if fmt == "taskmaster":
        data = json.loads(path.read_text(encoding="utf-8"))
        tags = [(None, data)] if "tasks" in data else list(data.items())
        prefix = len(tags) > 1
        return {f"{tag + ':' if prefix else ''}{t['id']}{'.' + str(s['id']) if s else ''}"
                for tag, holder in tags for t in holder["tasks"]
                for s in [None, *(t.get("subtasks") or [])]}
    if fmt == "gsd":
        files = sorted(path.glob("*-PLAN.md")) if path.is_dir() else [path]
        out = set()
        for f in files:
            plan = f.name.removesuffix("-PLAN.md")
            count = len(re.findall(r"<task\b", f.read_text(encoding="utf-8")))
            out |= {plan, *(f"{plan}#{n}" for n in range(1, count + 1))}
        return out
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # examples in fences are not tasks
    pattern = r"(?m)^\s*- \[[ xX]\]\*? (T\d+)\b" if fmt == "speckit" else \
        r"(?m)^\s*- \[[ xX]\]\*? (\d+(?:\.\d+)?)\.?\*?\s"
    ids = set(re.findall(pattern, text))
    if fmt == "kiro":
        ids |= set(re.findall(r"(?m)^#+ (\d+)\. ", text)) - {i for i in ids if "." not in i}
        heading_majors = set(re.findall(r"(?m)^#+ (\d+)\. ", text))
        ids -= heading_majors
    return ids


def _longest_chain(spec) -> int:
    deps = {x.id: x.dependencies for x in spec.groups}
    depth: dict[str, int] = {}

    def level(gid: str) -> int:
        if gid not in depth:
            depth[gid] = 1 + max((level(d) for d in deps[gid]), default=0)
        return depth[gid]

    return max(level(x) for x in deps)


def _no_shared_files(spec, plan) -> None:
    for wave in plan.waves:
        seen: dict[str, str] = {}
        for gid in wave.groups:
            for f in spec.group(gid).files:
                assert f not in seen, f"{gid} and {seen[f]} share {f} in wave {wave.label}"
                seen[f] = gid


# -- what cannot be run as written ---------------------------------------------------------

SPECKIT_HEAD = "# Tasks: X\n\n## Phase 1: Setup\n\n"
GSD_HEAD = "---\nphase: 01-x\nplan: 01\nwave: 1\ndepends_on: []\n---\n\n<tasks>\n"


@pytest.mark.parametrize(("fmt", "name", "text", "line", "words"), [
    ("speckit", "tasks.md", "# Tasks: X\n\n- [ ] T001 Create a.py\n\n## Phase 1: Setup\n", 3,
     "task T001 fits no phase"),
    ("speckit", "tasks.md", "# Tasks: X\n\n## Phase 3: User Story 1 - A (Priority: P1)\n\n"
     "- [ ] T001 [US2] Create a.py\n", 5, "labelled US2 but sits in phase"),
    ("speckit", "tasks.md", SPECKIT_HEAD + "- [ ] T001 Create a.py (depends on T002)\n"
     "- [ ] T002 Create b.py\n", 5, "dependency cycle: T001 (line 5) -> T002 (line 6) -> T001"),
    ("speckit", "tasks.md", SPECKIT_HEAD + "- [ ] T001 Create a.py (depends on T009)\n", 5,
     "T001 depends on T009, which is not a task of this plan"),
    ("kiro", "tasks.md", "# Implementation Plan\n\n- [ ] 1. A\n- [ ] 2.1 B\n", 4,
     "task 2.1 fits no task: it is not under task 2"),
    ("kiro", "tasks.md", "# Implementation Plan\n\n- [ ] 1. A\n  - [ ] 1.1 B\n"
     "    - [ ] 1.1.1 C\n", 5, "task 1.1.1 nests deeper than Kiro's two levels"),
    ("kiro", "tasks.md", "# Implementation Plan\n\n- [ ] 1. A\n  - _Depends: 9_\n", 3,
     "1 depends on 9, which is not a task of this plan"),
    ("gsd", "01-01-PLAN.md", GSD_HEAD + '<task type="auto"><name>A</name><action>a</action>'
     '</task>\n<task type="checkpoint:decision" gate="blocking"><decision>x</decision>'
     "</task>\n</tasks>\n", 10, "task 2 is a checkpoint:decision"),
    ("gsd", "02-01-PLAN.md", GSD_HEAD + '<task type="auto"><name>A</name></task>\n</tasks>\n', 2,
     "says it belongs to phase 01-x: it fits no phase"),
])
def test_a_plan_that_cannot_run_as_written_names_the_line(tmp_path, fmt, name, text, line,
                                                          words):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as err:
        read_plan(path, fmt)
    assert err.value.line == line, err.value.message
    assert words in err.value.message
    assert err.value.exit_code == 2
