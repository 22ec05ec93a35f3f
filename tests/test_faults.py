"""Bad input and faults around a run: each is one message with its exit code, never a
traceback, and found before any worktree is created."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from clirun import ENTRY_POINT, CliResult, agentrun, cli_env, finish, start
from gitutil import run_git
from runkit import make_project, scripted, spec_text, writes

TWO = [("G1", [], "one.txt"), ("G2", [], "two.txt")]


def two_groups(root):
    script = {"groups": {"G1": writes("one.txt", "1\n"), "G2": writes("two.txt", "2\n")}}
    return make_project(root, "SPEC-1", spec_text("SPEC-1", TWO), script)


def no_worktrees(root) -> bool:
    return len(run_git(root, "worktree", "list").splitlines()) == 1


def assert_one_message(proc, code: int, *words: str) -> None:
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    for word in words:
        assert word in proc.stderr, proc.stderr


@pytest.mark.parametrize("command", [("status",), ("plan",), ("run", *scripted()),
                                     ("run", "SPEC-1", *scripted())])
def test_state_md_that_is_not_utf8_is_bad_input(tmp_path, command):
    root = two_groups(tmp_path / "p")
    state = root / ".specflow/STATE.md"
    state.write_bytes(state.read_bytes().replace(b"keep this row", b"caf\xe9 row"))
    proc = agentrun(*command, cwd=root)
    assert_one_message(proc, 2, "STATE.md", "UTF-8")
    assert no_worktrees(root) and not (root / ".specflow/execution").exists()


@pytest.mark.parametrize("payload", [[1, 2], {"groups": []}, {"run_id": 5, "groups": {"G1": 3}},
                                     "text", {"status": "bogus"}])
def test_checkpoint_of_the_wrong_shape_is_bad_input(tmp_path, payload):
    root = two_groups(tmp_path / "p")
    checkpoint = root / ".specflow/execution/SPEC-1-state.json"
    checkpoint.parent.mkdir(parents=True)
    checkpoint.write_text(json.dumps(payload))
    for command in (("status",), ("run", "SPEC-1", *scripted("--resume"))):
        proc = agentrun(*command, cwd=root)
        assert_one_message(proc, 2, "SPEC-1-state.json", "without --resume")
    assert no_worktrees(root)


@pytest.mark.parametrize("kind, words", [("missing", "not found"), ("directory", "cannot read"),
                                         ("binary", "cannot read"),
                                         ("wrong shape", "invalid script")])
def test_a_bad_script_is_refused_before_any_worker_starts(tmp_path, kind, words):
    root = two_groups(tmp_path / "p")
    script = root / ".specflow/script.yaml"
    if kind == "missing":
        script.unlink()
    elif kind == "directory":
        script.unlink()
        script.mkdir()
    elif kind == "binary":
        script.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00\x01")
    else:
        script.write_text("groups: [1, 2]\n")
    proc = agentrun("run", "SPEC-1", *scripted("--allow-dirty"), cwd=root)
    assert_one_message(proc, 2, "script.yaml", words)
    assert no_worktrees(root) and not (root / ".specflow/execution").exists()
    assert not (root / ".specflow/runs").exists()


def slow_project(root):
    script = {"groups": {"G1": writes("one.txt", "1\n", latency=30),
                         "G2": writes("two.txt", "2\n", latency=30)}}
    return make_project(root, "SPEC-1", spec_text("SPEC-1", TWO), script)


def catches(pid: int, sig: int) -> bool:
    """Whether process `pid` has a handler for `sig` now (Linux: SigCgt in /proc)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(mask, 16) >> (sig - 1) & 1)


def wait_for_handler(pid: int, sig: int, limit: float) -> None:
    deadline = time.monotonic() + limit
    while not catches(pid, sig) and time.monotonic() < deadline:
        time.sleep(0.002)


def interrupt(root: Path, sig: signal.Signals, delay: float) -> CliResult:
    proc = start("run", "SPEC-1", *scripted()[:-1], cwd=root)  # plain output
    wait_for_handler(proc.pid, signal.SIGINT, 10)
    wait_for_handler(proc.pid, signal.SIGTERM, 0.15)
    time.sleep(delay)
    proc.send_signal(sig)
    return finish(proc, timeout=90)


