"""Calling the model: the one place that decides whether a failed call is tried again and how
long to wait first, and cancellation that does not wait for a slow reply.

The SDKs make one request per call (their own retries are off). Rate limits (429), an
overloaded provider (529, 503), other 5xx, timeouts, dropped connections and malformed bodies are
retried here, never shown to the model, up to `limits.request_retries` times and `max_wait_s` of
waiting in all: after the wait the server asks for (`retry-after-ms`, `retry-after` in seconds
or as an HTTP date), else after a delay that doubles from 1 s up to 30 s. A wait asked for that
is longer than `limits.max_wait_s` is not sat through: the attempt stops at once with
`rate_limited`, naming the limit and the wait asked for, and the run stops so that `--resume`
continues once the limit has passed. A limit that outlasts the retries, or that the server
says not to retry (`x-should-retry: false`, a spent quota), ends the same way.
The call itself runs on a daemon thread so that an interrupt or the deadline stops the agent
within a fraction of a second even while a reply is slow; the abandoned reply is discarded.
"""

from __future__ import annotations

import threading
from typing import Any

from agentrun.agent.classifier import is_infrastructure
from agentrun.agent.runtime import Runtime
from agentrun.core.events import RateLimitedEvent
from agentrun.providers.base import Request, Turn
from agentrun.providers.errors import Overloaded, ProviderError, RateLimited

BASE_DELAY_S = 1.0
MAX_DELAY_S = 30.0
POLL_S = 0.02


class Stopped(Exception):
    """The call cannot go on: interrupted, out of time, or limited for longer than agentrun
    waits (`reason` is the stop reason, `error` says why in words when there is more to say)."""

    def __init__(self, reason: str, error: str | None = None) -> None:
        super().__init__(error or reason)
        self.reason = reason
        self.error = error


def backoff_delay(retry: int, retry_after: float | None) -> float:
    """Seconds to wait before retry number `retry` (0-based): what the server asked for, else
    the doubling delay."""
    if retry_after is not None and retry_after >= 0:
        return float(retry_after)
    return min(BASE_DELAY_S * 2.0 ** retry, MAX_DELAY_S)


def call_model(rt: Runtime, request: Request, **where: Any) -> Turn:
    """One model turn, retrying infrastructure errors up to `limits.request_retries` times.

    Raises `Stopped` on interrupt, timeout or a rate limit not worth waiting for, or the last
    `ProviderError` when retrying cannot help (or retries are used up).
    """
    retry, waited = 0, 0.0
    while True:
        reason = rt.stop_requested() or rt.call_refused()  # (the cap may wait for allowance)
        if reason:
            raise Stopped(reason)
        try:
            return _complete(rt, request)
        except ProviderError as exc:
            limited = isinstance(exc, RateLimited | Overloaded)
            delay = backoff_delay(retry, exc.retry_after)
            if limited and not exc.retryable:
                raise _limited(rt, exc, "the server says not to retry", where) from exc
            if limited and delay > rt.limits.max_wait_s:
                raise _limited(rt, exc, f"the server asks to wait {_seconds(delay)}, longer "
                               f"than agentrun waits ({_seconds(rt.limits.max_wait_s)})",
                               where, wait_s=round(delay, 3)) from exc
            if not is_infrastructure(exc):
                raise
            if retry >= rt.limits.request_retries or waited + delay > rt.limits.max_wait_s:
                tries = (f"after {retry} retr{'y' if retry == 1 else 'ies'}, "
                         f"{_seconds(waited)} waited")
                if limited:
                    raise _limited(rt, exc, f"still limited {tries}", where) from exc
                exc.message = f"{exc.message} ({tries})"
                raise
            retry += 1
            waited += delay
            rt.record("infra_retry", error=f"{type(exc).__name__}: {exc}", retry=retry,
                      request_retries=rt.limits.request_retries, delay_s=delay, **where)
            rt.wait(delay)


def _limited(rt: Runtime, exc: ProviderError, why: str, where: dict[str, Any],
             **extra: Any) -> Stopped:
    """The attempt stops on a rate limit; the run learns of it from the progress event."""
    error = f"{exc.message}; {why}: stopped, continue later with --resume"
    rt.record("rate_limited", error=error, **extra, **where)
    rt.emit(RateLimitedEvent(error=error, **extra, **where))
    return Stopped("rate_limited", error)


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value >= 10 else f"{value:.2g} s"


def _complete(rt: Runtime, request: Request) -> Turn:
    box: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["turn"] = rt.provider.complete(request)
        except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, name="agentrun-model-call", daemon=True).start()
    while not done.wait(POLL_S):
        reason = rt.stop_requested()
        if reason:
            raise Stopped(reason)
    error = box.get("error")
    if isinstance(error, ProviderError):
        raise error
    if error is not None:
        # The provider contract allows only ProviderErrors; anything else is a bad reply.
        raise ProviderError(f"the model provider failed unexpectedly: "
                            f"{type(error).__name__}: {error}",
                            "run with AGENTRUN_DEBUG=1 and report the transcript") from error
    turn = box["turn"]
    if not isinstance(turn, Turn):
        raise ProviderError(f"the model provider returned {type(turn).__name__}, not a Turn")
    return turn
