"""The worker pool's server's preload that makes the process's TLS context while the SDK is
imported (agentrun/providers/http.py, `tls_context`).

Loading the CA bundle is most of what the context costs (about 30 ms of CPU), and the standard
library loads it without holding the GIL. So a thread makes the context on the server's other
core as soon as the SDK has imported its HTTP library, early in its import, while the main
thread goes on importing the SDK. The last preload (`agentrun.preload_clients`) stops the
thread and waits for it, so that no thread runs when the server forks. A library other than
the ones looked for is no loss: the last preload then makes the context, as without this one.
"""

from __future__ import annotations

import contextlib
import sys
import threading

from agentrun.providers.http import LIBRARIES, tls_context

_stop = threading.Event()
_LOOK_EVERY_S = 0.005


def _make_once_imported() -> None:
    while not _stop.is_set():
        for name in LIBRARIES:
            library = sys.modules.get(name)
            if library is not None and hasattr(library, "create_ssl_context"):
                with contextlib.suppress(Exception):  # the last preload tries again
                    tls_context(library)
                return
        _stop.wait(_LOOK_EVERY_S)


_thread = threading.Thread(target=_make_once_imported, name="agentrun-tls", daemon=True)
_thread.start()


def wait() -> None:
    """Stop looking, and wait for a context being made (the server must not fork while the
    thread runs)."""
    _stop.set()
    _thread.join()
