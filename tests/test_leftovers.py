"""Nothing the user owns is lost, and nothing agentrun made for itself stays: a run killed
during its integration check, then resumed, leaves no check worktree or branch, no folder set
aside for deletion, no space reserve and no private HOME — and the user's own linked worktree
on a disk that is not mounted keeps its registration (no bare `git worktree prune`)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from clirun import ENTRY_POINT, agentrun, cli_env
from gitutil import run_git
from runkit import make_project, scripted, spec_text, writes

# slow on the merged result only: the base check and the worker's own check pass at once
CHECK = 'case "$PWD" in */integration/*) if [ -e one.py ]; then sleep 60; fi;; esac'


def wait_for(predicate, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def test_sigkill_in_the_integration_check_then_resume_leaves_only_what_is_kept(tmp_path):
    root = make_project(tmp_path / "p", "SPEC-1", spec_text("SPEC-1", [("G1", [], "one.py")]),
                        {"groups": {"G1": writes("one.py", "X = 1\n")}})
    # a short temporary folder of the run's own (a long one fits no worker pool socket)
    temp = Path(tempfile.mkdtemp(prefix="lo-", dir="/tmp"))
    env = {"TMPDIR": str(temp)}
    # the user's linked worktree, its disk not mounted now: git lists it as prunable
    offline = tmp_path / "usb" / "mine"
    run_git(root, "worktree", "add", "-q", "-b", "mine", str(offline))
    offline.rename(tmp_path / "usb" / "elsewhere")
    assert "prunable" in run_git(root, "worktree", "list", "--porcelain")

    proc = subprocess.Popen([str(ENTRY_POINT), "run", "SPEC-1", *scripted("--validate", CHECK)],
                            cwd=root, env=cli_env(env), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    runs = root / ".specflow/runs"
    try:
        wait_for(lambda: any(runs.glob("*/integration/check-*/one.py")))
        wait_for(lambda: _checking(proc.pid))  # the check's command runs: kill it there
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    dead = next(runs.iterdir())
    # what the killed run left: a check worktree and branch, the reserve, its HOME
    assert any(b.endswith("/check-2") for b in _branches(root)), _branches(root)
    assert (dead / "space-reserve").is_file()
    assert list(temp.glob(f"agentrun-home-{proc.pid}-*"))
    aside = dead / "worktrees" / ".G1.removing-999999"  # a kill inside a removal
    (aside / "src").mkdir(parents=True)

    resumed = agentrun("run", "SPEC-1", *scripted("--validate", "true", "--resume"), cwd=root,
                       env=env)
    assert resumed.returncode == 0, resumed.stderr
    # G1's merge was never seen to pass its check: the resumed run checks it, not redoes it
    assert [(c["wave"], c["ok"]) for c in resumed.json["integration"]] == [("1", True)]
    assert resumed.json["groups"]["G1"]["status"] == "complete"
    assert not [b for b in _branches(root) if "/check-" in b]
    assert not list(runs.glob("*/space-reserve")) and not aside.exists()
    assert not list(runs.glob("*/integration/check-*"))
    assert list(temp.glob("agentrun-home-*")) == []
    shutil.rmtree(temp)  # (the killed process's multiprocessing folder, Python's own)
    listed = run_git(root, "worktree", "list", "--porcelain")
    assert f"worktree {offline}" in listed and listed.count("worktree ") == 2
    (tmp_path / "usb" / "elsewhere").rename(offline)  # mounted again: still a worktree
    assert run_git(offline, "rev-parse", "--abbrev-ref", "HEAD") == "mine"


def _checking(pid: int) -> bool:
    """Whether the run's check command (`sleep 60`, in its sandbox) runs now under `pid`."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if cmdline.read_bytes() == b"sleep\x0060\x00" and \
                    pid in _ancestors(int(cmdline.parent.name)):
                return True
        except (OSError, ValueError):
            continue
    return False


def _ancestors(pid: int) -> list[int]:
    found = []
    while pid > 1:
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        found.append(pid)
    return found


def _branches(root: Path) -> list[str]:
    return run_git(root, "for-each-ref", "--format=%(refname:short)",
                   "refs/heads/agentrun").split()


def test_sweep_never_touches_a_run_in_progress_or_a_live_process(tmp_path, monkeypatch):
    """In-process: what `sweep` takes is only what no live run or process can own."""
    from agentrun.run.leftovers import sweep

    root = make_project(tmp_path / "p", "SPEC-1", spec_text("SPEC-1", []), {})
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    runs = root / ".specflow/runs"
    for run in ("20260101-000000-aaaa", "20260101-000001-bbbb"):
        (runs / run).mkdir(parents=True)
        (runs / run / "space-reserve").write_bytes(b"\0" * 16)
    # a private HOME, a snapshot's scratch index and a pool's handoff, of this live process
    # and of a dead one
    kinds = ("home", "snapshot", "pool")
    live = [temp / f"agentrun-{kind}-{os.getpid()}-abcd1234" for kind in kinds]
    gone = [temp / f"agentrun-{kind}-999999-abcd1234" for kind in kinds]
    other = [temp / "agentrun-home-notours", temp / "agentrun-demo-999999-abcd1234"]
    for folder in (*live, *gone, *other):
        folder.mkdir()
        (folder / "index").write_bytes(b"DIRC")
    removed = sweep(root, runs, current="20260101-000001-bbbb")
    assert (runs / "20260101-000001-bbbb/space-reserve").exists()  # the run in progress
    assert not (runs / "20260101-000000-aaaa/space-reserve").exists()
    assert all(f.exists() for f in (*live, *other)) and not any(f.exists() for f in gone)
    assert removed == [str(runs / "20260101-000000-aaaa/space-reserve")]
