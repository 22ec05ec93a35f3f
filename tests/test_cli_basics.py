"""The CLI as a user runs it: through its entry point, in a fresh process."""

import pytest
from clirun import agentrun

from agentrun import __version__


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(flag):
    proc = agentrun(flag)
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"agentrun {__version__}"


# what a command's help must also show: the exit codes, and each option's allowed values
SHOWS = {(): ["130", "Exit codes"],
         ("run",): ["--mode <single|orchestrated>", "--on-failure <continue|abort>",
                    "--sandbox <auto|on|off>"],
         ("plan",): ["--mode <single|orchestrated>"]}


@pytest.mark.parametrize("command", [(), ("run",), ("plan",), ("status",), ("audit",),
                                     ("init",), ("worker",), ("aggregate",)])
def test_dash_h_is_help_everywhere_with_exit_codes_and_allowed_values(command):
    long, short = agentrun(*command, "--help"), agentrun(*command, "-h")
    assert short.returncode == long.returncode == 0, short.stderr
    assert short.stdout == long.stdout and "Usage: agentrun" in short.stdout
    assert "-h, --help" in short.stdout
    for text in SHOWS.get(command, []):
        assert text in short.stdout, (command, text)


def test_unknown_command_is_usage_error():
    proc = agentrun("no-such-command")
    assert proc.returncode == 2
    assert "No such command" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("args", [("run", "--bogus"), ("run", "--mode", "x"),
                                  ("plan", "--max-workers", "0")])
def test_usage_error_with_json_is_one_json_document(args):
    proc = agentrun(*args, "--json")
    assert proc.returncode == 2
    error = proc.json["error"]  # stdout holds exactly the one document, no usage text
    assert proc.json["ok"] is False and error["type"] == "UsageError"
    assert error["exit_code"] == 2 and error["message"]
    assert "Usage:" not in proc.stdout + proc.stderr


def test_dash_c_runs_in_another_directory(tmp_path):
    root = _project(tmp_path)
    proc = agentrun("-C", str(root), "plan", "SPEC-001", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.json["spec"]["id"] == "SPEC-001"
    bad = agentrun("-C", str(tmp_path / "missing"), "plan", cwd=tmp_path)
    assert bad.returncode == 2
    assert "-C" in bad.stderr and "No such file or directory" in bad.stderr


@pytest.mark.parametrize("typo", ["SPEC-01", "spec-001", ".specflow/specs/SPEC-0001.md"])
def test_misspelt_spec_names_the_one_meant(tmp_path, typo):
    root = _project(tmp_path)
    proc = agentrun("plan", typo, cwd=root)
    assert proc.returncode == 2
    assert f"spec not found: {typo}" in proc.stderr
    assert "did you mean SPEC-001? (.specflow/specs/SPEC-001.md)" in proc.stderr


def test_dry_run_and_plan_need_no_model_key(tmp_path):
    root = _project(tmp_path)
    assert agentrun("plan", "SPEC-001", cwd=root).returncode == 0
    dry = agentrun("run", "SPEC-001", "--dry-run", "--max-parallel", "1", cwd=root)
    assert dry.returncode == 0, dry.stderr
    assert "Model: not configured (no model provider is configured" in dry.stdout
    assert "1 more queued (--max-parallel 1)" in dry.stdout
    assert "Estimate: 3 worker(s) · measured context" in dry.stdout
    real = agentrun("run", "SPEC-001", "--yes", cwd=root)  # a real run still needs one
    assert real.returncode == 3 and "no model provider is configured" in real.stderr


def test_proceed_estimate_prices_measured_context(tmp_path):
    root = _project(tmp_path)
    proc = agentrun("run", "SPEC-001", "--dry-run", "--json", "--model", "gpt-4o", cwd=root,
                    env={"OPENAI_API_KEY": "sk-test"})
    assert proc.returncode == 0, proc.stderr
    estimate = proc.json["estimate"]
    assert estimate["workers"] == 3 and estimate["context_tokens"] > 100
    assert estimate["budget_tokens"] == 300_000
    assert estimate["first_requests_usd"] > 0
    assert estimate["budget_usd"] > estimate["first_requests_usd"]


def _project(tmp_path):
    from runkit import make_project, spec_text, writes

    groups = [("G1", [], "a.py"), ("G2", [], "b.py"), ("G3", ["G1"], "c.py")]
    return make_project(tmp_path / "p", "SPEC-001", spec_text("SPEC-001", groups),
                        {"groups": {g: writes(f, "x\n") for g, _, f in groups}})
