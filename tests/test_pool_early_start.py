"""`agentrun run` starts its worker pool's server as its first step, before it knows the
provider, and names the provider to it later (agentrun/run/handoff.py): the server then has the
named SDK, and a server whose run ends without naming one does not outlive it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

# the forkserver processes whose environment holds `mark` (every process the test's run
# started); a process the server forked (a worker, or a command before its exec) has the
# server's command line too, and is not one
SERVERS = textwrap.dedent("""
    import os
    from pathlib import Path

    def servers(mark):
        parents = {}
        for proc in Path("/proc").glob("[0-9]*"):
            if int(proc.name) == os.getpid():  # this script's text names the forkserver too
                continue
            try:
                state, ppid = (proc / "stat").read_text().rsplit(")", 1)[1].split()[:2]
                cmdline = (proc / "cmdline").read_bytes()
                environ = (proc / "environ").read_bytes()
            except OSError:
                continue
            if state != "Z" and b"forkserver" in cmdline and mark.encode() in environ:
                parents[int(proc.name)] = int(ppid)  # a zombie has ended, not yet reaped
        return sorted(pid for pid, ppid in parents.items() if ppid not in parents)
""")
namespace: dict[str, object] = {}
exec(SERVERS, namespace)  # noqa: S102 - the same helper, here and in the scripts


def servers(mark: str) -> list[int]:
    found = namespace["servers"](mark)  # type: ignore[operator]
    assert isinstance(found, list)
    return found


NAMED = SERVERS + textwrap.dedent("""
    import sys, time
    from agentrun.run import pool

    if __name__ == "__main__":
        mark, provider, *lost = sys.argv[1:]
        pool.start()
        if lost:  # the handoff's folder goes (a temp cleaner): the name cannot be given
            import shutil
            shutil.rmtree(pool._HANDOFF.folder)
        deadline = time.monotonic() + 60
        while not servers(mark) and time.monotonic() < deadline:
            time.sleep(0.01)
        early = servers(mark)  # before the run knows its provider
        time.sleep(0.3)  # the server has imported the worker code and waits for the name
        pool.warm_up(provider)
        time.sleep(0.1)
        pool.warm_up(provider)  # as a run does again before its first wave: nothing new
        deadline = time.monotonic() + 60
        while not pool.ready() and time.monotonic() < deadline:
            time.sleep(0.01)
        import tempfile
        answer = os.path.join(tempfile.mkdtemp(), "sdk")  # a worker's files are its own
        code = f"import sys; open({answer!r}, 'w').write(str('openai' in sys.modules))"
        probe = pool._context(provider).Process(target=exec, args=(code,))
        probe.start()
        probe.join(60)
        sdk = open(answer).read()
        print(len(early), early == servers(mark), sdk, len(servers(mark)))
        pool.shut_down()
""")


def run_script(script: str, tmp_path: Path, *args: str, code: int = 0,
               cwd: Path | None = None) -> tuple[str, list[str]]:
    """Run `script` with a mark only its processes have; its mark and output. The output goes
    to a file, not a pipe, which a server left behind would hold open."""
    mark = uuid.uuid4().hex
    with (tmp_path / "out").open("w+") as out:
        proc = subprocess.run([sys.executable, "-c", script, f"AGENTRUN_TEST_MARK={mark}", *args],
                              stdout=out, stderr=subprocess.PIPE, text=True, timeout=120,
                              cwd=cwd, env={**os.environ, "AGENTRUN_TEST_MARK": mark})
        out.seek(0)
        assert proc.returncode == code, proc.stderr
        return f"AGENTRUN_TEST_MARK={mark}", out.read().split()


def test_a_server_started_before_the_provider_is_known_imports_the_sdk_the_run_names(
        tmp_path: Path) -> None:
    # one server, started before the name, and still the one that runs the workers
    assert run_script(NAMED, tmp_path, "openai")[1] == ["1", "True", "True", "1"]
    # the control: a provider without an SDK, and the server has imported none
    assert run_script(NAMED, tmp_path, "scripted")[1] == ["1", "True", "False", "1"]


def test_a_name_that_cannot_be_handed_over_gets_a_server_of_its_own(tmp_path: Path) -> None:
    # the early server, which would wait for the name, is replaced by one that lists the SDK
    assert run_script(NAMED, tmp_path, "openai", "lost")[1] == ["1", "False", "True", "1"]


KILLED = SERVERS + textwrap.dedent("""
    import os, signal, sys, time
    from agentrun.run import pool

    if __name__ == "__main__":
        mark = sys.argv[1]
        pool.start()
        time.sleep(1.0)  # the server has imported the worker code and waits for the name
        print(pool._HANDOFF.folder, *servers(mark), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # the run dies without naming a provider
""")


def test_a_server_whose_run_was_killed_before_naming_a_provider_ends(tmp_path: Path) -> None:
    mark, (folder, *waiting) = run_script(KILLED, tmp_path, code=-signal.SIGKILL)
    assert len(waiting) == 1  # the control: the server was there, waiting, while its run lived
    deadline = time.monotonic() + 30
    while servers(mark) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert servers(mark) == []
    assert not Path(folder).exists()  # nor is the handoff's folder left behind


EARLY_EXIT = SERVERS + textwrap.dedent("""
    import sys
    from agentrun.cli import app
    from agentrun.run import pool

    if __name__ == "__main__":
        mark, keep = sys.argv[1:]
        if keep == "keep":  # the control: without the shut-down, the early server is there
            pool.shut_down = lambda: None
        try:
            app.main(["run", "SPEC-404", "--yes"])
        except SystemExit as exit:
            code = exit.code
        import time
        time.sleep(0.3)
        print(code, len(servers(mark)))
""")


@pytest.mark.parametrize("keep", ["keep", "shut"])
def test_a_run_refused_before_it_starts_leaves_no_server(tmp_path: Path, keep: str) -> None:
    project = tmp_path / "project"
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / ".specflow" / "specs").mkdir(parents=True)
    _, (code, left) = run_script(EARLY_EXIT, tmp_path, keep, cwd=project)
    assert code == "2"  # no such spec: bad input
    assert left == ("1" if keep == "keep" else "0")


def test_the_server_touches_only_a_handoff_folder(tmp_path: Path) -> None:
    """The name's file comes from the environment: a folder not named as a handoff's is
    neither read nor removed."""
    from agentrun.pool_handoff import ENV, receive

    parent = os.getppid()  # as the server sees the run that started it
    for folder, name in ((tmp_path / f"agentrun-pool-{parent}-abc", "openai"),  # the control
                         (tmp_path / "project", None)):
        folder.mkdir()
        (folder / "provider").write_text("openai")
        assert receive({ENV: f"{parent} {folder / 'provider'}"}) == name
        assert folder.exists() == (name is None)  # a handoff's folder is removed once read
