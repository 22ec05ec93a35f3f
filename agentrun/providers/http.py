"""The model SDKs' HTTP clients: one TLS context per process, and a call answered in memory.

Left to itself, every SDK client builds its own TLS context (loading the system's CA bundle,
about 0.1 s of CPU), and the SDK's first reply builds the pydantic schemas of the reply's types
and imports its tracing helpers (another 0.05–0.1 s). On a small machine the workers of a wave
pay that at the same moment. So the adapters build their clients with `http_client`, whose TLS
context is made once per process, and the worker pool's server warms them up before it forks
(`agentrun/preload_clients.py`): every worker inherits the context, the schemas and the imports,
and its first model call costs only the call.

Nothing here changes what a client does: `DefaultHttpxClient` is the SDK's own client with its
own defaults (timeouts, connection limits, redirects, proxies from the environment), and the
TLS context is the one its HTTP library would have made (`create_ssl_context`, which honours
`SSL_CERT_FILE` and `SSL_CERT_DIR`).
"""

from __future__ import annotations

import os
import sys
import threading
from types import ModuleType
from typing import Any

_contexts: dict[tuple[str, str | None, str | None], Any] = {}
_lock = threading.Lock()


def http_library(sdk: ModuleType) -> ModuleType | None:
    """The HTTP library the SDK's client is built on (httpx, or a fork of it), if loaded."""
    for cls in getattr(getattr(sdk, "DefaultHttpxClient", None), "__mro__", ()):
        top = cls.__module__.partition(".")[0]
        if top not in (sdk.__name__, "builtins"):
            return sys.modules.get(top)
    return None


def tls_context(library: ModuleType) -> Any:
    """The process's TLS context for `library`'s clients, made on first use; None when the
    library cannot make one (its clients then make their own)."""
    make = getattr(library, "create_ssl_context", None)
    if make is None:
        return None
    key = (library.__name__, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    with _lock:
        if key not in _contexts:
            _contexts[key] = make()
        return _contexts[key]


def http_client(sdk: ModuleType, transport: Any = None) -> Any:
    """An HTTP client for an `sdk` client: the SDK's `DefaultHttpxClient`, sharing the
    process's TLS context, or answering through `transport` instead of the network. None when
    the SDK offers no such client: it then builds its own, as it always did."""
    factory = getattr(sdk, "DefaultHttpxClient", None)
    library = http_library(sdk)
    if factory is None or library is None:
        return None
    if transport is not None:
        return factory(transport=transport)
    context = tls_context(library)
    return None if context is None else factory(verify=context)


def memory_transport(sdk: ModuleType, reply: dict[str, Any]) -> Any:
    """A transport for `http_client` that answers every request with `reply` (JSON, 200)
    without a socket; None when the SDK's HTTP library has no mock transport."""
    library = http_library(sdk)
    mock = getattr(library, "MockTransport", None)
    response = getattr(library, "Response", None)
    if mock is None or response is None:
        return None
    return mock(lambda _request: response(200, json=reply))
