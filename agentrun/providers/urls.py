"""Server URLs as they may be shown: without userinfo, query string or fragment.

A proxy URL can carry credentials (`https://user:pass@proxy/v1`, `?api-key=...`). The real URL
reaches the SDK in the process that makes the call (read from the environment or the user-level
config there); everywhere else — assignments, transcripts, results, the spec's Execution
Summary, the execution state, error messages — carries the public form.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>`]+")


def public_url(url: str) -> str:
    """`url` without userinfo, query string and fragment."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # not parseable: keep only what surely holds no credentials
        return url.split("@")[-1].split("?")[0].split("#")[0]
    if ":" in host:
        host = f"[{host}]"
    return urlunsplit((parts.scheme, host + port, parts.path, "", ""))


def scrub_urls(text: str) -> str:
    """Every URL in `text` that carries userinfo or a query, in its public form."""
    return _URL.sub(lambda m: public_url(m.group(0)) if _private(m.group(0)) else m.group(0),
                    text)


def url_secrets(url: str) -> list[str]:
    """The parts of `url` that are credentials (the whole URL, its password, its query), for
    redaction of text that quotes them some other way."""
    if not _private(url):
        return []
    parts = urlsplit(url)
    found = [url, parts.query]
    if parts.password:
        found += [parts.password, unquote(parts.password)]
    found += [value for _, _, value in (p.partition("=") for p in parts.query.split("&"))]
    return [s for s in found if s]


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


def _private(url: str) -> bool:
    rest = url.split("://", 1)[-1]
    return "@" in rest.split("/", 1)[0] or "?" in url or "#" in url
