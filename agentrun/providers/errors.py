"""Provider errors: SDK exceptions classified into types the agent loop can act on."""

from __future__ import annotations

from agentrun.core.errors import EXIT_CANNOT_START, AgentrunError
from agentrun.core.secrets import scrub_urls


class ProviderError(AgentrunError):
    """A model call failed. `retryable` says whether waiting and trying again can help.

    Its texts are stored (results, transcripts, the spec's Execution Summary), so URLs in them
    lose their credentials here, whichever code raised it."""

    retryable = False

    def __init__(self, message: str, hint: str | None = None, *,
                 retry_after: float | None = None, retryable: bool | None = None) -> None:
        super().__init__(scrub_urls(message), scrub_urls(hint) if hint else hint)
        self.retry_after = retry_after  # seconds the server asked to wait, if it said
        if retryable is not None:  # the server said (`x-should-retry`)
            self.retryable = retryable


class RateLimited(ProviderError):
    """429: too many requests or tokens for the account's limit."""

    retryable = True


class ServerError(ProviderError):
    retryable = True


class Overloaded(ServerError):
    """529 / 503: the provider has no capacity now; waiting is the remedy, as for a 429."""


class ConnectionFailed(ProviderError):
    retryable = True


class ModelTimeout(ProviderError):
    retryable = True


class AuthenticationFailed(ProviderError):
    exit_code = EXIT_CANNOT_START


class BadRequest(ProviderError):
    """The request was rejected (invalid model name, context too long, malformed tools)."""


class MalformedResponse(ProviderError):
    """The server answered with something that is not a valid response (e.g. broken JSON)."""

    retryable = True


class NotConfigured(ProviderError):
    """No provider or model could be resolved, or a required key is missing."""

    exit_code = EXIT_CANNOT_START
