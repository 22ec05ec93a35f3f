"""The run's rules without processes, git or files: blocking, resume, abort, final status."""

from __future__ import annotations

import pytest
from runkit import spec_text

from agentrun.core.status import RunStatus, Status
from agentrun.plan import Batch, build_plan
from agentrun.report.execution_state import GroupState, RunState, WaveState
from agentrun.run import scheduler
from agentrun.spec.fingerprint import group_fingerprints
from agentrun.spec.parse import parse_spec

# G1, G2 independent; G3 needs G1; G4 needs G2 and G3
SPEC = parse_spec(spec_text("SPEC-S", [("G1", [], "a.txt"), ("G2", [], "b.txt"),
                                       ("G3", ["G1"], "c.txt"),
                                       ("G4", ["G2", "G3"], "d.txt")]))


def state(**statuses: Status) -> RunState:
    plan = build_plan(SPEC, mode="orchestrated")
    run = RunState(run_id="r1", spec_id="SPEC-S", spec_path="s.md", mode="orchestrated",
                   base_commit="0" * 40, target_branch="main", started="now",
                   waves=[WaveState(number=w.number, label=w.label, groups=list(w.groups))
                          for w in plan.waves])
    for wave in plan.waves:
        for batch in wave.batches:
            for gid in batch.ids:
                run.groups[gid] = GroupState(id=gid, wave=wave.label, batch=batch.id,
                                             status=statuses.get(gid, Status.PENDING))
    return run


def wave_of(gid: str):
    return next(w for w in build_plan(SPEC, mode="orchestrated").waves if gid in w.groups)


@pytest.mark.parametrize("dep_status", [Status.FAILED, Status.BLOCKED, Status.INTERRUPTED,
                                        Status.PENDING])
def test_a_dependency_that_did_not_complete_blocks(dep_status):
    run = state(G1=dep_status, G2=Status.COMPLETE)
    triage = scheduler.Schedule(SPEC).triage(run, wave_of("G3"))
    assert triage.blocked == {"G3": ["G1"]}
    assert triage.todo == []


@pytest.mark.parametrize("dep_status", [Status.COMPLETE, Status.PARTIAL])
def test_a_dependency_that_landed_work_does_not_block(dep_status):
    run = state(G1=dep_status, G2=Status.COMPLETE)
    triage = scheduler.Schedule(SPEC).triage(run, wave_of("G3"))
    assert triage.blocked == {}
    assert [b.id for b in triage.todo] == ["G3"]


def test_blockers_are_named_in_group_order_and_ignore_the_batch_itself():
    run = state(G2=Status.FAILED, G3=Status.BLOCKED)
    schedule = scheduler.Schedule(SPEC)
    assert schedule.blockers(run, ["G4"]) == ["G2", "G3"]
    # single mode holds dependent groups in one batch: the worker orders them itself
    assert schedule.blockers(run, ["G1", "G3"]) == []


def test_a_resumed_wave_skips_batches_whose_groups_all_completed():
    run = state(G1=Status.COMPLETE, G2=Status.FAILED)
    triage = scheduler.Schedule(SPEC).triage(run, wave_of("G1"))
    assert triage.skipped == ["G1"]
    assert [b.id for b in triage.todo] == ["G2"]


def test_landing_order_follows_the_spec_not_the_wave():
    schedule = scheduler.Schedule(SPEC)
    batches = [Batch("G4", ["G4"]), Batch("G2_G3", ["G3", "G2"]), Batch("G1", ["G1"])]
    assert [b.id for b in schedule.landing_order(batches)] == ["G1", "G2_G3", "G4"]


def test_resume_adopts_only_complete_groups_whose_work_landed():
    old = state(G1=Status.COMPLETE, G2=Status.COMPLETE, G3=Status.FAILED)
    old.groups["G1"].commits, old.groups["G2"].commits = ["aaa"], ["bbb"]
    old.groups["G1"].wave = "old wave"
    new = state()
    scheduler.adopt(new, old, landed=lambda g: "aaa" in g.commits, changed={})
    assert new.resumed_from == "r1"
    assert new.groups["G1"].status == Status.COMPLETE
    assert new.groups["G1"].wave == "1"  # the new plan's wave
    assert new.groups["G2"].status == Status.PENDING  # complete, but its work is not in HEAD
    assert new.groups["G3"].status == Status.PENDING


