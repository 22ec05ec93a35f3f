"""The CLI as a user runs it: through its entry point, in a fresh process."""

import subprocess
import sys

from agentrun import __version__


def run_cli(*args: str, cwd=None, env=None):
    return subprocess.run([sys.executable, "-m", "agentrun", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=60)


def test_version():
    proc = run_cli("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"agentrun {__version__}"


def test_help_lists_exit_codes():
    proc = run_cli("--help")
    assert proc.returncode == 0
    assert "130" in proc.stdout and "Exit codes" in proc.stdout


def test_unknown_command_is_usage_error():
    proc = run_cli("no-such-command")
    assert proc.returncode == 2
    assert "No such command" in proc.stderr
    assert "Traceback" not in proc.stderr
