"""Server URLs as the SDKs take them.

A proxy URL can carry credentials; the real URL reaches the SDK in the process that makes the
call (read from the environment or the user-level config there); everywhere else carries its
public form (`agentrun/core/secrets.py`).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit


def sdk_endpoint(url: str | None) -> dict[str, Any]:
    """The SDK client arguments for `url`: a query string (`?api-key=...`, as some proxies
    want) goes to every request as `default_query`; joined into `base_url`, the SDKs would put
    it in the middle of the request path."""
    if not url:
        return {"base_url": None}
    parts = urlsplit(url)
    if not parts.query:
        return {"base_url": url}
    return {"base_url": urlunsplit((*parts[:3], "", "")),
            "default_query": dict(parse_qsl(parts.query, keep_blank_values=True))}
