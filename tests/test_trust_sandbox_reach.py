"""Nothing of the orchestrator's that takes commands is reachable from the sandbox, whatever
TMPDIR is.

The worker pool's forkserver listens on a Unix socket in the temporary directory; whoever can
connect to it can have a process outside the sandbox unpickle anything, with the
orchestrator's environment (its API keys). With TMPDIR outside /tmp (a scratch disk,
/run/user/…), a command in the sandbox could reach it; the sandbox now binds only what its
commands need, with a private /tmp, /var/tmp, /run and temporary directory.

The payload (`PROBE`) is what a worker would write: it looks for Unix sockets wherever
temporary files live, and sends the forkserver a pickle that writes a marker file outside.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from clirun import ENTRY_POINT, cli_env
from runkit import command, make_project, scripted, spec_text, writes

from agentrun.sandbox.jail import Jail, JailLimits, confine, unavailable_reason

REASON = unavailable_reason()
needs_bwrap = pytest.mark.skipif(REASON is not None, reason=f"bubblewrap unusable: {REASON}")
SECRET = "sk-orchestrator-secret-4711"

PROBE = r'''
import os, pickle, socket, stat, sys
from multiprocessing import reduction

marker, target, roots = sys.argv[1], sys.argv[2], sys.argv[2:]


class Escape:
    def __reduce__(self):
        code = (f"import os; open({marker!r}, 'w').write('escaped with ' + "
                "os.environ.get('AGENTRUN_TEST_SECRET', 'no secret'))")
        return (exec, (code,))


def sockets(root, depth=0):
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for entry in entries:
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
        except OSError:
            continue
        if stat.S_ISSOCK(mode):
            yield entry.path
        elif stat.S_ISDIR(mode) and depth < 4:
            yield from sockets(entry.path, depth + 1)


reached = []
for root in roots:
    for path in sockets(root):
        conn = socket.socket(socket.AF_UNIX)
        try:
            conn.connect(path)
        except OSError:
            continue
        reached.append(path)
        # a forkserver of the test's (no other process's): the pipe it unpickles from, the
        # one it answers on, and the two it hands on to the new process
        if path.startswith(target) and os.path.basename(path).startswith("listener-"):
            r, w = os.pipe()
            os.write(w, pickle.dumps(Escape()))
            os.close(w)
            reduction.sendfds(conn, [r, os.pipe()[1], *os.pipe()])
        conn.close()
print("reached:", reached)
'''


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A temporary directory outside /tmp, /var/tmp and $HOME, as on a machine whose TMPDIR
    is a scratch disk or the user's runtime directory."""
    bases = [os.environ.get("XDG_RUNTIME_DIR", ""), f"/run/user/{os.getuid()}", "/run"]
    base = next((b for b in bases if b and os.access(b, os.W_OK | os.X_OK)), None)
    if base is None:
        pytest.fail(f"none of {bases} is writable here: no TMPDIR outside /tmp to test with")
    path = Path(tempfile.mkdtemp(prefix="agentrun-test-", dir=base))
    try:
        yield path
    finally:
        subprocess.run(["rm", "-rf", str(path)], check=False)


def forkserver(tmpdir: Path) -> subprocess.Popen:
    """A process that starts a multiprocessing forkserver with TMPDIR=`tmpdir` (as the
    worker pool does) and waits; its first line of output is the server's socket."""
    code = ("import sys, multiprocessing.forkserver as f; f.ensure_running(); "
            "print(f._forkserver._forkserver_address, flush=True); sys.stdin.read()")
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(tmpdir),
                                 "AGENTRUN_TEST_SECRET": SECRET})


