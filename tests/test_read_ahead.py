"""Workers of a wave that end together are checked one by one, then land together: the later
ones' facts are read from git in the background while the first is checked
(`Verifier.read_ahead`), and a check takes them only for the very delivery they were read for,
never for a later one of the same batch whose branch has moved on."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from gitutil import commit_files
from test_queued_start import assignment
from test_run_target import Repo

from agentrun import workspace
from agentrun.core.results import WorkerResult
from agentrun.core.status import Status, StopReason
from agentrun.plan import Batch
from agentrun.run.backends import delivery, failed_result
from agentrun.run.execute import execute
from agentrun.run.verify import Delivery, Verifier


def _delivery(t: Repo, gid: str, tmp_path: Path) -> Delivery:
    branch = t.state.groups[gid].branch or ""
    commits = workspace.commits_since(t.root, t.base, branch)
    result = WorkerResult(group=gid, groups=[gid], status=Status.COMPLETE, commits=commits,
                          branch=branch, batch=gid)
    return Delivery(result=result, ids=[gid], batch=gid, ref=branch, base=t.base,
                    record_dir=tmp_path / "record" / gid)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The thread each read of a branch's commits ran in, noted once the read is done."""
    seen: list[str] = []
    real = workspace.commits_on

    def commits_on(root: Path, base: str, ref: str) -> list[str] | None:
        commits = real(root, base, ref)
        seen.append(threading.current_thread().name)
        return commits

    monkeypatch.setattr(workspace, "commits_on", commits_on)
    return seen


def test_a_delivery_read_ahead_is_checked_from_what_was_read(tmp_path, reads):
    t = Repo(tmp_path)
    t.work("G1"), t.work("G2")
    verifier = Verifier(t.root, t.state, t.lander.record, threading.Event())
    d1, d2 = _delivery(t, "G1", tmp_path), _delivery(t, "G2", tmp_path)
    reads.clear()
    verifier.read_ahead(d2)
    assert verifier.check(d1).status == Status.COMPLETE  # the control: read as it is checked
    assert verifier.check(d2).status == Status.COMPLETE
    # G1's read in the checking thread; G2's once, ahead, in the background
    assert sorted(name.rstrip("_0123456789") for name in reads) == \
        ["MainThread", "agentrun-verify"]
    assert t.state.groups["G2"].files_created == ["G2.txt"]


def test_facts_read_ahead_never_stand_for_a_later_delivery_of_the_batch(tmp_path, reads):
    t = Repo(tmp_path)
    t.work("G1")
    verifier = Verifier(t.root, t.state, t.lander.record, threading.Event())
    old = _delivery(t, "G1", tmp_path)
    verifier.read_ahead(old)
    while len(reads) < 1:  # the read is done: it saw the branch's first commit only
        threading.Event().wait(0.01)
    commit_files(tmp_path / "G1", {"more.txt": "more\n"}, "G1 more")  # the branch moves on
    new = _delivery(t, "G1", tmp_path)
    checked = verifier.check(new)
    assert checked.files_created == ["G1.txt", "more.txt"] and len(checked.commits) == 2
    # the control: the facts read ahead were the old ones, taken by their own delivery only
    assert len(verifier.check(old).commits) == 1


def test_results_that_arrive_together_are_read_ahead_before_the_first_is_verified(tmp_path):
    log: list[str] = []

    class Backend:
        sequential = False
        started: list[str] = []

        def start(self, batch: Batch, base: str) -> Later:
            self.started.append(batch.id)
            return Later(batch.id)

    backend = Backend()

    class Later:
        """Ends once every worker of the wave has started: they all arrive together."""

        sentinel = None

        def __init__(self, batch: str) -> None:
            self.batch = batch
            self.assignment = assignment(tmp_path, batch)

        def poll(self) -> bool:
            return len(backend.started) == 3

        def stop(self) -> None:
            pass

        def kill(self, reason: StopReason) -> None:
            pass

        def result(self) -> Delivery:
            return delivery(self.assignment, failed_result(self.assignment, StopReason.ERROR,
                                                           "ran"))

    def verify(d: Delivery) -> WorkerResult:
        log.append(f"verify {d.batch}")
        return d.result

    def land(results: dict[str, WorkerResult]) -> None:
        log.append(f"land {len(results)}")

    batches = [Batch(id=g, groups=[g]) for g in ("G1", "G2", "G3")]
    execute(batches, "base", backend, max_parallel=None, cancel=threading.Event(),
            verify=verify, on_result=land, not_started=lambda _b: None,
            read_ahead=lambda d: log.append(f"ahead {d.batch}"))
    # read ahead, then checked in order, then landed together (a merge train)
    assert log == ["ahead G2", "ahead G3", "verify G1", "verify G2", "verify G3", "land 3"]
    log.clear()
    backend.started.clear()
    execute(batches, "base", backend, max_parallel=None, cancel=threading.Event(),
            verify=verify, on_result=land, not_started=lambda _b: None)
    assert log == ["verify G1", "verify G2", "verify G3", "land 3"]
