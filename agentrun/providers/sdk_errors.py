"""Classify exceptions of the `anthropic` / `openai` SDKs into our `ProviderError` types.

Both SDKs (generated from one template) expose the same exception class names, so one function
serves both; the SDK module is passed in, never imported here. Messages never contain the key, nor
credentials of a server URL (errors.py strips them from every URL).
"""

from __future__ import annotations

import email.utils
import json
import time
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

from agentrun.core.secrets import public_url, redact
from agentrun.providers.errors import (
    AuthenticationFailed,
    BadRequest,
    ConnectionFailed,
    MalformedResponse,
    ModelTimeout,
    Overloaded,
    ProviderError,
    RateLimited,
    ServerError,
)

_E = TypeVar("_E", bound=ProviderError)


@dataclass(frozen=True)
class ErrorContext:
    """What a message and hint need: who we called, where, and which variables configure it."""

    provider: str  # "anthropic" / "openai"
    model: str
    key_var: str  # e.g. ANTHROPIC_API_KEY
    base_url_var: str  # e.g. ANTHROPIC_BASE_URL
    base_url: str | None
    secrets: tuple[str, ...] = ()


def classify(exc: BaseException, sdk: ModuleType, ctx: ErrorContext) -> ProviderError:
    """Map one SDK exception to the `ProviderError` the agent loop can act on (the SDK makes
    one request: whether and when to retry is agent/modelcall.py's call)."""
    where = public_url(ctx.base_url) if ctx.base_url else f"the {ctx.provider} API"
    if isinstance(exc, json.JSONDecodeError):
        return _redacted(MalformedResponse, ctx,
                         f"{ctx.provider} returned a body that is not valid JSON ({exc.msg})",
                         f"The server at {where} is not speaking the {ctx.provider} API "
                         f"correctly; check {ctx.base_url_var}, or retry.")
    if isinstance(exc, sdk.APITimeoutError):
        return _redacted(ModelTimeout, ctx, f"{ctx.provider} call timed out",
                         "Retry, or raise `timeout_s` in .specflow/config.yaml.")
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        detail = f": {cause}" if cause else ""
        return _redacted(ConnectionFailed, ctx,
                         f"cannot connect to {where}{detail}",
                         f"Check the network, or {ctx.base_url_var} if you set it.")
    if isinstance(exc, sdk.APIResponseValidationError):
        return _redacted(MalformedResponse, ctx,
                         f"{ctx.provider} returned a response of an unexpected shape",
                         f"Check that {where} speaks the {ctx.provider} API; retry.")
    if isinstance(exc, sdk.APIStatusError):
        return _status_error(exc, sdk, ctx)
    return _redacted(ProviderError, ctx, f"{ctx.provider} call failed: {exc}",
                     "Retry; set AGENTRUN_DEBUG=1 to see the details.")


def invalid_response(ctx: ErrorContext, status: int, body: bytes) -> MalformedResponse:
    """A successful status with a body the SDK cannot parse (not UTF-8, not JSON, another
    shape): say so with the status and the body's first bytes, never the decoder's words."""
    where = public_url(ctx.base_url) if ctx.base_url else f"the {ctx.provider} API"
    text = redact(body[:4096].decode("utf-8", errors="replace"), ctx.secrets)
    start = " ".join(text.split())[:80]
    shown = f": {start!r}" if start else " (an empty body)"
    return _redacted(MalformedResponse, ctx,
                     f"the model server returned an invalid response (HTTP {status}){shown}",
                     f"The server at {where} is not speaking the {ctx.provider} API correctly; "
                     f"check {ctx.base_url_var}, or retry.")


def _status_error(exc: Any, sdk: ModuleType, ctx: ErrorContext) -> ProviderError:
    status = getattr(exc, "status_code", 0) or 0
    detail = _server_message(exc)
    msg = f"{ctx.provider} API error {status}: {detail}"
    response = getattr(exc, "response", None)
    wait = {"retry_after": retry_after_seconds(response), "retryable": should_retry(response)}
    if isinstance(exc, sdk.RateLimitError) or status == 429:
        return _redacted(RateLimited, ctx, f"{ctx.provider} rate limit (HTTP 429): {detail}",
                         "Wait and retry, lower --max-parallel, or raise your rate limit.",
                         **wait)
    if status in (503, 529):
        return _redacted(Overloaded, ctx, f"{ctx.provider} is overloaded (HTTP {status}): "
                         f"{detail}", "The provider has no capacity now; retry later.", **wait)
    if isinstance(exc, sdk.AuthenticationError | sdk.PermissionDeniedError):
        return _redacted(AuthenticationFailed, ctx, msg,
                         f"Check {ctx.key_var}: the server rejected the key (status {status}).")
    if isinstance(exc, sdk.InternalServerError) or status >= 500:
        return _redacted(ServerError, ctx, msg, "The provider is failing; retry later.", **wait)
    if status == 408:
        return _redacted(ModelTimeout, ctx, msg, "Retry, or raise `timeout_s`.")
    if isinstance(exc, sdk.NotFoundError):
        return _redacted(BadRequest, ctx, msg,
                         f"Check the model name {ctx.model!r} (--model, AGENTRUN_MODEL or "
                         f"`model` in .specflow/config.yaml) and {ctx.base_url_var}.")
    return _redacted(BadRequest, ctx, msg,
                     "The request was rejected; check the model name and the prompt size.")


def _server_message(exc: Any) -> str:
    """The server's own error message from the body, else the SDK's text; kept short."""
    body = getattr(exc, "body", None)
    text = None
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            text = err.get("message")
        elif isinstance(err, str):
            text = err
    if not isinstance(text, str) or not text:
        text = getattr(exc, "message", None) or str(exc)
    text = " ".join(str(text).split())
    return text if len(text) <= 300 else text[:297] + "..."


def retry_after_seconds(response: Any) -> float | None:
    """Seconds from `retry-after-ms` / `retry-after` (number or HTTP date), if present."""
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_tz(value)
        if parsed is None:
            return None
        return max(0.0, float(email.utils.mktime_tz(parsed) - time.time()))


def should_retry(response: Any) -> bool | None:
    """The server's own word on retrying (`x-should-retry: true|false`), if it gave one: a
    429 for a spent quota says false, and no wait helps then."""
    headers = getattr(response, "headers", None)
    value = headers.get("x-should-retry") if headers is not None else None
    return {"true": True, "false": False}.get(str(value).strip().lower()) if value else None


def _redacted(cls: type[_E], ctx: ErrorContext, message: str, hint: str, **kw: Any) -> _E:
    return cls(redact(message, ctx.secrets), redact(hint, ctx.secrets), **kw)