@needs_bwrap
@pytest.mark.parametrize("where", ["runtime dir", "around the worktree", "in home"])
def test_a_sandboxed_command_cannot_reach_the_forkserver(tmp_path, scratch, where, monkeypatch):
    """The worker pool's forkserver, with TMPDIR somewhere a sandbox would see it: a command
    run unconfined reaches it and escapes (the control); the same command in the jail finds
    no socket to connect to."""
    # all of it outside /tmp, and short: a socket's path has at most 107 bytes
    home, worktree = scratch / "h", scratch / "p" / "wt"
    tmpdir = {"runtime dir": scratch / "t", "around the worktree": scratch / "p",
              "in home": home / ".c" / "t"}[where]
    tools = home / ".c" / "bin"  # a tool in home: its top folder is shown
    for folder in (worktree, tmpdir, tools):
        folder.mkdir(parents=True, exist_ok=True)
    path_env = f"{tools}{os.pathsep}{os.environ['PATH']}"
    (worktree / "probe.py").write_text(PROBE)
    monkeypatch.setenv("TMPDIR", str(tmpdir))  # as the worker that builds the jail has it
    monkeypatch.setattr(tempfile, "tempdir", None)
    server = forkserver(tmpdir)
    try:
        socket_path = Path(server.stdout.readline().strip())
        assert socket_path.parent.parent == tmpdir  # pymp-*/listener-*
        marker = tmp_path / "escaped"
        argv = [sys.executable, "probe.py", str(marker), str(tmpdir), "/tmp", "/run",
                "/var/tmp", str(home)]
        env = {"PATH": path_env, "TMPDIR": str(tmpdir), "HOME": str(home)}
        jailed = subprocess.run(
            confine(argv, Jail(worktree=worktree, home=home, path_env=path_env)),
            cwd=worktree, env=env, capture_output=True, text=True, timeout=60)
        assert jailed.returncode == 0, jailed.stderr
        assert "reached: []" in jailed.stdout and not marker.exists()
        # unconfined, the payload looks only in this test's folder: the machine's /tmp holds
        # other runs' servers, which a connection that sends nothing would stop
        unconfined = subprocess.run(argv[:4], cwd=worktree, env=env, capture_output=True,
                                    text=True, timeout=60)
        assert str(socket_path) in unconfined.stdout  # the control: the payload works
        for _ in range(100):
            if marker.exists() and marker.read_text():
                break
            subprocess.run(["sleep", "0.05"], check=False)
        assert marker.read_text() == f"escaped with {SECRET}"
    finally:
        server.kill()
        server.wait()


DEEP = ("python3 -c \"import os\nfor _ in range(3000):\n    os.mkdir('d'); os.chdir('d')\n"
        "open('leaf.txt', 'w').write('x')\"")
BIG_MB = 128  # a file of the worker's, larger than the orchestrator may ever hold
ALLOC = ("python3 -c \"\ntry:\n    print('allocated', len(bytearray(400 << 20)))\n"
         "except MemoryError:\n    print('allocation refused')\"")


