"""What a worker's command could use to steer a CI job: the runner's control variables and
files (GITHUB_ENV, GITHUB_PATH, GITHUB_OUTPUT, ...) and the step outputs a later job acts on.

The workflow keeps a worker away from the token that can write whatever happens in its own job
(test_ci_act.py shows the attack running there); these are the doors in agentrun itself.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from gitutil import init_repo

from agentrun.core.errors import BadInput
from agentrun.report.github import outputs_file, write_outputs
from agentrun.sandbox.choice import make_sandbox
from agentrun.sandbox.jail import unavailable_reason
from agentrun.tools.environment import command_env

CONTROL = {"GITHUB_ENV": "/runner/set_env", "GITHUB_PATH": "/runner/add_path",
           "GITHUB_OUTPUT": "/runner/set_output", "GITHUB_STATE": "/runner/save_state",
           "GITHUB_STEP_SUMMARY": "/runner/step_summary", "ACTIONS_RUNTIME_TOKEN": "runtime",
           "ACTIONS_ID_TOKEN_REQUEST_URL": "https://token.invalid"}


def test_runner_control_variables_never_reach_a_command():
    environ = {"PATH": "/usr/bin", "NODE_ENV": "test", "GITHUB_SHA": "abc123", **CONTROL}
    env, _ = command_env([*CONTROL, "NODE_ENV", "GITHUB_SHA"], environ=environ)
    assert env["NODE_ENV"] == "test" and env["GITHUB_SHA"] == "abc123"  # command_env works
    assert not set(CONTROL) & set(env)  # ... but not for these, even when listed


# where a runner keeps its control files, and the job's checkout, under the runner's home:
# GitHub-hosted, and act on the host (what tests/test_ci_act.py runs)
LAYOUTS = {"github": ("work/_temp/_runner_file_commands", "work/app/app"),
           "act": (".cache/act/0a58/act/workflow", ".cache/act/0a58/hostexecutor")}


@pytest.mark.skipif(unavailable_reason() is not None, reason="bubblewrap unusable here")
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_sandboxed_command_cannot_write_the_runner_files(tmp_path, layout):
    files, checkout = (tmp_path / "home" / rel for rel in LAYOUTS[layout])
    files.mkdir(parents=True)
    for name in ("set_env", "add_path", "set_output"):
        (files / name).write_text("")
    worktree = init_repo(checkout, {"a.txt": "a\n"})
    # the attacker knows the layout: it needs no variable to find the files
    payload = (f"echo BASH_ENV=/evil.sh >> {files}/set_env; echo /evil >> {files}/add_path; "
               f"echo status=running >> {files}/set_output; echo ran > marker.txt")
    box, choice = make_sandbox("on", worktree)
    env, _ = command_env()
    result = box.run(payload, cwd=worktree, timeout_s=30, env=env)
    assert choice.confined and (worktree / "marker.txt").read_text() == "ran\n", result
    assert [(files / n).read_text() for n in ("set_env", "add_path", "set_output")] == \
        ["", "", ""]
    # unconfined, the same command writes all three: the payload is a real one
    subprocess.run(["/bin/bash", "-c", payload], cwd=worktree, env=env, check=True)
    assert (files / "set_env").read_text() == "BASH_ENV=/evil.sh\n"
    assert (files / "set_output").read_text() == "status=running\n"


def test_step_outputs_are_checked_values(tmp_path):
    out = tmp_path / "github-output"
    env = {"GITHUB_OUTPUT": str(out)}
    commit = "0123456789abcdef0123456789abcdef01234567"
    write_outputs({"status": "running", "commit": commit}, env)
    assert out.read_text() == f"status=running\ncommit={commit}\n"
    for bad in ({"status": "running\ncommit=" + commit}, {"status": "approved"},
                {"commit": "HEAD"}, {"commit": commit + "\nstatus=complete"},
                {"next": "x"}, {"status": "complete", "commit": "main"}):
        with pytest.raises(ValueError, match="not a valid step output"):
            write_outputs(bad, env)
    assert out.read_text() == f"status=running\ncommit={commit}\n"  # nothing of them
    with pytest.raises(BadInput) as err:  # outside a step: exit 2, before any work
        outputs_file({})
    assert err.value.exit_code == 2 and "GITHUB_OUTPUT" in err.value.message


def test_outputs_file_names_the_runners_file():
    assert outputs_file({"GITHUB_OUTPUT": "/runner/out"}) == Path("/runner/out")
