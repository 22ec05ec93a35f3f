"""One name per setting: `retries`/`--retries` (fresh attempts after a failure) and
`request_retries` (the SDK's retries of one request); the old spellings still work, once warned.

What a setting did is read back from the worker's assignment, the JSON a worker is started with
(its field names are the contract and stay as they were)."""

from __future__ import annotations

import json
from pathlib import Path

from clirun import agentrun
from runkit import make_project, scripted, spec_text, writes

ONE = [("G1", [], "src/a.py")]


def project(tmp_path: Path, config: str = "") -> Path:
    script = {"groups": {"G1": writes("src/a.py", "# G1\n")}}
    return make_project(tmp_path / "p", "SPEC-1", spec_text("SPEC-1", ONE), script,
                        files={".specflow/config.yaml": config})


def assignment(root: Path) -> dict:
    [path] = (root / ".git/agentrun/runs").glob("*/workers/*/assignment.json")
    return json.loads(path.read_text())


def warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("warning:")]


def test_new_names_set_both_settings_without_a_warning(tmp_path):
    root = project(tmp_path, "retries: 5\nrequest_retries: 4\n")
    proc = agentrun("run", "SPEC-1", *scripted(), cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert not [w for w in warnings(proc.stderr) if "deprecated" in w]
    doc = assignment(root)
    assert (doc["limits"]["retries"], doc["provider"]["request_retries"]) == (5, 4)


def test_the_retries_flag_wins_over_the_config(tmp_path):
    root = project(tmp_path, "retries: 5\n")
    proc = agentrun("run", "SPEC-1", *scripted("--retries", "1"), cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert assignment(root)["limits"]["retries"] == 1


def test_old_flag_works_with_one_warning(tmp_path):
    root = project(tmp_path)
    proc = agentrun("run", "SPEC-1", *scripted("--max-retries", "0"), cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert warnings(proc.stderr) == ["warning: --max-retries is deprecated; use --retries"]
    assert assignment(root)["limits"]["retries"] == 0
    assert json.loads(proc.stdout)["status"] == "complete"  # stdout stays one JSON document


def test_old_config_key_works_with_one_warning_naming_the_new_key(tmp_path):
    root = project(tmp_path, "max_retries: 0\n")
    proc = agentrun("run", "SPEC-1", *scripted(), cwd=root)
    assert proc.returncode == 0, proc.stderr
    deprecated = [w for w in warnings(proc.stderr) if "deprecated" in w]
    assert len(deprecated) == 1
    assert "`max_retries` is deprecated; rename it to `request_retries`" in deprecated[0]
    doc = assignment(root)
    assert (doc["provider"]["request_retries"], doc["limits"]["retries"]) == (0, 3)


def test_old_and_new_config_key_together_is_bad_input(tmp_path):
    root = project(tmp_path, "max_retries: 1\nrequest_retries: 2\n")
    proc = agentrun("plan", "SPEC-1", cwd=root)
    assert proc.returncode == 2
    assert "both `max_retries` and `request_retries` are set" in proc.stderr
    assert "keep only `request_retries`" in proc.stderr and "Traceback" not in proc.stderr


def test_a_bad_old_key_is_named_as_written(tmp_path):
    root = project(tmp_path, "max_retries: -1\n")
    proc = agentrun("plan", "SPEC-1", cwd=root)
    assert proc.returncode == 2
    assert "`max_retries` must be greater than or equal to 0" in proc.stderr


def test_help_shows_one_name_per_setting(tmp_path):
    for command in ("run", "worker"):
        proc = agentrun(command, "--help", cwd=tmp_path, env={"COLUMNS": "200"})
        assert proc.returncode == 0
        assert "--retries" in proc.stdout and "--max-retries" not in proc.stdout