@needs_bwrap
def test_a_hostile_worker_reaches_nothing_and_costs_the_orchestrator_nothing(tmp_path, scratch):
    """Through `agentrun run`, TMPDIR outside /tmp, one worker doing everything at once:

    - it runs the payload against the run's own forkserver and reaches nothing, while the same
      payload run from outside the sandbox during the run (the control) finds that forkserver
      and escapes;
    - its commands are held to the memory limit of the project's config;
    - it leaves a file of BIG_MB MB, and the orchestrator's memory does not grow by it;
    - it leaves a folder tree 3000 levels deep (cleanup recursed to a RecursionError on it,
      which left the run `running` and its worktree renamed aside): the run completes, its
      worktree is gone, and its record says how it ended."""
    tmpdir = scratch / "t"
    tmpdir.mkdir()
    inside, outside = tmp_path / "escaped-inside", tmp_path / "escaped-outside"
    probe = f"python3 probe.py {inside} {tmpdir} /tmp /run /var/tmp $HOME"
    big = f"head -c {BIG_MB << 20} /dev/zero > big.bin && rm probe.py"
    script = {"groups": {
        "G1": [{**writes("probe.py", PROBE)[0], "latency_s": 0.5}, command(probe),
               command(ALLOC), command(big), command(DEEP), *writes("src/a.py", "A = 1\n")],
        "G2": writes("src/b.py", "B = 1\n")}}
    root = make_project(tmp_path / "p", "SPEC-1", spec_text(
        "SPEC-1", [("G1", [], "src/a.py"), ("G2", [], "src/b.py")]), script,
        {".specflow/config.yaml": "sandbox:\n  limits:\n    memory_mb: 256\n"})
    (tmp_path / "probe.py").write_text(PROBE)  # for the control, outside the sandbox
    seen: list[str] = []
    done = threading.Event()

    def attack_from_outside() -> None:
        while not done.is_set() and not seen:
            if list(tmpdir.glob("pymp-*/listener-*")):
                seen.append(subprocess.run(
                    [sys.executable, "probe.py", str(outside), str(tmpdir)], cwd=tmp_path,
                    capture_output=True, text=True, timeout=60).stdout)
            done.wait(0.05)

    watcher = threading.Thread(target=attack_from_outside, daemon=True)
    watcher.start()
    proc = subprocess.Popen([str(ENTRY_POINT), "run", "SPEC-1", *scripted("--sandbox", "on")],
                            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=cli_env({"TMPDIR": str(tmpdir),
                                         "AGENTRUN_TEST_SECRET": SECRET}))
    peak = 0  # the orchestrator's peak resident memory, KiB
    try:
        while proc.poll() is None:
            peak = max(peak, _peak_kib(proc.pid))
            time.sleep(0.02)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        done.set()
        watcher.join(60)
    assert proc.returncode == 0, stderr
    result = json.loads(stdout)
    assert result["status"] == "complete"
    transcripts = "".join(p.read_text() for p in (root / ".specflow/runs").rglob("*.jsonl"))
    # the forkserver
    assert "reached: []" in transcripts  # the command ran, in the sandbox, and found nothing
    assert not inside.exists()
    assert seen and str(tmpdir) in seen[0]  # the control
    for _ in range(100):
        if outside.exists() and outside.read_text():
            break
        time.sleep(0.05)
    assert outside.read_text() == f"escaped with {SECRET}"
    # the limits
    assert "allocation refused" in transcripts
    # the big file landed, and never sat in the orchestrator's memory
    assert (root / "big.bin").stat().st_size == BIG_MB << 20
    assert 0 < peak < (BIG_MB << 10) * 3 // 4, f"peak {peak >> 10} MiB"
    # the deep tree was made (git leaves its paths, too long, untracked), the worktree that
    # held it is gone, nothing is left aside, the record is final
    said = [json.loads(line) for line in next((root / ".specflow/runs").glob(
        "*/workers/G1/transcript.jsonl")).read_text().splitlines()]
    deep = next(e["id"] for e in said if e["type"] == "tool_call"
                and e["arguments"].get("command") == DEEP)
    assert any(e["type"] == "tool_result" and e["id"] == deep
               and e["content"].startswith("exit code: 0") for e in said)
    assert list((root / ".specflow/runs" / result["run_id"] / "worktrees").iterdir()) == []
    state = json.loads((root / ".specflow/execution/SPEC-1-state.json").read_text())
    assert state["status"] == "complete" and state["finished"]
    assert json.loads((Path(result["run_dir"]) / "result.json").read_text())["status"] == \
        "complete"


def _peak_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


# -- resources ---------------------------------------------------------------------------------

GREEDY = r'''
import os, sys, time
what = sys.argv[1]
if what == "file":
    try:
        with open("big.bin", "wb") as fh:
            fh.write(b"x" * 3_000_000)
    except OSError as exc:
        print("file:", exc.strerror)
    print("file size", os.path.getsize("big.bin"))
elif what == "memory":
    try:
        print("memory", len(bytearray(200 * 1024 * 1024)))
    except MemoryError:
        print("memory: MemoryError")
else:
    started = 0
    try:
        for _ in range(60):
            if os.fork() == 0:  # alive until the others have started
                time.sleep(0.5)
                os._exit(0)
            started += 1
    except OSError as exc:
        print("processes:", exc.strerror)
    print("processes", started)
'''


def jailed_python(where: Path, what: str, limits: JailLimits, *, nobody: bool = False) -> str:
    """GREEDY in a jail around `where` (as the user nobody: the kernel enforces a process
    limit on every user but root)."""
    python = "/usr/bin/python3" if nobody else sys.executable
    argv = confine([python, str(where / "greedy.py"), what],
                   Jail(worktree=where, home=where / "home", limits=limits))
    if nobody:  # without the tools in root's home, which nobody may not read
        private = [i for i, arg in enumerate(argv) if arg == "--ro-bind-try"
                   and Path(argv[i + 1]).is_relative_to(Path.home())]
        argv = [arg for i, arg in enumerate(argv)
                if not any(0 <= i - p <= 2 for p in private)]
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", *argv]
    proc = subprocess.run(argv, cwd=where, capture_output=True, text=True, timeout=60)
    return proc.stdout + proc.stderr


