"""The README's first day, step by step through the entry point, against the fake model server
(the real Anthropic SDK on 127.0.0.1): a small Python package in a `src/` layout with its own
tests, a `.venv` inside the project with the package installed editable (`pip install -e .`),
then `init` (which finds the test command and ignores the `.venv`), `new`, the spec's task
groups written, `audit --static` (which makes the spec `audited`), `plan`, `run`, `review`
and `status` — and the work merged without a single manual commit.

The editable install points Python at the main checkout's `src/`: each worker's own test
(which imports the module it just wrote) passes only because its commands import its own
worktree's `src/` first — in the sandbox too, where the main checkout is out of sight.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import yaml
from clirun import agentrun
from fake_model_server import FakeModelServer, RecordedRequest, Reply
from gitutil import init_repo, run_git
from test_review_cli import met

from agentrun.sandbox.jail import unavailable_reason

PYPROJECT = """[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "calc"
version = "0.1.0"

[tool.hatch.build]
dev-mode-dirs = ["src"]

[tool.pytest.ini_options]
testpaths = ["tests"]
"""
CALC = "def add(a, b):\n    return a + b\n"
TEST_ADD = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
SUB = "def sub(a, b):\n    return a - b\n"
MUL = "def mul(a, b):\n    return a * b\n"
TEST_SUB = "from calc.sub import sub\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n"
TEST_MUL = "from calc.mul import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"
TEST_OPS = ("from calc.mul import mul\nfrom calc.sub import sub\n\n\ndef test_ops():\n"
            "    assert (sub(5, 3), mul(2, 3)) == (2, 6)\n")
SPEC = ".specflow/specs/SPEC-001.md"
KEY = "sk-ant-first-day"

# What the user writes into the template `new` made: the task, the files and three task groups
# in two waves (G1 and G2 side by side, then G3).
TASK = "Add `sub` and `mul` to calc, each in a module of its own, with tests."
FILES = """### Files to Create

- `src/calc/sub.py` — `sub(a, b)`, tested by `tests/test_sub.py`
- `src/calc/mul.py` — `mul(a, b)`, tested by `tests/test_mul.py`
- `tests/test_ops.py` — tests for both

"""
GROUPS = """| Group | Title | Tasks | Dependencies |
|-------|-------|-------|--------------|
| G1 | Subtraction | Create `src/calc/sub.py` with `sub(a, b)` and `tests/test_sub.py` | — |
| G2 | Multiplication | Create `src/calc/mul.py` with `mul(a, b)` and `tests/test_mul.py` | — |
| G3 | Tests | Create `tests/test_ops.py` testing `sub` and `mul` | G1, G2 |
"""


def written_spec(text: str) -> str:
    text = re.sub(r"(## Task\n\n).*?\n\n", lambda m: f"{m.group(1)}{TASK}\n\n", text,
                  count=1, flags=re.S)
    text = re.sub(r"### Files to Create\n.*?(?=## Acceptance Criteria)", FILES, text,
                  flags=re.S)
    return re.sub(r"\| Group \| Title .*?(?=\n### Execution Plan)", GROUPS, text, flags=re.S)


def write(path: str, content: str) -> dict[str, Any]:
    return {"name": "write_file", "arguments": {"path": path, "content": content}}


def submit(output: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": "submit_result", "arguments": {
        "status": "complete", "summary": "done", "deviations": [],
        "criteria_met": [] if output else ["every file exists"],
        **({"output": output} if output else {})}}


USAGE = {"input_tokens": 1000, "output_tokens": 100}
TURNS = {  # by who asks: each group's worker, then the reviewer
    "G1": [write("src/calc/sub.py", SUB), write("tests/test_sub.py", TEST_SUB), submit()],
    "G2": [write("src/calc/mul.py", MUL), write("tests/test_mul.py", TEST_MUL), submit()],
    "G3": [write("tests/test_ops.py", TEST_OPS), submit()],
    "reviewer": [submit({"criteria": [met(1, "src/calc/sub.py:1 and src/calc/mul.py:1"),
                                      met(2, "tests/test_ops.py passes")],
                         "findings": [], "summary": "Both functions, tested."})],
}


def answer(request: RecordedRequest) -> Reply:
    """Each request by who sends it (the reviewer's instructions, else the group named in the
    first message) and how many turns its conversation holds: the parallel workers' requests
    come in any order."""
    body = request.body or {}
    messages = body.get("messages") or []
    who = "reviewer" if "independent code reviewer" in json.dumps(body.get("system")) else \
        (re.findall(r"\bG\d\b", json.dumps(messages[:1])) or ["?"])[0]
    done = sum(1 for m in messages if m.get("role") == "assistant")
    turns = TURNS.get(who, [])
    if done >= len(turns):
        return Reply(text=f"nothing more for {who}", usage=USAGE)
    return Reply(tool_calls=[turns[done]], usage=USAGE)


def editable_venv(root: Path, shims: Path) -> dict[str, str]:
    """`.venv` inside the project with the project installed editable by pip (offline: the
    build backend comes from this test environment), and the PATH of a shell where it is
    activated. `python` is a shim that runs the venv's python with pytest's plugin autoload
    off, so the project's pytest loads none of this environment's plugins."""
    venv = root / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "_test_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # pip, pytest
    subprocess.run([str(venv / "bin/python"), "-m", "pip", "install", "-q", "--no-index",
                    "--no-deps", "--no-build-isolation", "--disable-pip-version-check", "-e",
                    str(root)], check=True, capture_output=True)
    shims.mkdir()
    for name in ("python", "python3"):
        (shims / name).write_text(f'#!/bin/sh\nPYTEST_DISABLE_PLUGIN_AUTOLOAD=1 exec '
                                  f'"{venv}/bin/python" "$@"\n')
        (shims / name).chmod(0o755)
    return {"PATH": f"{shims}{os.pathsep}{venv}/bin{os.pathsep}{os.environ['PATH']}",
            "VIRTUAL_ENV": str(venv)}


def test_the_readme_first_day_walk(tmp_path):
    root = init_repo(tmp_path / "calc-project", {
        "pyproject.toml": PYPROJECT, "src/calc/__init__.py": CALC,
        "tests/test_calc.py": TEST_ADD, "README.md": "# calc\n"})
    first = run_git(root, "rev-parse", "HEAD")
    env = editable_venv(root, tmp_path / "shims")
    # the trap is set: outside the project, `import calc` finds the main checkout's src/
    where = subprocess.run(["python", "-c", "import calc; print(calc.__file__)"], cwd=tmp_path,
                           env={**os.environ, **env}, capture_output=True, text=True)
    assert where.stdout.strip() == str(root / "src/calc/__init__.py"), where.stderr

    init = agentrun("init", cwd=root, env=env)
    assert init.returncode == 0, init.stderr
    assert "validation command: python -m pytest -q (found from pyproject.toml)" in init.stdout
    assert "put their own worktree's src/ first on PYTHONPATH (the editable install" \
        in init.stdout
    assert ".venv/" in (root / ".gitignore").read_text()
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
    assert "SPEC-001: status draft → audited" in audit.stdout  # a passing draft is audited
    assert re.search(r"^status: audited$", spec.read_text(), re.M)
    assert "**Status:** audited" in (root / ".specflow/STATE.md").read_text()

    plan = agentrun("plan", "--json", cwd=root)  # the active spec, no model key needed
    assert plan.returncode == 0, plan.stderr
    assert plan.json["plan"]["mode"] == "orchestrated"
    waves = [[b["groups"] for b in w["batches"]] for w in plan.json["plan"]["waves"]]
    assert waves == [[["G1"], ["G2"]], [["G3"]]]

    with FakeModelServer(responder=answer) as server:
        url = server.base_url
        model = {**env, "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": url}
        run = agentrun("run", "--yes", "--json", "--no-review", cwd=root, env=model)
        assert run.returncode == 0, run.stderr
        assert run_git(root, "status", "--porcelain") == ""  # the .venv is ignored
        review = agentrun("review", "--json", cwd=root, env=model)
        assert review.returncode == 0, review.stderr
    doc = run.json
    assert doc["status"] == "complete", doc
    assert {g["status"] for g in doc["groups"].values()} == {"complete"}
    assert [g["attempts"] for g in doc["groups"].values()] == [1, 1, 1]  # no retry needed
    assert doc["provider"] == "anthropic" and doc["usage"]["input_tokens"] == 8000
    if unavailable_reason() is None:  # where the main checkout's src/ is out of sight
        assert doc["sandbox"] == "on (bubblewrap)"
    assert "agentrun: commit SPEC-001 and scaffolding before run" in run.stderr
    assert "not audited" not in run.stderr and "not validated" not in run.stderr
    assert f"model endpoint: {url}/v1/models answered (HTTP 200" in run.stderr
    assert len(server.preflights) == 1 and server.preflights[0].headers["x-api-key"] == KEY
    assert review.json["result"] == "APPROVED" and review.json["frontmatter_status"] == "done"

    # the work is merged and checked in; every commit since the project's own is agentrun's
    for path, text in (("src/calc/sub.py", SUB), ("src/calc/mul.py", MUL),
                       ("tests/test_ops.py", TEST_OPS)):
        assert run_git(root, "show", f"HEAD:{path}") == text.rstrip("\n")
    # the review kept its verdict in the run's record and wrote it into the spec and STATE.md,
    # for the next commit
    assert run_git(root, "status", "--porcelain").split() == [
        "M", ".specflow/STATE.md", "M", ".specflow/execution/SPEC-001-state.json",
        "M", ".specflow/specs/SPEC-001.md"]
    # topological order: commits made within the same second have no order by date
    subjects = run_git(root, "log", "--topo-order", "--format=%s", f"{first}..HEAD").splitlines()
    assert subjects[-1] == "agentrun: commit SPEC-001 and scaffolding before run"
    assert "status: done" in spec.read_text()

    status = agentrun("status", cwd=root)
    assert status.returncode == 0, status.stderr
    assert "Active specification: SPEC-001" in status.stdout
    assert re.search(r"Last run of SPEC-001: \S+ — complete", status.stdout), status.stdout
    unknown = agentrun("status", "SPEC-999", cwd=root)
    assert unknown.returncode == 2 and "spec not found: SPEC-999" in unknown.stderr
