"""Planning rules on Spec objects built directly, independent of the parser."""

from pathlib import Path

import pytest

from agentrun.core.errors import PlanError
from agentrun.plan import build_plan, compute_layers, make_batches
from agentrun.spec.model import Section, Spec, TaskGroup


def spec_of(*groups: TaskGroup, declared: dict[str, int] | None = None, tasks_section=True):
    sections = [Section("Implementation Tasks", 2, 0, 1, "")] if tasks_section else []
    return Spec(path=Path("SPEC-9.md"), id="SPEC-9", title="t", text="", sections=sections,
                groups=list(groups), declared_waves=declared or {})


def g(gid, *deps, files=()):
    return TaskGroup(id=gid, title=gid, dependencies=list(deps), files=list(files))


def test_three_wave_plan_is_orchestrated():
    spec = spec_of(g("G1"), g("G2"), g("G3"), g("G4", "G1", "G2"), g("G5", "G3", "G4"))
    plan = build_plan(spec)
    assert plan.mode == "orchestrated"
    assert [w.groups for w in plan.waves] == [["G1", "G2", "G3"], ["G4"], ["G5"]]
    assert [len(w.batches) for w in plan.waves] == [3, 1, 1]
    assert plan.workers == 5


def test_layers_keep_spec_order_not_alphabetical():
    spec = spec_of(g("G10"), g("G2"), g("G3", "G10"))
    assert compute_layers(spec.groups) == [["G10", "G2"], ["G3"]]


@pytest.mark.parametrize("groups, reason", [
    ((), "no Implementation Tasks"),
    ((g("G1"),), "only one task group"),
    ((g("G1"), g("G2", "G1"), g("G3", "G2")), "all sequential"),
])
def test_single_mode_cases(groups, reason):
    spec = spec_of(*groups, tasks_section=bool(groups))
    plan = build_plan(spec)
    assert plan.mode == "single"
    assert reason in plan.mode_reason
    assert len(plan.waves) == 1 and len(plan.waves[0].batches) == 1
    assert plan.waves[0].groups == [x.id for x in groups]


def test_mode_override_both_ways():
    parallel = spec_of(g("G1"), g("G2"))
    forced = build_plan(parallel, mode="single")
    assert forced.mode == "single" and forced.detected_mode == "orchestrated"
    assert "--mode single" in forced.mode_reason
    sequential = spec_of(g("G1"), g("G2", "G1"))
    assert build_plan(sequential, mode="orchestrated").waves[1].groups == ["G2"]


def test_cycle_names_the_chain():
    spec = spec_of(g("G1"), g("G2", "G4"), g("G3", "G2"), g("G4", "G3"))
    with pytest.raises(PlanError) as err:
        build_plan(spec)
    assert "G2 -> G4 -> G3 -> G2" in err.value.message


def test_self_dependency_is_a_cycle():
    with pytest.raises(PlanError, match="G1 -> G1"):
        build_plan(spec_of(g("G1", "G1"), g("G2")))


def test_unknown_dependency_names_both_groups():
    spec = spec_of(g("G1"), g("G2", "G7"))
    with pytest.raises(PlanError) as err:
        build_plan(spec)
    assert "G2" in err.value.message and "G7" in err.value.message
    assert err.value.exit_code == 2


def test_declared_wave_drift_is_a_warning():
    spec = spec_of(g("G1"), g("G2", "G1"), declared={"G1": 1, "G2": 1})
    plan = build_plan(spec)
    drift = [f for f in plan.findings if f.code == "wave-drift"]
    assert len(drift) == 1 and drift[0].group == "G2"
    assert "declared in wave 1" in drift[0].message and "wave 2" in drift[0].message


def test_shared_file_splits_wave_into_subwaves():
    spec = spec_of(g("G1", files=["src/a.py"]), g("G2", files=["src/a.py", "src/b.py"]),
                   g("G3", files=["src/c.py"]), g("G4", "G1", "G2", "G3"))
    plan = build_plan(spec)
    assert [(w.label, w.groups) for w in plan.waves] == [
        ("1a", ["G1", "G3"]), ("1b", ["G2"]), ("2", ["G4"])]
    assert any(f.code == "file-overlap" and "src/a.py" in f.message for f in plan.findings)


def test_batches_cap_three_groups_per_worker():
    ids = [f"G{i}" for i in range(1, 11)]
    assert [b.groups for b in make_batches(ids)] == [[i] for i in ids]
    packed = make_batches(ids, max_workers=2)
    assert all(len(b.groups) <= 3 for b in packed)
    assert sum(len(b.groups) for b in packed) == 10 and len(packed) == 4
    assert [b.groups for b in make_batches(ids[:6], max_workers=3)] == [
        ["G1", "G2"], ["G3", "G4"], ["G5", "G6"]]


def test_plan_serialises_to_json():
    import json

    plan = build_plan(spec_of(g("G1"), g("G2")))
    doc = json.loads(json.dumps(plan.to_dict()))
    assert doc["mode"] == "orchestrated" and doc["workers"] == 2
    assert doc["waves"][0]["parallelism"] == 2
