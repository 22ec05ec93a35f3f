"""Before a run creates anything: the model endpoint answers, and accepts the key.

Without this, an unreachable server or a wrong key was found by the first worker, after its
worktree was made and after the SDK's retries (12 s and more), and the worktree stayed behind.
One cheap request finds it first: the models list (`GET /v1/models`), which both APIs and the
OpenAI-compatible servers answer without spending tokens. A server without that list still
answers it (404), which proves it is there. The standard library makes the request: importing
a model SDK costs more than the check.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

from agentrun.core.errors import BadInput
from agentrun.core.secrets import public_url, scrub_urls
from agentrun.providers.catalog import ProviderConfig, provider_spec

TIMEOUT_S = 5.0
# where the SDKs go without a base URL; the models list lies below it
DEFAULT_URLS = {"anthropic": "https://api.anthropic.com", "openai": "https://api.openai.com/v1"}
MODELS_PATH = {"anthropic": "/v1/models", "openai": "/models"}
ANTHROPIC_VERSION = "2023-06-01"
# the key (or the proxy's credentials) was not accepted; a 403 is not among them: a key
# restricted to some endpoints may not list the models, yet make the calls a run needs
REFUSED = (401, 407)


class EndpointUnusable(BadInput):
    """The model endpoint cannot be reached or refuses the key (exit 2)."""


@dataclass(frozen=True)
class EndpointCheck:
    url: str  # public form: no credentials
    status: int
    seconds: float

    def describe(self) -> str:
        return f"{self.url} answered (HTTP {self.status}, {self.seconds:.1f}s)"


def check_endpoint(cfg: ProviderConfig, env: Mapping[str, str],
                   timeout_s: float = TIMEOUT_S) -> EndpointCheck | None:
    """Ask the endpoint of `cfg` for its models list with the configured key; None for a
    provider that calls no server (scripted). Raises `EndpointUnusable` naming the endpoint
    when it does not answer within `timeout_s` or refuses the key."""
    spec = provider_spec(cfg.provider)
    if spec.needs_script or cfg.provider not in DEFAULT_URLS:
        return None
    url = (env.get(spec.base_url_var) if spec.base_url_var else None) or \
        DEFAULT_URLS[cfg.provider]
    key = env.get(spec.key_var) if spec.key_var else None
    request = _request(cfg.provider, url, key)
    shown = public_url(request.full_url)
    result: list[int | BaseException] = []
    started = time.monotonic()

    def ask() -> None:
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                result.append(response.status)
        except urllib.error.HTTPError as exc:
            result.append(exc)
        except Exception as exc:  # noqa: BLE001 - every way of not answering is reported
            result.append(exc)

    # a name that does not resolve is not bound by the socket's timeout: wait in a thread
    worker = threading.Thread(target=ask, daemon=True)
    worker.start()
    worker.join(timeout_s + 0.5)
    seconds = time.monotonic() - started
    where = f"the model endpoint {shown}"
    var = spec.base_url_var or "the base URL"
    if not result:
        raise EndpointUnusable(f"{where} did not answer within {timeout_s:g}s",
                               hint=f"check {var} and the network; the run created nothing")
    outcome = result[0]
    if isinstance(outcome, urllib.error.HTTPError):
        if outcome.code in REFUSED:
            what = "proxy credentials" if outcome.code == 407 else \
                f"key in {spec.key_var}" if key else "request without a key"
            raise EndpointUnusable(
                f"{where} refused the {what}: HTTP {outcome.code}{_detail(outcome)}",
                hint=f"check {spec.key_var or 'the key'} (and {var}); the run created nothing")
        return EndpointCheck(shown, outcome.code, seconds)  # it answered: it is there
    if isinstance(outcome, BaseException):
        reason = getattr(outcome, "reason", None) or outcome
        raise EndpointUnusable(f"cannot reach {where}: {scrub_urls(str(reason))}",
                               hint=f"check {var} and the network; the run created nothing")
    return EndpointCheck(shown, outcome, seconds)


def _request(provider: str, url: str, key: str | None) -> urllib.request.Request:
    """GET the models list below `url` as the SDK would address it: the URL's query string
    on the request, its userinfo as basic authentication."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
    path = parts.path.rstrip("/") + MODELS_PATH[provider]
    headers = {"accept": "application/json", "user-agent": "agentrun-preflight"}
    if provider == "anthropic":
        headers["anthropic-version"] = ANTHROPIC_VERSION
        if key:
            headers["x-api-key"] = key
    elif key:
        headers["authorization"] = f"Bearer {key}"
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        headers["authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    return urllib.request.Request(urlunsplit((parts.scheme, netloc, path, parts.query, "")),
                                  headers=headers, method="GET")


def _detail(error: urllib.error.HTTPError) -> str:
    """The error message an API put in its body, briefly."""
    try:
        body = json.loads(error.read(4096) or b"{}")
    except (ValueError, OSError):
        return ""
    inner = body.get("error") if isinstance(body, dict) else None
    message = inner.get("message") if isinstance(inner, dict) else None
    return f" ({scrub_urls(str(message))[:200]})" if message else ""
