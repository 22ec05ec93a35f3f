"""The worker pool's server's last preload: one model call through each SDK adapter it
imported, answered in memory (agentrun/providers/warm_up.py).

What the call makes lazily (the TLS context, the reply types' schemas, the SDK's tracing
helpers) and the host name codec a connection would import are then inherited by every worker
instead of costing each one's first model call.
"""

from __future__ import annotations

import contextlib
import encodings.idna  # noqa: F401 - opening a connection encodes its host name with it
import gc
import sys

from agentrun import preload_sandbox
from agentrun.providers.warm_up import ADAPTERS, warm_up

for _name in ADAPTERS:
    if _name in sys.modules:
        with contextlib.suppress(Exception):  # a preload must never keep workers from starting
            warm_up(_name)
preload_sandbox.wait()  # the first preload's question, answered before any fork
gc.freeze()  # what the server holds now is the workers' inheritance: no collection walks it
