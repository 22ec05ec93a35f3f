"""Calling the model: infrastructure retries with backoff, and cancellation that does not wait
for a slow reply.

Rate limits, 5xx, timeouts, dropped connections and malformed bodies are retried here, never
shown to the model: `Retry-After` is honoured, otherwise the delay doubles from 1 s up to 30 s.
The call itself runs on a daemon thread so that an interrupt or the deadline stops the agent
within a fraction of a second even while a reply is slow; the abandoned reply is discarded.
"""

from __future__ import annotations

import threading
from typing import Any

from agentrun.agent.classifier import is_infrastructure
from agentrun.agent.runtime import Runtime
from agentrun.providers.base import Request, Turn
from agentrun.providers.errors import ProviderError

BASE_DELAY_S = 1.0
MAX_DELAY_S = 30.0
MAX_RETRY_AFTER_S = 300.0
POLL_S = 0.02


class Stopped(Exception):
    """The execution was interrupted or ran out of time while waiting for the model."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def backoff_delay(retry: int, retry_after: float | None) -> float:
    """Seconds to wait before retry number `retry` (0-based)."""
    if retry_after is not None and retry_after >= 0:
        return min(float(retry_after), MAX_RETRY_AFTER_S)
    return min(BASE_DELAY_S * 2 ** retry, MAX_DELAY_S)


def call_model(rt: Runtime, request: Request, **where: Any) -> Turn:
    """One model turn, retrying infrastructure errors up to `limits.infra_retries` times.

    Raises `Stopped` on interrupt/timeout, or the last `ProviderError` when retrying cannot
    help (or retries are used up).
    """
    retry = 0
    while True:
        reason = rt.stop_requested()
        if reason:
            raise Stopped(reason)
        try:
            return _complete(rt, request)
        except ProviderError as exc:
            if not is_infrastructure(exc) or retry >= rt.limits.infra_retries:
                raise
            delay = backoff_delay(retry, exc.retry_after)
            retry += 1
            rt.record("infra_retry", error=f"{type(exc).__name__}: {exc}", retry=retry,
                      max_retries=rt.limits.infra_retries, delay_s=delay, **where)
            rt.wait(delay)


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
