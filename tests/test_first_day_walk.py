"""The README's first day, step by step through the entry point: a small Python project with
tests, `init` (which finds the test command), `new`, the spec's task groups written, `audit
--static`, `plan`, `run` with the scripted model (workers and an approving reviewer) — and the
work merged without a single manual commit."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from clirun import agentrun, plain_python_env
from gitutil import init_repo, run_git
from runkit import writes
from test_review_cli import met, review_turn

CALC = "def add(a, b):\n    return a + b\n"
TEST_ADD = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
SUB = "def sub(a, b):\n    return a - b\n"
MUL = "def mul(a, b):\n    return a * b\n"
TEST_OPS = ("from calc.mul import mul\nfrom calc.sub import sub\n\n\ndef test_ops():\n"
            "    assert (sub(5, 3), mul(2, 3)) == (2, 6)\n")
SPEC = ".specflow/specs/SPEC-001.md"

# What the user writes into the template `new` made: the task, the files and three task groups
# in two waves (G1 and G2 side by side, then G3).
TASK = "Add `sub` and `mul` to calc, each in a module of its own, with tests."
FILES = """### Files to Create

- `calc/sub.py` — `sub(a, b)`
- `calc/mul.py` — `mul(a, b)`
- `tests/test_ops.py` — tests for both

"""
GROUPS = """| Group | Title | Tasks | Dependencies |
|-------|-------|-------|--------------|
| G1 | Subtraction | Create `calc/sub.py` with `sub(a, b)` | — |
| G2 | Multiplication | Create `calc/mul.py` with `mul(a, b)` | — |
| G3 | Tests | Create `tests/test_ops.py` testing `sub` and `mul` | G1, G2 |
"""


def written_spec(text: str) -> str:
    text = re.sub(r"(## Task\n\n).*?\n\n", lambda m: f"{m.group(1)}{TASK}\n\n", text,
                  count=1, flags=re.S)
    text = re.sub(r"### Files to Create\n.*?(?=## Acceptance Criteria)", FILES, text,
                  flags=re.S)
    return re.sub(r"\| Group \| Title .*?(?=\n### Execution Plan)", GROUPS, text, flags=re.S)


def session(path: Path) -> Path:
    """The scripted model's turns: each group's worker, then the reviewer approving."""
    review = review_turn([met(1, "calc/sub.py:1 and calc/mul.py:1 define them"),
                          met(2, "tests/test_ops.py passes under python -m pytest -q")])
    path.write_text(yaml.safe_dump({
        "groups": {"G1": writes("calc/sub.py", SUB), "G2": writes("calc/mul.py", MUL),
                   "G3": writes("tests/test_ops.py", TEST_OPS)},
        "agents": {"code-reviewer": [review]}}))
    return path


def test_the_readme_first_day_walk(tmp_path):
    root = init_repo(tmp_path / "calc-project", {
        "calc/__init__.py": CALC, "tests/test_calc.py": TEST_ADD, "README.md": "# calc\n"})
    first = run_git(root, "rev-parse", "HEAD")

    init = agentrun("init", cwd=root)
    assert init.returncode == 0, init.stderr
    assert "python -m pytest -q" in init.stdout + init.stderr
    config = yaml.safe_load((root / ".specflow/config.yaml").read_text())
    assert config["validation_command"] == "python -m pytest -q"

    new = agentrun("new", "Add sub and mul", cwd=root)
    assert new.returncode == 0, new.stderr
    assert SPEC in new.stdout + new.stderr
    assert "SPEC-001" in (root / ".specflow/STATE.md").read_text()
    spec = root / SPEC
    spec.write_text(written_spec(spec.read_text()))

    audit = agentrun("audit", "--static", cwd=root)
    assert audit.returncode == 0, audit.stdout + audit.stderr

    plan = agentrun("plan", "--json", cwd=root)  # the active spec, no model key needed
    assert plan.returncode == 0, plan.stderr
    assert plan.json["plan"]["mode"] == "orchestrated"
    waves = [[b["groups"] for b in w["batches"]] for w in plan.json["plan"]["waves"]]
    assert waves == [[["G1"], ["G2"]], [["G3"]]]

    script = session(tmp_path / "session.yaml")  # outside the repository, as a user keeps it
    # the project's pytest without this environment's own pytest plugins, as a user runs it
    run = agentrun("run", "--provider", "scripted", "--script", str(script), "--yes", "--json",
                   cwd=root, env=plain_python_env(tmp_path / "plain-python"))
    assert run.returncode == 0, run.stderr
    doc = run.json
    assert doc["status"] == "complete" and doc["review"]["result"] == "APPROVED"
    assert {g["status"] for g in doc["groups"].values()} == {"complete"}
    assert "agentrun: commit SPEC-001 and scaffolding before run" in run.stderr
    assert "not validated" not in run.stderr

    # the work is merged and checked in; every commit since the project's own is agentrun's
    for path, text in (("calc/sub.py", SUB), ("calc/mul.py", MUL), ("tests/test_ops.py", TEST_OPS)):
        assert run_git(root, "show", f"HEAD:{path}") == text.rstrip("\n")
    assert run_git(root, "status", "--porcelain") == ""
    # topological order: commits made within the same second have no order by date
    subjects = run_git(root, "log", "--topo-order", "--format=%s", f"{first}..HEAD").splitlines()
    assert subjects[-1] == "agentrun: commit SPEC-001 and scaffolding before run"
    assert "status: done" in spec.read_text()