def test_every_interrupt_is_exit_130_with_one_line(tmp_path):
    """Right after the interpreter starts, while the CLI imports, through preparation and
    into the run. Delays count from when the interpreter is up (it handles SIGINT) and agentrun
    handles SIGTERM, or 0.15 s later at most: a signal before the interpreter runs any code is
    the operating system's to handle. For each delay a SIGINT run and a SIGTERM run go side by
    side, each timed from its own process."""
    outcomes = []
    with ThreadPoolExecutor(max_workers=2) as pool:
        for i, delay in enumerate((0.0, 0.05, 0.1, 0.2, 0.4, 0.8, 1.5)):
            runs = {sig: pool.submit(interrupt, slow_project(tmp_path / f"p{i}-{int(sig)}"),
                                     sig, delay) for sig in (signal.SIGINT, signal.SIGTERM)}
            outcomes += [(sig, delay, run.result()) for sig, run in runs.items()]
    for sig, delay, done in outcomes:
        code, stderr = done.returncode, done.stderr
        assert code == 130, (sig.name, delay, code, stderr)
        assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, \
            (sig.name, delay, stderr)
        assert len([line for line in stderr.splitlines() if sig.name in line]) == 1, \
            (sig.name, delay, stderr)


# A command whose code turns the interrupt into an error of its own, as pydantic-core does when
# a signal lands while it builds a validator; `main` is the CLI's own, the app is this one.
SWALLOWING_COMMAND = """
import os, signal, sys, time
import typer
from agentrun.cli import app as cli

def build_app():
    app = typer.Typer()

    @app.command()
    def build(wrap: str) -> None:
        try:
            os.kill(os.getpid(), signal.SIGTERM if wrap == "sigterm" else signal.SIGINT)
            time.sleep(10)
        except KeyboardInterrupt as exc:
            if wrap == "runtime":
                raise RuntimeError("Error calling __set_name__") from exc
            raise ValueError("Error building 'model' validator: Signalled: SIGINT") from None

    @app.command()
    def other() -> None:
        pass
    return app

cli.build_app = build_app
cli.main(sys.argv[1:])
"""


@pytest.mark.parametrize("wrap", ["schema", "runtime", "sigterm"])
def test_an_error_that_stands_for_the_interrupt_is_the_interrupt(wrap):
    proc = subprocess.run([sys.executable, "-c", SWALLOWING_COMMAND, "build", wrap],
                          env=cli_env(), capture_output=True, text=True, timeout=60)
    name = "SIGTERM" if wrap == "sigterm" else "SIGINT"
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.strip().splitlines() == [f"error: interrupted by {name}"], proc.stderr


def read_only_run(root, folder) -> CliResult:
    """`agentrun run` with `folder` read-only: chmod for a user, a read-only bind mount for
    root (whom permission bits do not stop)."""
    argv = [str(ENTRY_POINT), "run", "SPEC-1", *scripted()[:-1]]
    if os.geteuid() != 0:
        folder.chmod(0o555)
    elif shutil.which("bwrap"):
        argv = ["bwrap", "--dev-bind", "/", "/", "--ro-bind", str(folder), str(folder), *argv]
    else:
        pytest.skip("root without bubblewrap cannot make a folder read-only")
    try:
        proc = subprocess.run(argv, cwd=root, env=cli_env(), capture_output=True, text=True,
                              timeout=120)
    finally:
        folder.chmod(0o755)
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


@pytest.mark.parametrize("path, folder, words", [
    (".specflow/execution/SPEC-1-state.json", True, "is a folder; agentrun writes the run's "
                                                    "checkpoint there"),
    (".specflow/STATE.md", True, "is a folder; agentrun writes the project's state there"),
    (".specflow/runs", False, "is a file; agentrun keeps a folder there"),
    (".git/agentrun", False, "is a file; agentrun keeps a folder there")])
