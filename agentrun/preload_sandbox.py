"""The worker pool's server's first preload: the garbage collector off, and whether bubblewrap
works here, asked once.

The server imports thousands of modules (the worker code, an SDK: `import anthropic` alone
defines over a thousand classes); with the collector off that is about a sixth faster, and the
objects stay where they are. `agentrun/preload_clients.py`, the last preload, freezes them
before the first fork and each worker turns the collector back on (`pool._worker_main`), so a
worker's collections never walk, nor copy, the heap it inherited (the standard library's advice
for a server that forks: `gc.freeze`).

Every worker would otherwise also start a bwrap process of its own to find out whether
bubblewrap works (tens of milliseconds each, at the moment a wave's workers all start). The
question runs in a thread while the server imports; the last preload waits for the answer, so
no thread runs when the server forks and every worker inherits the cached answer
(`sandbox.jail.unavailable_reason`).
"""

from __future__ import annotations

import gc
import threading

from agentrun.sandbox.jail import unavailable_reason

gc.disable()

_probe = threading.Thread(target=unavailable_reason, name="agentrun-bwrap-probe", daemon=True)
_probe.start()


def wait() -> None:
    """Until the answer is in (the server must not fork while the probe's thread runs)."""
    _probe.join()
