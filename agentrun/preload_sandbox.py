"""The worker pool's server's first preload: whether bubblewrap works here, asked once.

Every worker would otherwise start a bwrap process of its own to find out (tens of
milliseconds each, at the moment a wave's workers all start). The question runs in a thread
while the server imports the worker code and the SDK; `agentrun/preload_clients.py`, the last
preload, waits for the answer, so no thread runs when the server forks and every worker
inherits the cached answer (`sandbox.jail.unavailable_reason`).
"""

from __future__ import annotations

import threading

from agentrun.sandbox.jail import unavailable_reason

_probe = threading.Thread(target=unavailable_reason, name="agentrun-bwrap-probe", daemon=True)
_probe.start()


def wait() -> None:
    """Until the answer is in (the server must not fork while the probe's thread runs)."""
    _probe.join()
