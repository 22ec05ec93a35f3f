"""The auditor's verdict model: lenient about spellings, strict about meaning, and every
problem named by its field (as the auditor is told when its verdict is refused)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from agentrun.audit.verdict import AuditVerdict
from agentrun.tools.tooldef import field_problems


def test_every_field():
    v = AuditVerdict.model_validate({
        "status": "NEEDS_DECOMPOSITION", "critical_issues": ["too big"],
        "recommendations": ["name the files"], "dimensions": {"clarity": "PASS"},
        "task_groups": [{"id": "G1", "title": "Parser", "tasks": ["parse"], "files": ["a.py"]},
                        {"id": "G2", "tasks": ["cli"], "dependencies": ["G1"]}],
        "comment": "split it"})
    assert v.status == "NEEDS_DECOMPOSITION"
    assert v.critical_issues == ["too big"] and v.recommendations == ["name the files"]
    assert [(g.id, g.dependencies) for g in v.task_groups] == [("G1", []), ("G2", ["G1"])]
    assert v.task_groups[0].files == ["a.py"] and v.comment == "split it"


def test_lenient_spellings():
    v = AuditVerdict.model_validate({
        "verdict": "needs revision",
        "critical": [{"title": "Vague criterion", "detail": "say how fast"}],
        "task_groups": [{"id": "g02", "tasks": ["x"], "dependencies": "Group 1, G3"},
                        {"id": 1, "tasks": ["y"], "dependencies": "—"}],
        "dimensions": [{"name": "clarity", "result": "CONCERN", "note": "vague"}],
    })
    assert v.status == "NEEDS_REVISION"
    assert v.critical_issues == ["**Vague criterion**: say how fast"]
    assert [(g.id, g.dependencies) for g in v.task_groups] == [("G2", ["G1", "G3"]), ("G1", [])]
    assert v.dimensions == {"clarity": "CONCERN — vague"}


@pytest.mark.parametrize(("data", "says"), [
    ({"status": "MAYBE"}, "status: Input should be 'APPROVED', 'NEEDS_REVISION' or "
                          "'NEEDS_DECOMPOSITION'"),
    ({"critical_issues": []}, "status: missing (required)"),
    ({"status": "APPROVED", "critical_issues": ["x"]}, "APPROVED but 1 critical"),
    ({"status": "APPROVED", "task_groups": [{"id": "Setup", "tasks": ["x"]}]},
     "task_groups.0.id: group id 'Setup' is not of the form G1"),
    ({"status": "APPROVED", "task_groups": [{"id": "G1", "tasks": []}]},
     "task_groups.0.tasks: List should have at least 1 item"),
    ({"status": "APPROVED", "task_groups": [{"id": "G1", "tasks": ["a"]},
                                            {"id": "G01", "tasks": ["b"]}]},
     "G1 more than once"),
])
def test_invalid_verdicts_are_named_by_field(data: dict[str, Any], says: str):
    with pytest.raises(ValidationError) as err:
        AuditVerdict.model_validate(data)
    assert any(says in p for p in field_problems(err.value)), field_problems(err.value)


def test_unknown_dependency_is_kept_for_the_planner_to_reject():
    v = AuditVerdict.model_validate({"status": "APPROVED", "task_groups": [
        {"id": "G1", "tasks": ["a"], "dependencies": ["setup"]}]})
    assert v.task_groups[0].dependencies == ["setup"]
