"""A group's fingerprint changes with what its worker is asked to do, and only with that."""

from __future__ import annotations

from agentrun.spec import parse_spec
from agentrun.spec.fingerprint import group_fingerprints

TABLE = """---
id: SPEC-7
---
# Fingerprints

## Implementation Tasks

| Group | Title | Tasks | Dependencies |
|---|---|---|---|
| G1 | Sub | Create `calc/sub.py` with `sub(a, b)` | — |
| G2 | Mul | Create `calc/mul.py` with `mul(a, b)` | — |
| G3 | Tests | Test `sub`; test `mul` in `tests/test_ops.py` | G1, G2 |
"""

HEADINGS = """---
id: SPEC-7
---
# Fingerprints

## Implementation Tasks

### G1: Sub

Create `calc/sub.py` with a function sub that subtracts its second argument from its first.

### G2: Mul (depends on G1)

- Create `calc/mul.py`
"""


def _fp(text: str) -> dict[str, str]:
    return group_fingerprints(parse_spec(text, "SPEC-7.md"))


def test_fingerprints_follow_tasks_files_and_dependencies_only():
    base = _fp(TABLE)
    assert list(base) == ["G1", "G2", "G3"]
    assert all(len(v) == 64 for v in base.values()) and len(set(base.values())) == 3

    retitled = _fp(TABLE.replace("| Sub |", "| Subtraction |"))
    assert retitled == base  # a title is no work
    realigned = _fp(TABLE.replace("| G1 | Sub | Create", "|  G1  |  Sub  |   Create")
                    .replace("G1, G2 |", "G2,G1 |"))
    assert realigned == base  # table padding, dependency order

    reworded = _fp(TABLE.replace("with `sub(a, b)`", "with `sub(a, b, c)`"))
    assert reworded["G1"] != base["G1"]
    assert {k: v for k, v in reworded.items() if k != "G1"} == {"G2": base["G2"],
                                                                  "G3": base["G3"]}
    fewer_deps = _fp(TABLE.replace("| G1, G2 |", "| G1 |"))
    assert fewer_deps["G3"] != base["G3"] and fewer_deps["G1"] == base["G1"]
    other_file = _fp(TABLE.replace("`calc/mul.py`", "`calc/times.py`"))
    assert other_file["G2"] != base["G2"]
    reordered = _fp(TABLE.replace("Test `sub`; test `mul`", "test `mul`; Test `sub`"))
    assert reordered["G3"] != base["G3"]  # task order can be an instruction


def test_reflowing_a_heading_paragraph_keeps_the_fingerprint():
    base = _fp(HEADINGS)
    reflowed = _fp(HEADINGS.replace("with a function sub that", "with a function sub\nthat")
                   .replace("its second argument", "its  second\n   argument"))
    assert reflowed == base
    changed = _fp(HEADINGS.replace("its first.", "its first, rounded."))
    assert changed["G1"] != base["G1"] and changed["G2"] == base["G2"]
    assert _fp(HEADINGS.replace("(depends on G1)", ""))["G2"] != base["G2"]
