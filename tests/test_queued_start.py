"""While the worker pool's server still imports (the worker code, the SDK), a wave's workers are
prepared at once (worktree, branch, assignment) and each process starts as soon as the server
is ready (agentrun/run/process_backend.py, `pool.ready`); a worker stopped before then ends
without starting, its groups failed with the reason."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from agentrun.core.status import Status, StopReason
from agentrun.plan import Batch
from agentrun.protocol import Assignment, GroupAssignment, ProviderSettings
from agentrun.run import pool
from agentrun.run.backends import FinishedHandle, delivery, failed_result
from agentrun.run.execute import execute
from agentrun.run.process_backend import ProcessBackend, QueuedHandle
from agentrun.run.verify import Delivery


def assignment(tmp_path: Path, batch: str) -> Assignment:
    return Assignment(spec_id="SPEC-1", run_id="r1", spec_path="s.md", batch=batch,
                      groups=[GroupAssignment(id=batch)], worktree=str(tmp_path / batch),
                      branch=f"b/{batch}", base_commit="0" * 40,
                      provider=ProviderSettings(provider="scripted", model="m"),
                      result_path=str(tmp_path / batch / "result.json"))


class Pool:
    """Stands in for the server's readiness."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.is_ready = False
        monkeypatch.setattr(pool, "ready", lambda: self.is_ready)


def finished(a: Assignment) -> FinishedHandle:
    return FinishedHandle(a.batch, delivery(a, failed_result(a, StopReason.ERROR, "ran")))


