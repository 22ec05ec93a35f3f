"""The worker's one sandbox: its commands reported as spawn events on the progress stream, and
stopped by the worker process's SIGTERM handler — unconfined (`off`, where the shell's pid is
its process group) and in bubblewrap (where the group is bwrap's, and killing it ends the
command's PID namespace)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runkit import command, submit, writes
from test_worker_cmd import make_assignment

from agentrun.core.results import WorkerResult
from agentrun.sandbox.jail import unavailable_reason
from agentrun.worker import run_assignment


def progress(tmp_path) -> list[dict]:
    return [json.loads(line) for line in
            (tmp_path / "out/progress.ndjson").read_text().splitlines()]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def test_commands_and_validation_are_reported_as_spawn_events(tmp_path):
    script = {"groups": {"G1": [command("echo $$ > shell.pid"),
                                *writes("hello.py", "print('hi')\n")]}}
    assignment, _ = make_assignment(tmp_path, script, validation="python3 hello.py",
                                    sandbox="off")
    result = run_assignment(assignment)
    assert result.status == "complete", result.error
    spawns = [(e["type"], e["pgid"]) for e in progress(tmp_path)
              if e["type"] in ("spawn", "spawn_end")]
    shell = int((tmp_path / "wt/shell.pid").read_text())
    assert len(spawns) == 4  # the agent's command, then the validation command
    assert spawns[:2] == [("spawn", shell), ("spawn_end", shell)]
    assert spawns[2][0] == "spawn" and spawns[3] == ("spawn_end", spawns[2][1])
    assert set(next(e for e in progress(tmp_path) if e["type"] == "spawn")) == \
        {"v", "t", "type", "pgid"}


def start_worker(path: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", f"from agentrun.worker import process_main; "
                                                    f"process_main({path!r})"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_sigterm_stops_the_running_command_and_the_worker_reports(tmp_path):
    script = {"groups": {"G1": [command("echo $$ > shell.pid; sleep 60"),
                                submit("complete", "slept")]}}
    _, path = make_assignment(tmp_path, script, sandbox="off")
    worker = start_worker(path)
    pid_file = tmp_path / "wt/shell.pid"
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert worker.poll() is None, worker.stderr.read()
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.05)
    shell = int(pid_file.read_text())
    started = time.monotonic()
    os.kill(worker.pid, signal.SIGTERM)
    worker.wait(30)
    assert time.monotonic() - started < 20  # not the command's 60 seconds
    assert not alive(shell)
    result = WorkerResult.model_validate_json((tmp_path / "out/result.json").read_text())
    assert result.stop_reason == "interrupted"
    events = progress(tmp_path)
    assert ("spawn_end", shell) in [(e["type"], e.get("pgid")) for e in events]
    assert events[-1]["type"] == "done"


@pytest.mark.skipif(unavailable_reason() is not None,
                    reason=f"bubblewrap unusable: {unavailable_reason()}")
def test_sigterm_ends_a_sandboxed_command_and_what_it_detached(tmp_path):
    beat = "while true; do date +%s%N > {}; sleep 0.05; done"
    script = {"groups": {"G1": [command(f"setsid bash -c '{beat.format('detached.beat')}' & "
                                        f"{beat.format('shell.beat')}"),
                                submit("complete", "slept")]}}
    _, path = make_assignment(tmp_path, script, sandbox="on")
    worker = start_worker(path)
    beats = [tmp_path / "wt/shell.beat", tmp_path / "wt/detached.beat"]
    deadline = time.monotonic() + 60
    while not all(b.exists() for b in beats):
        assert worker.poll() is None, worker.stderr.read()
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.05)
    os.kill(worker.pid, signal.SIGTERM)
    worker.wait(30)
    time.sleep(0.3)
    last = [b.read_text() for b in beats]
    time.sleep(0.5)
    assert [b.read_text() for b in beats] == last  # nothing inside the jail still runs
    events = progress(tmp_path)
    assert {"type": "sandbox", "sandbox": "on (bubblewrap)"}.items() <= \
        next(e for e in events if e["type"] == "sandbox").items()
    spawned = [e["pgid"] for e in events if e["type"] == "spawn"]
    assert spawned and not alive(spawned[0])
    assert ("spawn_end", spawned[0]) in [(e["type"], e.get("pgid")) for e in events]
