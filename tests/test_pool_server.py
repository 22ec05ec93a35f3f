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
