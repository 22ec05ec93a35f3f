"""The CLI as a user runs it: through its entry point, in a fresh process."""

import pytest
from clirun import agentrun

from agentrun import __version__


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(flag):
    proc = agentrun(flag)
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"agentrun {__version__}"


@pytest.mark.parametrize("command", [(), ("run",), ("plan",), ("status",), ("audit",),
                                     ("init",), ("worker",), ("aggregate",)])
def test_dash_h_is_help_everywhere(command):
    long, short = agentrun(*command, "--help"), agentrun(*command, "-h")
    assert short.returncode == long.returncode == 0, short.stderr
    assert short.stdout == long.stdout and "Usage: agentrun" in short.stdout
    assert "-h, --help" in short.stdout


def test_help_lists_exit_codes():
    proc = agentrun("--help")
    assert proc.returncode == 0
    assert "130" in proc.stdout and "Exit codes" in proc.stdout


def test_unknown_command_is_usage_error():
    proc = agentrun("no-such-command")
    assert proc.returncode == 2
    assert "No such command" in proc.stderr
    assert "Traceback" not in proc.stderr
