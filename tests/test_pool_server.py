"""The worker pool's server outlives a local process that connects to it and sends nothing.

Any process of the machine's user can connect to the forkserver's Unix socket. The standard
library's server loop ended on such a connection (EOFError), and the workers it had started were
reported ended (exit 255) while they still ran: a run another program merely poked ended as if
interrupted.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

# starts a forkserver (with `preload`) and a process from it, pokes the server while the process
# runs, and prints the exit code the process is reported to have ended with
SCRIPT = textwrap.dedent("""
    import multiprocessing, socket, sys, time
    from multiprocessing import forkserver

    if __name__ == "__main__":
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(sys.argv[1:])
        child = ctx.Process(target=time.sleep, args=(1.5,))  # a worker, still running when
        child.start()
        with socket.socket(socket.AF_UNIX) as poke:
            poke.connect(forkserver._forkserver._forkserver_address)  # ... and sends nothing
        child.join(30)
        print("exit", child.exitcode)
""")


def poked_while_a_worker_runs(*preload: str) -> str:
    proc = subprocess.run([sys.executable, "-c", SCRIPT, *preload], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_a_connection_without_a_request_does_not_stop_the_worker_server():
    # the control: the standard library's server ends, and the worker it started is reported
    # to have ended with 255 (as the run saw its workers) while it still runs
    assert poked_while_a_worker_runs() == "exit 255"
    # agentrun's (what the pool preloads) goes on: the worker ends as it did
    assert poked_while_a_worker_runs("agentrun.preload") == "exit 0"


# imports what the pool's server preloads, in its order, and reports the collector's state
PRELOADED = textwrap.dedent("""
    import gc, importlib, sys
    for name in sys.argv[1:]:
        importlib.import_module(name)
    print(gc.isenabled(), gc.get_freeze_count() > 10_000)
""")


def test_the_server_preloads_with_the_collector_off_and_freezes_what_it_holds():
    from agentrun.run import pool

    preload = pool._preload_list("openai")  # noqa: SLF001 - the server's own list
    assert preload[0] == "agentrun.preload_sandbox" and preload[-1] == "agentrun.preload_clients"
    state = subprocess.run([sys.executable, "-c", PRELOADED, *preload], capture_output=True,
                           text=True, timeout=120, check=True).stdout.split()
    assert state == ["False", "True"]
    # the control: the same imports without the first and last preloads leave it as it was
    state = subprocess.run([sys.executable, "-c", PRELOADED, *preload[1:-1]],
                           capture_output=True, text=True, timeout=120, check=True).stdout.split()
    assert state == ["True", "False"]


def test_a_worker_runs_with_the_collector_on(monkeypatch):
    import gc

    import agentrun.worker
    from agentrun.run import pool

    seen = []
    monkeypatch.setattr(agentrun.worker, "process_main", lambda _path: seen.append(gc.isenabled()))
    was = gc.isenabled()
    gc.disable()  # as in the server
    try:
        pool._worker_main("assignment.json")  # noqa: SLF001 - a worker process's entry point
    finally:
        (gc.enable if was else gc.disable)()
    assert seen == [True]
