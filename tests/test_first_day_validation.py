""""complete" says what was checked: `init` finds the test command, a run without one says
"not validated", and a base that fails the command already stops the run before any worker."""

from __future__ import annotations

import json
import sys

import pytest
import yaml
from clirun import agentrun
from gitutil import init_repo, run_git
from runkit import make_project, scripted, spec_text, submit, writes

# plugins are not loaded: importing the ones installed here (hypothesis, benchmark) costs more
# than the tiny suites these fixtures validate
PYTEST = f"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {sys.executable} -m pytest -q -p no:cacheprovider"
FAILING_BASE = {".gitignore": ".specflow/runs/\n__pycache__/\n",
                "tests/test_base.py": "def test_old_bug():\n    assert 1 == 2\n\n\n"
                                      "def test_fine():\n    pass\n"}


@pytest.mark.parametrize(("files", "command"), [
    ({"tests/test_app.py": "def test_x():\n    pass\n"}, "python -m pytest -q"),
    ({"pyproject.toml": "[tool.pytest.ini_options]\naddopts = '-q'\n"}, "python -m pytest -q"),
    ({"package.json": json.dumps({"scripts": {"test": "jest"}})}, "npm test"),
    ({"package.json": json.dumps({"scripts": {
        "test": "echo \"Error: no test specified\" && exit 1"}})}, None),
    ({"Cargo.toml": "[package]\nname = 'x'\n"}, "cargo test"),
    ({"go.mod": "module example.com/x\n"}, "go test ./..."),
    ({"Makefile": "build:\n\tcc x.c\n\ntest: build\n\t./run-tests\n"}, "make test"),
    ({"Makefile": "TEST := 1\nbuild:\n\tcc x.c\n"}, None),
    ({"README.md": "# nothing to test\n"}, None),
])
def test_init_writes_the_detected_test_command_as_validation_command(tmp_path, files, command):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    proc = agentrun("init", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.json["validation_command"] == command
    config = yaml.safe_load((tmp_path / ".specflow/config.yaml").read_text()) or {}
    assert config.get("validation_command") == command
    project_md = (tmp_path / ".specflow/PROJECT.md").read_text()
    assert (f"Test command: `{command}`" if command else "Test command: (none found") \
        in project_md
    if command is None:
        assert "not validated" in (tmp_path / ".specflow/config.yaml").read_text()


def test_a_run_without_validation_command_says_not_validated(tmp_path):
    root = make_project(tmp_path / "p", "SPEC-60", spec_text("SPEC-60", [("G1", [], "a.py")]),
                        {"groups": {"G1": writes("a.py", "A = 1\n")}})
    proc = agentrun("run", "SPEC-60", "--provider", "scripted", "--script",
                    ".specflow/script.yaml", "--yes", "--no-review", cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert "Validation: none — results will be not validated" in proc.stdout
    assert "Result: complete · not validated ·" in proc.stdout
    spec = (root / ".specflow/specs/SPEC-60.md").read_text()
    assert "**Result:** complete (not validated: no validation command)" in spec


def test_a_failing_base_stops_the_run_before_any_worker(tmp_path):
    root = make_project(tmp_path / "p", "SPEC-61", spec_text("SPEC-61", [("G1", [], "a.py")]),
                        {"groups": {"G1": writes("a.py", "A = 1\n")}}, files=FAILING_BASE)
    head = run_git(root, "rev-parse", "HEAD")
    state_md = (root / ".specflow/STATE.md").read_text()
    proc = agentrun("run", "SPEC-61", *scripted("--validate", PYTEST), cwd=root)
    assert proc.returncode == 1, proc.stderr
    error = proc.json["error"]
    assert "fails on the base commit" in error["message"]
    assert "test_old_bug" in error["message"]  # the output's tail
    assert "--allow-failing-base" in error["hint"]
    assert "Traceback" not in proc.stderr
    assert run_git(root, "rev-parse", "HEAD") == head
    assert not (root / "a.py").exists()
    assert (root / ".specflow/STATE.md").read_text() == state_md
    assert not (root / ".specflow/execution").exists()  # no worker, no state: nothing spent


def test_allow_failing_base_judges_merges_by_no_new_failures(tmp_path):
    groups = [("G1", [], "a.py"), ("G2", ["G1"], "tests/test_new.py")]
    script = {"groups": {
        "G1": writes("a.py", "A = 1\n"),
        "G2": writes("tests/test_new.py", "def test_new_bug():\n    assert False\n"),
    }}
    root = make_project(tmp_path / "p", "SPEC-62", spec_text("SPEC-62", groups), script,
                        files=FAILING_BASE)
    proc = agentrun("run", "SPEC-62", *scripted("--validate", PYTEST, "--allow-failing-base",
                                                  "--mode", "orchestrated"),
                    cwd=root)
    assert proc.returncode == 1, proc.stderr
    result = proc.json
    first, second = result["integration"]
    assert first["ok"] and "no new failures" in first["note"]  # test_old_bug only
    assert not second["ok"] and "test_new_bug" in second["output"]
    assert result["groups"]["G1"]["status"] == "complete"
    assert result["groups"]["G2"]["status"] == "failed"
    assert any("--allow-failing-base" in w for w in result["warnings"])
    assert (root / "a.py").exists() and not (root / "tests/test_new.py").exists()


def test_npm_workspace_workers_import_their_own_packages(tmp_path):
    """npm workspaces link their packages from node_modules, relative to it: `init` gives
    every worktree its own copy (worktree_copy), whose links lead to that worktree's packages.
    The worker's test, which imports the function it adds to a workspace package, passes only
    with its own change (without node_modules it would not find the package at all)."""
    package = {"name": "root", "private": True, "workspaces": ["packages/*"],
               "scripts": {"test": "node --test"}}
    root = init_repo(tmp_path / "js", {
        "package.json": json.dumps(package), ".gitignore": "node_modules/\n",
        "packages/util/package.json": json.dumps({"name": "util-pkg", "version": "1.0.0"}),
        "packages/util/index.js": "module.exports = {};\n"})
    (root / "node_modules").mkdir()  # as `npm install` links a workspace: relative to the copy
    (root / "node_modules/util-pkg").symlink_to("../packages/util")
    init = agentrun("init", "--json", cwd=root)
    assert init.json["worktree_copy"] == ["node_modules"] and \
        init.json["validation_command"] == "npm test"
    assert "worktree_copy: [node_modules]" in (root / ".specflow/config.yaml").read_text()
    (root / ".specflow/specs/SPEC-70.md").write_text(spec_text("SPEC-70", [
        ("G1", [], "packages/util/index.js")]))
    run_git(root, "add", "-A")
    run_git(root, "commit", "-qm", "spec")
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"groups": {"G1": [
        {"tool_calls": [
            {"name": "write_file", "arguments": {
                "path": "packages/util/index.js",
                "content": "module.exports = { double: (n) => 2 * n };\n"}},
            {"name": "write_file", "arguments": {
                "path": "test/double.test.js",
                "content": "const test = require('node:test');\nconst assert = "
                           "require('node:assert');\nconst { double } = require('util-pkg');"
                           "\ntest('double', () => assert.strictEqual(double(2), 4));\n"}}]},
        submit("complete", "double added", ["every file exists"])]}}))
    proc = agentrun("run", "SPEC-70", "--provider", "scripted", "--script", str(script), "--yes",
                    "--no-review", "--json", cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert proc.json["groups"]["G1"]["status"] == "complete"
    assert proc.json["groups"]["G1"]["attempts"] == 1  # its own check passed at once
    assert [c["ok"] for c in proc.json["integration"]] == [True]