def test_a_wave_is_prepared_during_the_wait_and_started_when_the_server_is_ready(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = Pool(monkeypatch)
    steps: list[str] = []

    def prepare(batch: Batch, base: str) -> Assignment:
        steps.append(f"prepare {batch.id}")
        return assignment(tmp_path, batch.id)

    backend = ProcessBackend(prepare, threading.Event(), lambda *_a, **_k: None, timeout_s=60,
                             provider="scripted", warn=lambda _m: None)

    def launch(a: Assignment) -> FinishedHandle:
        steps.append(f"start {a.batch}")
        return finished(a)

    monkeypatch.setattr(backend, "_launch", launch)
    polls = 0
    original = QueuedHandle.poll

    def poll(self: QueuedHandle) -> bool:
        nonlocal polls
        polls += 1
        if polls > 4:  # the server becomes ready after the run has polled a few times
            server.is_ready = True
        return original(self)

    monkeypatch.setattr(QueuedHandle, "poll", poll)
    batches = [Batch(id=g, groups=[g]) for g in ("G1", "G2", "G3")]
    results = execute(batches, "base", backend, max_parallel=None, cancel=threading.Event(),
                      verify=lambda d: d.result, on_result=lambda _r: None,
                      not_started=lambda _b: None)
    assert sorted(results) == ["G1", "G2", "G3"]
    # every worktree and assignment came before the first process (the run waited on the
    # pool's one descriptor for all three); each process started once
    assert steps[:3] == ["prepare G1", "prepare G2", "prepare G3"]
    assert sorted(steps[3:]) == ["start G1", "start G2", "start G3"]


def test_with_the_server_ready_a_worker_starts_at_once(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    server = Pool(monkeypatch)
    server.is_ready = True
    backend = ProcessBackend(lambda b, _base: assignment(tmp_path, b.id), threading.Event(),
                             lambda *_a, **_k: None, timeout_s=60, provider="scripted",
                             warn=lambda _m: None)
    started: list[str] = []
    monkeypatch.setattr(backend, "_launch", lambda a: started.append(a.batch) or finished(a))
    handle = backend.start(Batch(id="G1", groups=["G1"]), "base")
    assert started == ["G1"] and not isinstance(handle, QueuedHandle)


@pytest.mark.parametrize("how", ["cancel", "stop", "kill"])
def test_a_worker_stopped_before_the_server_is_ready_ends_without_starting(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    server = Pool(monkeypatch)
    cancel = threading.Event()
    launched: list[str] = []
    handle = QueuedHandle(assignment(tmp_path, "G1"),
                          lambda a: launched.append(a.batch) or finished(a), cancel)
    assert handle.poll() is False and launched == []  # waiting for the server
    if how == "cancel":
        cancel.set()
    elif how == "stop":
        handle.stop()
    else:
        handle.kill(StopReason.COST_CAP)
    server.is_ready = True
    assert handle.poll() is True
    assert launched == []  # no process was started for it
    result = handle.result().result
    assert result.status == Status.FAILED
    assert result.stop_reason == (StopReason.COST_CAP if how == "kill"
                                  else StopReason.INTERRUPTED)
    assert "before its worker process started" in (result.error or "")


def test_a_started_worker_is_stopped_and_killed_through_its_own_handle(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = Pool(monkeypatch)
    server.is_ready = True
    calls: list[str] = []

    class Started(FinishedHandle):
        def stop(self) -> None:
            calls.append("stop")

        def kill(self, reason: StopReason) -> None:
            calls.append(f"kill {reason}")

    a = assignment(tmp_path, "G1")
    handle = QueuedHandle(a, lambda x: Started(x.batch, delivery(x, failed_result(
        x, StopReason.ERROR, "ran"))), threading.Event())
    assert handle.poll() is True  # started, and (this stand-in) already over
    handle.stop()
    handle.kill(StopReason.TIMEOUT)
    assert calls == ["stop", f"kill {StopReason.TIMEOUT}"]
    assert handle.result().result.error == "ran"


READY = textwrap.dedent("""
    import select
    from agentrun.run import pool

    if __name__ == "__main__":
        before = pool.ready(), pool.ready_fd()  # nothing to wait for yet
        pool.warm_up("scripted")
        during = pool.ready()  # the server is importing the worker code
        fd = pool.ready_fd()
        readable, _, _ = select.select([fd], [], [], 60)  # wakes when the server is ready
        from multiprocessing import forkserver
        alive = forkserver._forkserver._forkserver_pid is not None
        print(*before, during, readable == [fd] and pool.ready(), alive,
              pool.ready_fd() is None)
""")


def test_the_pool_is_ready_once_its_server_has_preloaded() -> None:
    out = subprocess.run([sys.executable, "-c", READY], capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    assert out == ["True", "None", "False", "True", "True", "True"]


class Ends:
    """A worker that ends when its pipe is written: `poll` says so only after that."""

    batch = "G1"

    def __init__(self, tmp_path: Path) -> None:
        self.read, self.write = os.pipe()
        self.polls = 0
        self.assignment = assignment(tmp_path, "G1")

    @property
    def sentinel(self) -> int:
        return self.read

    def poll(self) -> bool:
        self.polls += 1
        if self.polls == 3:
            os.write(self.write, b"x")  # the worker ends between this poll and the next
            return False
        return self.polls > 3

    def stop(self) -> None:
        pass

    def kill(self, reason: StopReason) -> None:
        pass

    def result(self) -> Delivery:
        return delivery(self.assignment, failed_result(self.assignment, StopReason.ERROR, "x"))


def test_the_run_waits_on_its_workers_rather_than_sleeping(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    handle = Ends(tmp_path)

    class Backend:
        sequential = False

        def start(self, batch: Batch, base: str) -> Ends:
            return handle

        def warm_up(self) -> None:
            pass

    waited: list[tuple[list[int], float | None]] = []

    def wait(fds: list[int], timeout: float | None = None) -> list[int]:
        waited.append((list(fds), timeout))
        return real_wait(fds, timeout)

    from agentrun.run import execute as module

    real_wait = module.wait
    monkeypatch.setattr(module, "wait", wait)
    monkeypatch.setattr(module.time, "sleep", lambda _s: pytest.fail("slept with a sentinel"))
    results = execute([Batch(id="G1", groups=["G1"])], "base", Backend(), max_parallel=None,
                      cancel=threading.Event(), verify=lambda d: d.result,
                      on_result=lambda _r: None, not_started=lambda _b: None)
    assert list(results) == ["G1"] and handle.polls == 4
    assert waited and all(fds == [handle.read] for fds, _ in waited)


STOPPED_EARLY = textwrap.dedent("""
    import os, time
    from pathlib import Path
    from agentrun.run import pool

    def servers():
        found = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                text = stat.read_text()
                cmdline = (stat.parent / "cmdline").read_bytes()
            except OSError:
                continue
            ppid = int(text[text.rfind(")") + 2:].split()[1])
            if ppid == os.getpid() and b"forkserver" in cmdline:
                found.append(stat.parent.name)
        return found

    if __name__ == "__main__":
        started = left = 0
        for delay in (0, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3):
            pool.warm_up("scripted")
            time.sleep(delay)
            pool.shut_down()  # as a run that stops early does on its way out
            time.sleep(0.3)  # a server started behind shut_down's back would be up by now
            left += len(servers())
        pool.warm_up("scripted")  # the control: a warm-up left alone starts one
        deadline = time.monotonic() + 60
        while not servers() and time.monotonic() < deadline:
            time.sleep(0.01)
        started = len(servers())
        pool.shut_down()
        print(left, started)
""")


def test_a_run_that_stops_early_leaves_no_worker_server_behind() -> None:
    out = subprocess.run([sys.executable, "-c", STOPPED_EARLY], capture_output=True,
                         text=True, timeout=120, check=True).stdout.split()
    assert out == ["0", "1"]
