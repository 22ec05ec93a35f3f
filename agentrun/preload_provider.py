"""The worker pool's server's preload that imports the run's SDK, once the run has named its
provider (agentrun/pool_handoff.py). A server started with its provider known has the SDK in its
preload list instead, and this module does nothing."""

from __future__ import annotations

import contextlib
import importlib
import os

from agentrun.pool_handoff import receive
from agentrun.providers.catalog import preload_modules

_provider = receive(os.environ)
for _module in preload_modules(_provider) if _provider else []:
    with contextlib.suppress(ImportError):  # a worker that needs it will say so
        importlib.import_module(_module)