@needs_bwrap
def test_a_sandboxed_command_is_held_to_its_limits(tmp_path):
    """A command that writes a file past the size limit, allocates past the memory limit or
    starts processes past the process limit fails there; the same command within the
    defaults (the control) does all three."""
    from agentrun.core.limits import SandboxLimits
    from agentrun.sandbox.choice import resource_limits

    small = resource_limits(SandboxLimits(file_size_mb=1, memory_mb=64, processes=20))
    default = resource_limits(SandboxLimits())
    (tmp_path / "greedy.py").write_text(GREEDY)
    assert "file: File too large" in jailed_python(tmp_path, "file", small)
    assert (tmp_path / "big.bin").stat().st_size == 1024 * 1024
    assert "file size 3000000" in jailed_python(tmp_path, "file", default)
    assert "memory: MemoryError" in jailed_python(tmp_path, "memory", small)
    assert f"memory {200 * 1024 * 1024}" in jailed_python(tmp_path, "memory", default)
    # the process limit, as the unprivileged user agentrun should run as
    nobody = os.getuid() == 0
    where = Path(tempfile.mkdtemp(prefix="agentrun-nproc-")) if nobody else tmp_path
    try:
        if nobody:
            where.chmod(0o777)
            (where / "greedy.py").write_text(GREEDY)
        said = jailed_python(where, "processes", small, nobody=nobody)
        assert "processes: Resource temporarily unavailable" in said
        assert int(said.split("processes ")[-1].split()[0]) < 20
        assert "processes 60" in jailed_python(where, "processes", default, nobody=nobody)
    finally:
        if nobody:
            subprocess.run(["rm", "-rf", str(where)], check=False)


@needs_bwrap
def test_a_command_run_as_root_cannot_remount_its_way_out(tmp_path):
    """As root (CI containers), bubblewrap keeps a command's capabilities unless told not to:
    with them it could remount the read-only git dir read-write and plant a hook. The jail
    drops them all; the control, the same jail with them, is the escape."""
    git_dir = tmp_path / "repo.git"
    (git_dir / "hooks").mkdir(parents=True)
    worktree = tmp_path / "wt"
    worktree.mkdir()
    hook = git_dir / "hooks" / "post-commit"
    plant = (f"mount -o remount,rw,bind {git_dir} 2>&1; echo planted > {hook}; "
             "grep CapEff /proc/self/status")
    argv = confine(["/bin/bash", "-c", plant], Jail(worktree=worktree, git_dir=git_dir,
                                                     home=tmp_path / "home"))
    jailed = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert "CapEff:\t0000000000000000" in jailed.stdout and not hook.exists()
    drop = argv.index("--cap-drop")
    with_caps = subprocess.run(argv[:drop] + argv[drop + 2:], capture_output=True, text=True,
                               timeout=60)
    if os.getuid() == 0:  # the control: root's capabilities are the escape
        assert hook.read_text() == "planted\n", with_caps.stdout
    else:  # an ordinary user's sandbox never had any
        assert "CapEff:\t0000000000000000" in with_caps.stdout and not hook.exists()


@needs_bwrap
def test_a_project_virtualenv_in_home_shows_only_itself(tmp_path):
    """A project in home with its virtualenv on PATH: the virtualenv's tools run in the jail
    (the control), the project folder around it (its `.env`) stays hidden."""
    home = tmp_path / "home"
    venv = home / "proj" / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "bin" / "tool").write_text("#!/bin/sh\necho tool ran\n")
    (venv / "bin" / "tool").chmod(0o755)
    (home / "proj" / ".env").write_text("API_KEY=sk-in-the-project\n")
    worktree = tmp_path / "wt"
    worktree.mkdir()
    path_env = f"{venv / 'bin'}{os.pathsep}/usr/bin:/bin"
    proc = subprocess.run(
        confine(["/bin/sh", "-c", f"tool; cat {home}/proj/.env"],
                Jail(worktree=worktree, home=home, path_env=path_env)),
        env={"PATH": path_env}, capture_output=True, text=True, timeout=60)
    assert "tool ran" in proc.stdout
    assert "sk-in-the-project" not in proc.stdout + proc.stderr
