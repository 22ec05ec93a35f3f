"""The CLI as a user runs it: through its entry point, in a fresh process."""

from clirun import agentrun

from agentrun import __version__


def test_version():
    proc = agentrun("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"agentrun {__version__}"


def test_help_lists_exit_codes():
    proc = agentrun("--help")
    assert proc.returncode == 0
    assert "130" in proc.stdout and "Exit codes" in proc.stdout


def test_unknown_command_is_usage_error():
    proc = agentrun("no-such-command")
    assert proc.returncode == 2
    assert "No such command" in proc.stderr
    assert "Traceback" not in proc.stderr
