"""run_command with real subprocesses: exit codes, output cap, timeouts, secrets, deny list."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agentrun.tools.base import (
    COMMAND_DENIED,
    COMMAND_FAILED,
    INVALID_ARGUMENTS,
    TIMEOUT,
    CommandPolicy,
    ToolContext,
)
from agentrun.tools.registry import Toolset


def make_tools(root: Path, **policy) -> Toolset:
    return Toolset(ToolContext(root=root, policy=CommandPolicy(**policy)), ["run_command"])


def run(tools: Toolset, command: str, **extra):
    return tools.call("run_command", {"command": command, **extra})


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for its reaper counts as dead)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return fields[0] not in ("Z", "X")


def wait_dead(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def tools(tmp_path: Path) -> Toolset:
    return make_tools(tmp_path)


def test_success_reports_exit_code_and_output(tmp_path, tools):
    result = run(tools, "echo hello; echo oops >&2; pwd")
    assert not result.is_error
    lines = result.content.splitlines()
    assert lines[0].startswith("exit code: 0 (")
    assert lines[1:] == ["hello", "oops", str(tmp_path)]
    assert result.data["exit_code"] == 0 and result.data["duration_s"] >= 0


def test_non_zero_exit_is_command_failed(tools):
    result = run(tools, "echo partial; exit 7")
    assert result.is_error and result.error_kind == COMMAND_FAILED
    assert result.data["exit_code"] == 7 and result.data["output"] == "partial\n"
    assert result.content.startswith("exit code: 7")


def test_no_output_and_stdin_is_closed(tools):
    result = run(tools, "cat")  # would wait forever on an inherited terminal
    assert not result.is_error and "(no output)" in result.content


def test_output_cap_keeps_head_and_tail(tmp_path):
    tools = make_tools(tmp_path, max_output_chars=1000)
    result = run(tools, "seq 1 100000")
    output = result.data["output"]
    assert output.startswith("1\n2\n3\n")
    assert output.rstrip().endswith("99999\n100000")
    assert "chars truncated] ..." in output
    full = sum(len(f"{i}\n") for i in range(1, 100001))
    truncated = int(output.split("... [")[1].split(" chars")[0])
    assert truncated == full - 1000
    assert len(output) < 1100


def test_small_output_is_not_truncated(tmp_path):
    tools = make_tools(tmp_path, max_output_chars=50)
    assert run(tools, "printf 'x%.0s' $(seq 1 50)").data["output"] == "x" * 50


def test_timeout_kills_grandchildren(tmp_path, tools):
    started = time.monotonic()
    result = run(tools, "bash -c 'sleep 60 & echo $! > pid; wait'", timeout_s=1)
    assert time.monotonic() - started < 10
    assert result.is_error and result.error_kind == TIMEOUT
    assert "timed out after 1s" in result.content
    pid = int((tmp_path / "pid").read_text())
    assert wait_dead(pid), f"grandchild {pid} survived the timeout"


def test_background_jobs_are_killed_when_command_ends(tmp_path, tools):
    result = run(tools, "sleep 60 > /dev/null 2>&1 & echo $! > pid; echo started")
    assert not result.is_error and "started" in result.content
    assert wait_dead(int((tmp_path / "pid").read_text()))


def test_background_job_holding_the_pipe_does_not_hang(tmp_path, tools):
    started = time.monotonic()
    result = run(tools, "sleep 60 & echo $! > pid; echo done")
    assert time.monotonic() - started < 10
    assert "done" in result.content
    assert wait_dead(int((tmp_path / "pid").read_text()))


def test_timeout_is_capped_by_policy(tmp_path):
    tools = make_tools(tmp_path, max_timeout_s=0.5)
    started = time.monotonic()
    result = run(tools, "sleep 30", timeout_s=600)
    assert time.monotonic() - started < 10
    assert result.error_kind == TIMEOUT and "capped at 0.5s" in result.content


def test_default_timeout_from_policy(tmp_path):
    tools = make_tools(tmp_path, default_timeout_s=0.3)
    assert run(tools, "sleep 30").error_kind == TIMEOUT


def test_secrets_are_scrubbed_from_the_environment(tools, monkeypatch):
    secrets = {"FOO_API_KEY": "foo-key-value", "BAR_TOKEN": "bar-token-value",
               "X_SECRET": "x-secret-value", "DB_PASSWORD": "db-password-value",
               "GITHUB_TOKEN": "ghp-token-value", "ANTHROPIC_API_KEY": "sk-ant-value"}
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HARMLESS_SETTING", "visible")
    output = run(tools, "env").data["output"]
    for name, value in secrets.items():
        assert f"{name}=" not in output
        assert value not in output
    # an allow-list: a variable nobody listed in `command_env` is not passed either
    assert "HARMLESS_SETTING" not in output and "PATH=" in output
    assert "GIT_TERMINAL_PROMPT=0" in output and "PAGER=cat" in output


def test_secret_values_are_redacted_from_output(tmp_path, tools, monkeypatch):
    monkeypatch.setenv("SERVICE_API_KEY", "s3cr3t-v4lue-xyz")
    (tmp_path / ".env").write_text("SERVICE_API_KEY=s3cr3t-v4lue-xyz\n")
    result = run(tools, "cat .env")
    assert "s3cr3t-v4lue-xyz" not in result.content
    assert "SERVICE_API_KEY=[REDACTED]" in result.content


@pytest.mark.parametrize("command", [
    "touch marker && git push",
    "touch marker; FOO=1 command git push origin main",
    "touch marker\nsudo true",
    "touch marker && rm -rf ~",
    "touch marker > /etc/agentrun-denied",
])
def test_denied_commands_never_run(tmp_path, tools, command):
    result = run(tools, command)
    assert result.is_error and result.error_kind == COMMAND_DENIED
    assert result.content.startswith("command refused by policy: ")
    assert not (tmp_path / "marker").exists()


def test_policy_extra_deny_patterns(tmp_path):
    tools = make_tools(tmp_path, deny=[r"^npm publish\b"])
    result = run(tools, "touch marker; npm publish")
    assert result.error_kind == COMMAND_DENIED and "npm publish" in result.content
    assert not (tmp_path / "marker").exists()


def test_invalid_arguments(tools):
    assert tools.call("run_command", {}).error_kind == INVALID_ARGUMENTS
    assert run(tools, "true", timeout_s=0).error_kind == INVALID_ARGUMENTS
    assert run(tools, "").error_kind == INVALID_ARGUMENTS