def test_a_folder_or_file_in_the_way_of_the_run_is_refused_up_front(tmp_path, path, folder,
                                                                     words):
    """A folder where the run writes a file, or a file where it keeps a folder. Found only
    once the run had started, each was an internal error or a raw git failure."""
    root = two_groups(tmp_path / "p")
    head = run_git(root, "rev-parse", "HEAD")
    target = root / path
    if target.is_dir():
        shutil.rmtree(target)
    target.unlink(missing_ok=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    if folder:
        target.mkdir()
    else:
        target.write_text("in the way\n")
    proc = agentrun("run", "SPEC-1", *scripted(), cwd=root)
    assert_one_message(proc, 2, f"{path} {words}", f"{path}.old")
    assert no_worktrees(root) and run_git(root, "rev-parse", "HEAD") == head


@pytest.mark.parametrize("setup, args, words", [
    (None, ("audit", "--static", "--junit", "OUT"), "OUT is a folder where agentrun writes"),
    (None, ("run", "SPEC-1", *scripted("--record", "OUT")), "OUT is a folder where agentrun"),
    (".specflow/specs", ("new", "Another"), ".specflow/specs is in the way"),
    (".specflow", ("init",), ".specflow is in the way")])
def test_a_path_in_the_way_of_a_write_is_named_not_an_internal_error(tmp_path, setup, args,
                                                                      words):
    """A folder given where a file is written, or a file where agentrun makes a folder."""
    root = two_groups(tmp_path / "p")
    (tmp_path / "OUT").mkdir()
    if setup:
        shutil.rmtree(root / setup)
        (root / setup).write_text("in the way\n")
    args = tuple(a.replace("OUT", str(tmp_path / "OUT")) for a in args)
    proc = agentrun(*args, cwd=root)
    assert_one_message(proc, 2, words.replace("OUT", str(tmp_path / "OUT")),
                       "move what is in the way")


@pytest.mark.parametrize("folder", [".specflow", ".specflow/specs"])
def test_a_read_only_folder_the_run_writes_is_refused_up_front(tmp_path, folder):
    root = two_groups(tmp_path / "p")
    head = run_git(root, "rev-parse", "HEAD")
    proc = read_only_run(root, root / folder)
    if "bwrap:" in proc.stderr:
        pytest.skip(f"bubblewrap cannot run here: {proc.stderr.strip()}")
    assert_one_message(proc, 2, f"cannot write to {root / folder}", "chmod")
    assert no_worktrees(root) and run_git(root, "rev-parse", "HEAD") == head
    assert not (root / ".specflow/execution").exists()


def test_an_interrupt_whose_exception_was_lost_still_interrupts_the_run():
    """The CLI's handler raises, and Python ignores an exception raised in a weakref callback
    or a destructor: the run, once its own handlers are in place, acts on the signal the
    handler recorded."""
    import threading

    from agentrun.core import interrupts
    from agentrun.run.session import cancel_on_signals

    said: list[str] = []
    try:
        for received in ([], ["SIGTERM"]):  # the control first: none taken, none cancelled
            interrupts.RECEIVED[:] = received
            cancel = threading.Event()
            with cancel_on_signals(cancel, said.append):
                pass
            assert cancel.is_set() == bool(received)
    finally:
        interrupts.RECEIVED.clear()
    assert said == ["SIGTERM"]


# the CLI's handler called as if the signal came while Python's import machinery ran (the frame
# of importlib that called a finder), or while the finder itself ran (the control)
IN_IMPORT = """
import signal, sys, time, traceback
from agentrun.cli import app

app.trap_signals()
where, state = sys.argv[1], {}

class Finder:
    def find_spec(self, name, path, target=None):
        if name == "no_such_module_here":
            frame = sys._getframe(1) if where == "importlib" else sys._getframe(0)
            try:
                app._raise_interrupt(signal.SIGTERM, frame)
                state["at once"] = False
            except KeyboardInterrupt:
                state["at once"] = True
                raise
        return None

sys.meta_path.insert(0, Finder())
try:
    try:
        import no_such_module_here
    except ModuleNotFoundError:
        pass
    for _ in range(100):
        time.sleep(0.01)
    print("not interrupted")
except KeyboardInterrupt as exc:
    frames = traceback.extract_tb(exc.__traceback__)
    print(type(exc).__name__, state["at once"], frames[-1].filename.startswith("<frozen"))
"""


@pytest.mark.parametrize("where", ["importlib", "finder"])
def test_an_interrupt_in_the_import_machinery_is_raised_once_out_of_it(where):
    proc = subprocess.run([sys.executable, "-c", IN_IMPORT, where], env=cli_env(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    at_once = "True" if where == "finder" else "False"  # the control: raised where it came
    assert proc.stdout.split() == ["Signalled", at_once, "False"], proc.stderr


# the CLI's handler raising in a destructor, where Python cannot raise; with the CLI's hook for
# such exceptions, or (the control) with Python's own
IN_DESTRUCTOR = """
import signal, sys, time
from agentrun.cli import app

app.trap_signals()
if sys.argv[1] == "python":
    sys.unraisablehook = sys.__unraisablehook__

class Dropped:
    def __del__(self):
        app._raise_interrupt(signal.SIGTERM, sys._getframe(0))

try:
    Dropped()
    for _ in range(int(sys.argv[2])):  # the signal sent again ends this wait, if it comes
        time.sleep(0.01)
    print("not interrupted")
except KeyboardInterrupt as exc:
    print(type(exc).__name__)
"""


@pytest.mark.parametrize("hook", ["agentrun", "python"])
def test_an_interrupt_python_cannot_raise_is_sent_again(hook):
    # a lost signal stays lost: the control waits 1 s; the signal sent again may come late
    # on a busy machine, and ends its wait of up to 20 s as soon as it comes
    ticks = "100" if hook == "python" else "2000"
    proc = subprocess.run([sys.executable, "-c", IN_DESTRUCTOR, hook, ticks], env=cli_env(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    if hook == "python":  # the control: ignored, printed, and the command goes on
        assert proc.stdout.strip() == "not interrupted"
        assert "Exception ignored" in proc.stderr
    else:
        assert proc.stdout.split() == ["Signalled"] and proc.stderr == ""
