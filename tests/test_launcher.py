"""The launcher (tests/launcher.py) must be indistinguishable from starting `agentrun` afresh:
same exit code, same output, and a fresh process
whenever a call's environment is one the launcher's start-up did not see."""

from __future__ import annotations

import re
import subprocess
import time

import clirun
import pytest
from launcher import Launcher
from runkit import make_project, spec_text, writes


def _seen(proc) -> tuple[int, str, str]:
    """Exit code and output, without the clock times progress lines start with."""
    return proc.returncode, proc.stdout, re.sub(r"(?m)^\d\d:\d\d:\d\d ", "", proc.stderr)


def fresh(*args: str, cwd, env=None) -> tuple[int, str, str]:
    return _seen(subprocess.run(clirun._argv(*args), capture_output=True, text=True, cwd=cwd,
                                env=clirun.cli_env(env), timeout=120))


@pytest.fixture(scope="module")
def launcher():
    """A launcher of its own, also when the suite starts every call afresh."""
    started = Launcher(clirun.ENTRY_POINT, clirun.cli_env())
    yield started
    started.close()


def launched(launcher: Launcher, *args: str, cwd, env=None) -> tuple[int, str, str]:
    assert launcher.serves(clirun.cli_env(env))
    return _seen(launcher.run(clirun._argv(*args), cwd, clirun.cli_env(env), timeout=120))


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("launcher") / "p"
    groups = [("G1", [], "src/a.py"), ("G2", ["G1"], "src/b.py")]
    script = {"groups": {gid: writes(path, f"# {gid}\n") for gid, _, path in groups}}
    return make_project(root, "SPEC-1", spec_text("SPEC-1", groups), script)


@pytest.mark.parametrize("args", [
    ("--help",), ("run", "--help"), ("status", "--json"), ("plan", "SPEC-1", "--json"),
    ("run", "SPEC-404", "--json"), ("run", "SPEC-1", "--mode", "sideways"), ("bogus",),
    ("audit", "SPEC-1", "--json"),
])
def test_a_launched_call_prints_and_exits_as_a_fresh_process(launcher, project, args):
    assert launched(launcher, *args, cwd=project) == fresh(*args, cwd=project)


def test_a_launched_call_sees_its_own_environment(launcher, project):
    args, env = ("run", "SPEC-1", "--dry-run", "--json"), {"AGENTRUN_PROVIDER": "nosuch"}
    code, out, err = launched(launcher, *args, cwd=project, env=env)
    assert code == 2 and "nosuch" in out + err
    assert (code, out, err) == fresh(*args, cwd=project, env=env)


def test_start_up_variables_get_a_fresh_process(launcher):
    assert launcher.serves(clirun.cli_env({"AGENTRUN_PROVIDER_X": "1", "NO_COLOR": "1"}))
    for changed in ({"PYTHONPATH": "/elsewhere"}, {"LC_ALL": "C"}, {"HOME": "/nowhere"},
                    {"PYTHONPROFILEIMPORTTIME": "1"}):
        assert not launcher.serves(clirun.cli_env(changed)), changed


def test_a_call_that_outlives_its_timeout_is_killed(launcher, project, tmp_path):
    sleeper = tmp_path / "sleeper"
    sleeper.write_text("import time\ntime.sleep(30)\n")
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        launcher.run([str(sleeper)], project, clirun.cli_env(), timeout=1)
    assert time.monotonic() - started < 10
    assert launched(launcher, "--version", cwd=project) == fresh("--version", cwd=project)