def test_resume_runs_a_merged_group_again_when_its_task_or_a_dependency_changed():
    """G1's task was edited since the run that merged it: G1 runs again, and so does G3 and
    then G4, built on it; G2 is still the same task and is kept."""
    edited = parse_spec(spec_text("SPEC-S", [("G1", [], "a2.txt"), ("G2", [], "b.txt"),
                                             ("G3", ["G1"], "c.txt"),
                                             ("G4", ["G2", "G3"], "d.txt")]))
    old = state(G1=Status.COMPLETE, G2=Status.COMPLETE, G3=Status.COMPLETE,
                G4=Status.COMPLETE)
    old.fingerprints = group_fingerprints(SPEC)
    new = state()
    new.fingerprints = group_fingerprints(edited)
    assert new.fingerprints["G2"] == old.fingerprints["G2"]
    changed = scheduler.changed_groups(new, old, scheduler.Schedule(edited).dependencies)
    assert set(changed) == {"G1", "G3", "G4"}
    assert "its task changed since run r1" in changed["G1"]
    assert changed["G3"] == "its dependency G1 runs again"
    notes = scheduler.adopt(new, old, landed=lambda g: True, changed=changed)
    assert [n.split(",")[0] for n in notes] == ["G1", "G3", "G4"]
    assert {g: new.groups[g].status for g in new.groups} == {
        "G1": Status.PENDING, "G2": Status.COMPLETE, "G3": Status.PENDING,
        "G4": Status.PENDING}
    old.fingerprints = {}  # a run from before fingerprints were kept: its work is reused
    assert scheduler.changed_groups(new, old, scheduler.Schedule(edited).dependencies) == {}


def test_every_group_of_a_wave_failed_aborts_even_when_asked_to_continue():
    verdict = scheduler.wave_verdict("1", ["G1", "G2"], ["G1", "G2"], "continue",
                                     lambda failed: True)
    assert verdict.abort
    assert verdict.warning == "all groups of wave 1 failed; run aborted"


def test_failures_abort_with_on_failure_abort():
    assert scheduler.wave_verdict("1", ["G1", "G2"], ["G1"], "abort", None).abort
    assert not scheduler.wave_verdict("1", ["G1", "G2"], ["G1"], "continue", None).abort


def test_failures_ask_and_the_answer_decides():
    asked = []

    def ask(failed):
        asked.append(failed)
        return False

    assert scheduler.wave_verdict("1", ["G1", "G2"], ["G2"], "continue", ask).abort
    assert asked == [["G2"]]
    assert not scheduler.wave_verdict("1", ["G1", "G2"], ["G2"], "continue",
                                      lambda f: True).abort


def test_no_failures_never_asks():
    def ask(failed):
        raise AssertionError("asked")

    assert not scheduler.wave_verdict("1", ["G1"], [], "abort", ask).abort
    assert not scheduler.wave_verdict("1", [], [], "continue", ask).abort


@pytest.mark.parametrize(("statuses", "skipped", "interrupted", "expected"), [
    ({g: Status.COMPLETE for g in ("G1", "G2", "G3", "G4")}, False, False, RunStatus.COMPLETE),
    ({"G1": Status.COMPLETE, "G2": Status.FAILED}, False, False, RunStatus.PARTIAL),
    ({"G1": Status.PARTIAL, "G2": Status.FAILED}, False, False, RunStatus.PARTIAL),
    ({"G1": Status.FAILED, "G2": Status.FAILED}, False, False, RunStatus.FAILED),
    ({"G1": Status.COMPLETE, "G2": Status.FAILED}, True, False, RunStatus.ABORTED),
    ({g: Status.COMPLETE for g in ("G1", "G2", "G3", "G4")}, False, True,
     RunStatus.INTERRUPTED),
])
def test_final_status(statuses, skipped, interrupted, expected):
    run = state(**statuses)
    if skipped:
        run.waves[-1].status = "skipped"
    scheduler.settle(run, interrupted)
    assert scheduler.final_status(run, interrupted) == expected


def test_settle_ends_groups_that_never_ended():
    run = state(G1=Status.COMPLETE, G2=Status.RUNNING)
    scheduler.settle(run, interrupted=False)
    assert [run.groups[g].status for g in ("G1", "G2", "G3")] == \
        [Status.COMPLETE, Status.BLOCKED, Status.BLOCKED]
    run = state(G2=Status.RUNNING)
    scheduler.settle(run, interrupted=True)
    assert run.groups["G2"].status == Status.INTERRUPTED


def test_progress_texts():
    assert scheduler.wave_progress(1, 3) == "Wave 1/3 (0%)"
    assert scheduler.wave_progress(3, 3) == "Wave 3/3 (67%)"
    run = state(**{g: Status.COMPLETE for g in ("G1", "G2", "G3", "G4")})
    run.status = RunStatus.COMPLETE
    assert scheduler.final_position(run, False) == ("Complete", "review")
    run = state(G1=Status.COMPLETE, G2=Status.COMPLETE, G3=Status.PARTIAL)
    run.status = RunStatus.PARTIAL
    assert scheduler.final_position(run, False) == ("Failed (Wave 2)", "failed")
    run.status, run.current_wave = RunStatus.INTERRUPTED, 2
    assert scheduler.final_position(run, True) == ("Interrupted (Wave 2/3)", "interrupted")


def test_final_warnings_name_every_group_that_did_not_complete():
    run = state(G1=Status.COMPLETE, G2=Status.FAILED, G3=Status.BLOCKED, G4=Status.BLOCKED)
    run.status = RunStatus.PARTIAL
    run.warnings = ["earlier"]
    assert scheduler.final_warnings(run) == [
        "earlier", "run r1 ended partial: G2 failed, G3 blocked, G4 blocked"]
