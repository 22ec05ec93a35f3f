"""The auditor's verdict: finding the JSON in a reply, validating it, naming what is wrong."""

from __future__ import annotations

import json

import pytest

from agentrun.audit.auditor import find_verdict
from agentrun.audit.verdict import VerdictError, parse_verdict


def test_bare_json_with_every_field():
    v = parse_verdict(json.dumps({
        "status": "NEEDS_DECOMPOSITION", "critical_issues": ["too big"],
        "recommendations": ["name the files"], "dimensions": {"clarity": "PASS"},
        "task_groups": [{"id": "G1", "title": "Parser", "tasks": ["parse"], "files": ["a.py"]},
                        {"id": "G2", "tasks": ["cli"], "dependencies": ["G1"]}],
        "comment": "split it"}))
    assert v.status == "NEEDS_DECOMPOSITION"
    assert v.critical_issues == ["too big"] and v.recommendations == ["name the files"]
    assert [(g.id, g.dependencies) for g in v.task_groups] == [("G1", []), ("G2", ["G1"])]
    assert v.task_groups[0].files == ["a.py"] and v.comment == "split it"


def test_fenced_json_after_prose_and_lenient_spellings():
    text = ("Here is my verdict.\n\n```json\n" + json.dumps({
        "verdict": "needs revision",
        "critical": [{"title": "Vague criterion", "detail": "say how fast"}],
        "task_groups": [{"id": "g02", "tasks": ["x"], "dependencies": "Group 1, G3"},
                        {"id": 1, "tasks": ["y"], "dependencies": "—"}],
        "dimensions": [{"name": "clarity", "result": "CONCERN", "note": "vague"}],
    }) + "\n```\n")
    v = parse_verdict(text)
    assert v.status == "NEEDS_REVISION"
    assert v.critical_issues == ["**Vague criterion**: say how fast"]
    assert [(g.id, g.dependencies) for g in v.task_groups] == [("G2", ["G1", "G3"]), ("G1", [])]
    assert v.dimensions == {"clarity": "CONCERN — vague"}


@pytest.mark.parametrize(("reply", "says"), [
    ("", "empty"),
    ("Looks good to me!", "no JSON object"),
    ('{"status": "APPROVED",', "does not parse"),
    ('{"status": "MAYBE"}', "status: must be one of APPROVED, NEEDS_REVISION"),
    ('{"critical_issues": []}', "status"),
    ('{"status": "APPROVED", "critical_issues": ["x"]}', "APPROVED but 1 critical"),
    ('{"status": "APPROVED", "task_groups": [{"id": "Setup", "tasks": ["x"]}]}',
     "not of the form G1"),
    ('{"status": "APPROVED", "task_groups": [{"id": "G1", "tasks": []}]}', "tasks"),
    ('{"status": "APPROVED", "task_groups": [{"id": "G1", "tasks": ["a"]}, '
     '{"id": "G01", "tasks": ["b"]}]}', "G1 more than once"),
    ('["APPROVED"]', "no JSON object"),
])
def test_malformed_replies_are_named(reply, says):
    with pytest.raises(VerdictError) as err:
        parse_verdict(reply)
    assert says in str(err.value)


def test_unknown_dependency_is_kept_for_the_planner_to_reject():
    v = parse_verdict('{"status": "APPROVED", "task_groups": '
                      '[{"id": "G1", "tasks": ["a"], "dependencies": ["setup"]}]}')
    assert v.task_groups[0].dependencies == ["setup"]


def test_find_verdict_takes_the_first_valid_candidate_and_the_most_telling_error():
    good = '{"status": "APPROVED"}'
    assert find_verdict(["Done.", good]).status == "APPROVED"
    with pytest.raises(VerdictError) as err:
        find_verdict(["Done.", '{"status": "LGTM"}', ""])
    assert "must be one of" in str(err.value)
    with pytest.raises(VerdictError) as err:
        find_verdict(["", ""])
    assert "empty" in str(err.value)
