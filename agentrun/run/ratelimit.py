"""A model rate limit that outlasts what agentrun waits for stops the run.

A worker whose model server asks for a longer wait than agentrun sits through (or stays limited
through every retry) stops at once with `rate_limited` (agent/modelcall.py) and says so in its
progress. The limit is the account's, so every worker would meet it: from then on no new worker
starts, the running ones end on their own (at their next limited call, or done), and the run
ends with `stop_reason: rate_limited`, resumable with `--resume` once the limit has passed.
"""

from __future__ import annotations

from collections.abc import Mapping

from agentrun.core.events import AgentRateLimitedEvent, BaseEvent, EventSink, RateLimitStopEvent
from agentrun.run.backends import WorkerHandle


class RateLimitStop:
    """The execute loop's gate for rate limits: closed once a worker met one."""

    def __init__(self, emit: EventSink) -> None:
        self.emit = emit
        self.error: str | None = None  # the first limit met, as the worker put it
        self.batch: str | None = None

    def observe(self, event: BaseEvent) -> None:
        """A relayed progress event: a worker stopped on a rate limit."""
        if isinstance(event, AgentRateLimitedEvent):
            self.hit(event.batch, event.error)

    def hit(self, batch: str, error: str) -> None:
        if self.error is None:
            self.error, self.batch = error, batch
            self.emit(RateLimitStopEvent(batch=batch, error=error))

    def closed(self) -> bool:
        return self.error is not None

    def tend(self, running: Mapping[str, WorkerHandle]) -> None:
        """Running workers are left to end by themselves: work without a model call (a long
        test run) is not lost for a limit that only the next call would meet."""

    def summary(self) -> str:
        return (f"the model's rate limit stopped the run (worker {self.batch}): {self.error}; "
                "no further worker was started")
