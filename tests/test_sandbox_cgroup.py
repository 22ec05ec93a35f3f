"""The sandbox's process cap holds for root: each command in a cgroup of its own.

RLIMIT_NPROC, the jail's process limit, is not applied by the kernel to root, the user
agentrun runs as in many containers and CI runners. Where a cgroup with the pids controller
can be made, `pids.max` caps the command whoever runs it; where none can, a run says so.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from agentrun.sandbox import cgroup
from agentrun.sandbox.bubblewrap import BwrapSandbox
from agentrun.sandbox.cgroup import CgroupParent, candidates, cgroup_parent, process_cap_note
from agentrun.sandbox.jail import Jail, JailLimits, unavailable_reason

# what a worker's test file could do: start 200 processes that stay, counting how many did
SPAWNER = r'''
import os
started = 0
for _ in range(200):
    try:
        os.posix_spawn("/bin/sleep", ["sleep", "29.137"], os.environ)
    except OSError as exc:
        print("refused:", exc.strerror)
        break
    started += 1
print("started", started)
'''


def _sleepers() -> list[int]:
    """The spawner's processes still alive anywhere on the machine."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes() == b"sleep\x0029.137\x00":
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _own_cgroups(where: CgroupParent) -> list[str]:
    return [p.name for p in where.path.iterdir()
            if p.name.startswith(f"{cgroup.PREFIX}{os.getpid()}-")]


@pytest.mark.skipif(unavailable_reason() is not None or cgroup_parent() is None,
                    reason="needs bubblewrap and a writable cgroup with the pids controller")
def test_a_fork_bomb_run_as_root_is_stopped_at_the_process_cap(tmp_path):
    """200 processes against a cap of 50: with the rlimit alone, root starts them all (the
    door the cgroup shuts); in the command's cgroup it is stopped at the cap; with a cap of
    400 (the control) all 200 start. Every process and cgroup is gone afterwards, and a
    cgroup a killed agentrun left behind is swept."""
    where = cgroup_parent()
    assert where is not None
    (tmp_path / "spawn.py").write_text(SPAWNER)
    home = tmp_path / "home"
    env = {"PATH": os.environ["PATH"]}

    def spawn(cap: int, cgroups: bool) -> str:
        box = BwrapSandbox(Jail(worktree=tmp_path, home=home,
                                limits=JailLimits(processes=cap)), "bwrap", cgroups=cgroups)
        result = box.run([sys.executable, str(tmp_path / "spawn.py")], cwd=tmp_path,
                         timeout_s=60, env=env)
        assert result.exit_code == 0, result.output
        assert _own_cgroups(where) == []
        return result.output

    rlimit_only = spawn(50, cgroups=False)
    if os.geteuid() == 0:  # the kernel exempts root from RLIMIT_NPROC
        assert "started 200" in rlimit_only
    else:
        assert "refused" in rlimit_only
    capped = spawn(50, cgroups=True)
    assert "refused: Resource temporarily unavailable" in capped
    started = int(capped.split("started ")[-1].split()[0])
    assert 40 <= started < 50  # the spawner itself is one of the 50
    assert "started 200" in spawn(400, cgroups=True)
    deadline = time.monotonic() + 5
    while _sleepers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _sleepers() == []

    stale = where.path / f"{cgroup.PREFIX}{2**22 + 7}-1"  # beyond pid_max: a dead process
    stale.mkdir()
    try:
        cgroup.sweep(where)
        assert not stale.exists()
    finally:
        if stale.exists():
            stale.rmdir()


def test_where_a_cgroup_can_be_made_and_what_a_run_says_where_none_can(tmp_path, monkeypatch):
    """The pids hierarchy of v1 and this process's own cgroup of v2, seen through the mount's
    root (a container shows part of the hierarchy); a plain folder is never taken for a
    cgroup; as root without one, a run warns that the process limit does not hold."""
    mountinfo = (
        "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
        "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
        "41 31 0:38 /docker/abc /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
        "42 31 0:39 /other /mnt/elsewhere rw - cgroup2 cgroup2 rw\n")
    own = "8:pids:/ci/job\n4:memory:/x\n0::/docker/abc/worker\n"
    assert candidates(mountinfo, own) == [
        CgroupParent(Path("/sys/fs/cgroup/pids/ci/job"), 1),
        CgroupParent(Path("/sys/fs/cgroup/unified/worker"), 2)]
    assert candidates("41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", "0::/\n") == \
        [CgroupParent(Path("/sys/fs/cgroup"), 2)]
    plain = CgroupParent(tmp_path, 1)
    assert not cgroup.usable(plain)
    with cgroup.command_cgroup(plain, 50) as join:
        assert join == []
    assert list(tmp_path.iterdir()) == []

    monkeypatch.setattr(cgroup, "cgroup_parent", lambda: None)
    monkeypatch.setattr(cgroup.os, "geteuid", lambda: 0)
    note = process_cap_note(4096)
    assert note is not None and "process limit (4096) is not enforced" in note
    assert process_cap_note(0) is None
    monkeypatch.setattr(cgroup, "cgroup_parent", lambda: plain)
    assert process_cap_note(4096) is None
    monkeypatch.setattr(cgroup.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(cgroup, "cgroup_parent", lambda: None)
    assert process_cap_note(4096) is None
