"""LocalSandbox with real processes: groups killed on timeout and after the command, kill_all
from another thread, the spawn listener, argv and environment."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from agentrun.sandbox.local import LocalSandbox

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for its reaper counts as dead)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return fields[0] not in ("Z", "X")


def wait_for(condition, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def read_pid(path: Path) -> int:
    assert wait_for(lambda: path.exists() and path.read_text().strip()), f"{path} never written"
    return int(path.read_text())


def test_runs_a_shell_line_in_cwd_and_captures_both_streams(tmp_path):
    result = LocalSandbox().run("echo out; echo err >&2; pwd; exit 3", cwd=tmp_path,
                                timeout_s=10, env=ENV)
    assert result.exit_code == 3 and not result.timed_out
    assert result.output.splitlines() == ["out", "err", str(tmp_path)]
    assert result.duration_s >= 0


def test_argv_runs_without_a_shell(tmp_path):
    result = LocalSandbox().run(["printf", "%s|", "a b", "$HOME"], cwd=tmp_path, timeout_s=10,
                                env=ENV)
    assert result.exit_code == 0 and result.output == "a b|$HOME|"


def test_environment_is_exactly_the_one_given(tmp_path):
    result = LocalSandbox().run("env", cwd=tmp_path, timeout_s=10,
                                env={**ENV, "ONLY_THIS": "yes"})
    names = {line.split("=", 1)[0] for line in result.output.splitlines()}
    assert "ONLY_THIS" in names and "HOME" not in names


def test_output_is_redacted_then_cut_in_the_middle(tmp_path):
    result = LocalSandbox().run("echo s3cret-start; seq 1 5000; echo s3cret-end", cwd=tmp_path,
                                timeout_s=10, env=ENV, max_output_chars=200,
                                redact=lambda text: text.replace("s3cret", "[X]"))
    assert result.output.startswith("[X]-start\n1\n2\n")
    assert result.output.rstrip().endswith("4999\n5000\n[X]-end")
    assert "chars truncated" in result.output and "s3cret" not in result.output
    assert len(result.output) < 300


def test_timeout_kills_the_group_with_its_grandchild(tmp_path):
    sandbox = LocalSandbox()
    started = time.monotonic()
    result = sandbox.run("bash -c 'sleep 60 & echo $! > grandchild.pid; wait' ; echo never",
                         cwd=tmp_path, timeout_s=1, env=ENV)
    assert result.timed_out and result.exit_code is None
    assert time.monotonic() - started < 10
    assert "never" not in result.output
    grandchild = read_pid(tmp_path / "grandchild.pid")
    assert wait_for(lambda: not alive(grandchild))


def test_background_jobs_are_killed_when_the_command_ends(tmp_path):
    result = LocalSandbox().run("sleep 60 > /dev/null 2>&1 & echo $! > bg.pid; echo done",
                                cwd=tmp_path, timeout_s=10, env=ENV)
    assert result.exit_code == 0 and result.output.strip() == "done"
    background = read_pid(tmp_path / "bg.pid")
    assert wait_for(lambda: not alive(background))


def test_kill_all_stops_a_running_command_from_another_thread(tmp_path):
    events: list[tuple[str, int]] = []
    sandbox = LocalSandbox(on_spawn=lambda event, pgid: events.append((event, pgid)))
    results = []
    runner = threading.Thread(target=lambda: results.append(sandbox.run(
        "echo $$ > shell.pid; sleep 60", cwd=tmp_path, timeout_s=60, env=ENV)))
    runner.start()
    shell = read_pid(tmp_path / "shell.pid")
    started = time.monotonic()
    sandbox.kill_all(signal.SIGTERM)
    runner.join(10)
    assert not runner.is_alive() and time.monotonic() - started < 10
    assert results[0].exit_code == -signal.SIGTERM and not results[0].timed_out
    assert not alive(shell)
    sandbox.kill_all()  # nothing left to signal: a no-op


def test_spawn_listener_sees_start_and_end_with_the_group_id(tmp_path):
    events: list[tuple[str, int]] = []
    seen_running: list[bool] = []

    def listener(event: str, pgid: int) -> None:
        events.append((event, pgid))
        seen_running.append(alive(pgid))

    result = LocalSandbox(on_spawn=listener).run("echo $$", cwd=tmp_path, timeout_s=10,
                                                 env=ENV)
    pgid = int(result.output)
    assert events == [("spawn", pgid), ("spawn_end", pgid)]
    assert seen_running[1] is False  # the group is gone when its end is reported


def test_a_failing_listener_does_not_break_the_command(tmp_path):
    def broken(event: str, pgid: int) -> None:
        raise RuntimeError("display gone")

    result = LocalSandbox(on_spawn=broken).run("echo ok", cwd=tmp_path, timeout_s=10, env=ENV)
    assert result.exit_code == 0 and result.output == "ok\n"


def test_sandboxes_are_independent(tmp_path):
    """kill_all reaches only the commands of its own sandbox (no process-wide registry)."""
    mine, other = LocalSandbox(), LocalSandbox()
    results = []
    runner = threading.Thread(target=lambda: results.append(other.run(
        "echo $$ > other.pid; sleep 1; echo finished", cwd=tmp_path, timeout_s=30, env=ENV)))
    runner.start()
    read_pid(tmp_path / "other.pid")
    mine.kill_all(signal.SIGKILL)
    runner.join(10)
    assert results[0].exit_code == 0 and results[0].output.strip() == "finished"


def test_a_follower_catches_up_with_what_the_command_wrote_before_it_signalled(
        tmp_path, monkeypatch):
    """A command writes its line, then signals elsewhere (as a CLI writes a tool result, then
    calls the model through the key proxy). The sandbox's reader is held back (a descheduled
    thread): without catching up the line is not seen when the signal is (the control); after
    `catch_up` it is, once, in order, and the reader shows nothing twice."""
    import select as select_module

    from agentrun.sandbox import capture as capture_module
    from agentrun.sandbox.base import OutputFollower

    real_poll = select_module.poll
    wake = threading.Event()

    class SlowPoll:
        def __init__(self) -> None:
            self.inner = real_poll()

        def register(self, fd: int, mask: int) -> None:
            self.inner.register(fd, mask)

        def poll(self) -> list:
            wake.wait(20)  # the reader thread wakes late: when the test says so
            return self.inner.poll()

    monkeypatch.setattr(capture_module.select, "poll", SlowPoll)
    marker = tmp_path / "called"
    seen: list[bytes] = []
    follower = OutputFollower(seen.append)
    done: list = []
    go = tmp_path / "go"
    command = (f"echo first; echo second; touch {marker}; "
               f"while [ ! -e {go} ]; do sleep 0.01; done; echo third")
    thread = threading.Thread(target=lambda: done.append(LocalSandbox().run(
        command, cwd=tmp_path, timeout_s=20, env=ENV, on_output=follower)))
    thread.start()
    assert wait_for(marker.exists)
    assert b"".join(seen) == b""  # control: the reader has not read the lines yet
    follower.catch_up()
    assert b"".join(seen) == b"first\nsecond\n"
    go.touch()
    wake.set()
    thread.join(20)
    assert b"".join(seen) == b"first\nsecond\nthird\n"
    assert done[0].output == "first\nsecond\nthird\n" and done[0].exit_code == 0
    follower.catch_up()  # the command has ended: nothing more, and no error
    assert b"".join(seen) == b"first\nsecond\nthird\n"
