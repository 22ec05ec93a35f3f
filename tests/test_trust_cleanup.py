"""Cleanup cannot crash, and a run's record never stays `running` after its process ends.

A worker decides the shape of what it leaves in its worktree: a tree thousands of levels deep
(`shutil.rmtree` recurses into a RecursionError; that crash left the run record `running` and
the worktree renamed aside), folders it made unreadable or unwritable, symlinks out. And a run
can end in ways it did not plan: an error anywhere, a signal, a SIGKILL it cannot answer.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from clirun import agentrun
from gitutil import init_repo
from runkit import make_project, spec_text, submit, writes
from test_kill_resume import kill_run
from test_run_orchestrator import orchestrator

import agentrun as package
from agentrun.core.events import RunDoneEvent
from agentrun.core.status import RunStatus, Status
from agentrun.removal import remove_tree
from agentrun.run.session import cancel_on_signals

DEPTH = 1500  # past Python's recursion limit


def deep_tree(root: Path, outside: Path, depth: int = DEPTH) -> None:
    """A worker's leftovers: a chain of `depth` folders, a folder nobody may enter holding a
    file, a folder nobody may write holding files, a name with a newline, and symlinks to a
    file and a folder outside (which must survive)."""
    root.mkdir()
    here = os.getcwd()
    os.chdir(root)
    try:
        for _ in range(depth):
            os.mkdir("d")
            os.chdir("d")
        Path("leaf.txt").write_text("x")
    finally:
        os.chdir(here)
    for name, mode in (("locked", 0o000), ("readonly", 0o500)):
        (root / name).mkdir()
        (root / name / "inside.txt").write_text("y")
        (root / name).chmod(mode)
    (root / "odd\nname.txt").write_text("z")
    (root / "to-file").symlink_to(outside / "keep.txt")
    (root / "to-folder").symlink_to(outside)


def test_a_tree_rmtree_cannot_remove_is_removed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine\n")
    tree = tmp_path / "tree"
    deep_tree(tree, outside)
    with pytest.raises(RecursionError):  # the control: what cleanup used to do
        shutil.rmtree(tree)
    assert tree.is_dir()
    remove_tree(tree)
    assert not tree.exists()
    assert (outside / "keep.txt").read_text() == "mine\n" and list(outside.iterdir())


def test_folders_a_worker_locked_are_removed_by_their_owner(tmp_path):
    """As an unprivileged owner (as root, permissions mean nothing: the user nobody then):
    rmtree stops at a folder without permissions (the control); remove_tree gives it back to
    its owner and removes everything."""
    root = os.getuid() == 0
    base = Path(tempfile.mkdtemp(prefix="agentrun-locked-")) if root else tmp_path
    code = (f"import shutil, sys; sys.path.insert(0, {str(Path(package.__file__).parents[1])!r})\n"
            "from pathlib import Path\nfrom agentrun.removal import remove_tree\n"
            "base = Path(sys.argv[1])\n"
            "for name in ('a', 'b'):\n"
            "    for sub, mode in (('locked', 0), ('ro', 0o500)):\n"
            "        (base / name / sub).mkdir(parents=True)\n"
            "        (base / name / sub / 'f').write_text('x')\n"
            "        (base / name / sub).chmod(mode)\n"
            "try:\n    shutil.rmtree(base / 'a')\nexcept PermissionError as exc:\n"
            "    print('rmtree:', exc.strerror)\n"
            "remove_tree(base / 'a')\nremove_tree(base / 'b')\n"
            "print('left:', sorted(p.name for p in base.iterdir()))\n")
    argv = [sys.executable, "-c", code, str(base)]
    if root:  # an interpreter nobody may run (not one in root's home), as nobody
        base.chmod(0o777)
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                "/usr/bin/python3", *argv[1:]]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert "rmtree: Permission denied" in proc.stdout, proc.stderr
        assert "left: []" in proc.stdout, proc.stderr
    finally:
        if root:
            subprocess.run(["rm", "-rf", str(base)], check=False)


def test_clean_removes_a_worktree_a_dead_removal_left_aside(tmp_path):
    """A removal killed half way leaves `.G1.removing-PID` — git has forgotten it: `clean`
    removes it however deep (its sweep used rmtree, which the depth crashed), never
    following a symlink out."""
    root = init_repo(tmp_path / "p", {"README.md": "# p\n", ".gitignore": ".specflow/runs/\n"})
    worktrees = root / ".specflow/runs/20260101-000000-abcd/worktrees"
    worktrees.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine\n")
    aside = worktrees / ".G1.removing-4242"
    deep_tree(aside, outside)
    proc = agentrun("clean", "--json", cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert not aside.exists()
    assert (outside / "keep.txt").read_text() == "mine\n"


def test_an_error_mid_run_leaves_the_run_recorded_as_interrupted(tmp_path):
    """Any error that ends a run (here: answering whether to go on fails after wave 1) is
    recorded: the checkpoint, the run record and STATE.md say the run was interrupted and
    why, its unfinished groups too, and the work that landed stays."""
    def ask(failed: list[str]) -> bool:
        raise RuntimeError("the terminal went away")

    orch, events = orchestrator(tmp_path, {"groups": {
        "G1": writes("a.txt", "one\n"), "G2": [submit("failed", "could not", error="no")],
        "G3": writes("c.txt", "three\n")}}, ask_continue=ask)
    with pytest.raises(RuntimeError):
        orch.run()
    for saved in (orch.state_file, orch.run_dir / "result.json"):
        state = json.loads(saved.read_text())
        assert state["status"] == RunStatus.INTERRUPTED and state["finished"]
        assert "stopped: internal error: RuntimeError: the terminal went away" in \
            state["warnings"]
        assert state["groups"]["G1"]["status"] == Status.COMPLETE
        assert state["groups"]["G3"]["status"] == Status.INTERRUPTED
    assert "interrupted" in (orch.root / ".specflow/STATE.md").read_text()
    assert (orch.root / "a.txt").read_text() == "one\n"
    end = events[-1]
    assert isinstance(end, RunDoneEvent) and end.status == "interrupted"
    assert end.error is not None and end.error.type == "RuntimeError"
    assert end.error.message == "stopped: internal error: RuntimeError: the terminal went away"
    recorded = json.loads((orch.run_dir / "events.ndjson").read_text().splitlines()[-1])
    assert recorded["error"] == {"type": "RuntimeError", "message": end.error.message,
                                 "hint": None}


def test_a_hangup_interrupts_the_run_like_an_interrupt(tmp_path):
    """SIGHUP (the terminal closed) ended the process without a word; now it asks the run to
    stop, as SIGINT does, and the previous handler comes back afterwards."""
    before = signal.getsignal(signal.SIGHUP)
    cancel, said = threading.Event(), []
    with cancel_on_signals(cancel, said.append):
        os.kill(os.getpid(), signal.SIGHUP)
        assert cancel.wait(5)
    assert said == ["SIGHUP"] and signal.getsignal(signal.SIGHUP) == before


def test_a_killed_run_reads_as_interrupted(tmp_path):
    """SIGKILL gives a run no chance to record its end: its checkpoint still says `running`
    (the control). `status` knows the process that ran it is gone and says interrupted."""
    from test_kill_resume import _started

    root = make_project(tmp_path / "p", "SPEC-1", spec_text("SPEC-1", [("G1", [], "a.py")]),
                        {"groups": {"G1": writes("a.py", "A = 1\n", latency=1.5)}})
    dead = kill_run(root, _started(root, "single"))  # one group: the single-mode batch
    saved = json.loads((root / ".specflow/execution/SPEC-1-state.json").read_text())
    assert saved["run_id"] == dead and saved["status"] == "running"
    proc = agentrun("status", "SPEC-1", "--json", cwd=root)
    assert proc.returncode == 0, proc.stderr
    last = proc.json["last_run"]
    assert last["run_id"] == dead and last["status"] == "interrupted"
    assert any("killed" in w for w in last["warnings"])
    shown = agentrun("status", "SPEC-1", cwd=root)
    assert "interrupted" in shown.stdout and "killed" in shown.stdout
