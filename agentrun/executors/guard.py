"""A coding-agent CLI held to the same limits as agentrun's own loop, while it runs.

The CLI runs its own tool loop, so the limits that agentrun's loop checks between steps
(agent/terminator.py, agent/breakers.py) are checked here on what the CLI reports as it goes:
each model call's tokens count against the worker's token budget and the run's spending cap as
they come; each tool result feeds the stuck-loop breaker (the same failing call, same
arguments, same error, `stuck_repeats` times in a row) and the count of failed calls in a row
(`max_consecutive_failures`). When a limit is reached the CLI's processes are stopped at once
and the attempt ends with that limit as its stop reason and a sentence saying which; the
wall-clock limit is the sandbox's timeout, an interrupt the `CancelWatcher`'s. The key proxy
asks `before_call` before it forwards each model call, so that a call the run's spending cap
no longer allows is never made (and waits while the worker's allowance is being raised).

The CLI's stdout and its model calls are two channels read by two threads: the call that
carries a tool result can reach the key proxy before the line that reports it has been read.
So the gate first catches up with the stream (`catch_up`: it reads, at once, all the CLI
wrote before it sent the call), then, for a CLI that may send the call before it writes the
line, also judges the request itself: the tool results it carries that the stream has not
reported yet (by call id, when the executor can read its API's bodies: `sent`) are weighed
on a copy of the breakers, and a call that the stream's report would stop is not made. The
body is untrusted (whatever holds the proxy's token can send one): what it says can only stop
the CLI, never reset a breaker, and a body that cannot be read is judged as before.
"""

from __future__ import annotations

import contextlib
import copy
import signal
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from agentrun.agent.allowance import Grant
from agentrun.agent.breakers import StuckDetector, call_signature
from agentrun.agent.terminator import Limits
from agentrun.core.status import StopReason
from agentrun.core.usage import Usage
from agentrun.executors.base import Budget
from agentrun.sandbox.base import Sandbox


@dataclass(frozen=True)
class CliToolResult:
    """One of the CLI's tool calls and how it ended; `call_id` names the call (None when the
    CLI gives no id), so that the same result read twice counts once."""

    call_id: str | None
    name: str
    arguments: Any
    content: str
    is_error: bool


# the tool results a model call's request body carries, in the conversation's order
SentResults = Callable[[bytes], Iterable[CliToolResult]]


class Breakers:
    """The stuck-loop breaker and the count of failed calls in a row, fed one tool result at
    a time; `feed` says why the CLI must stop, or None."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.failures = 0  # tool calls in a row that failed
        self.stuck = StuckDetector(limits.stuck_repeats)

    def feed(self, result: CliToolResult) -> str | None:
        if not result.is_error:
            self.failures = 0
            self.stuck.clear()
            return None
        self.failures += 1
        name, content = result.name, result.content
        args = result.arguments if isinstance(result.arguments, dict) \
            else {"input": result.arguments}
        repeated = self.stuck.record("", call_signature(name, args, content, True))
        if repeated:
            return (f"stuck: `{name}` was called {len(repeated)} times in a row with the same "
                    f"arguments and failed the same way ({_first_line(content)})")
        if self.failures >= self.limits.max_consecutive_failures:
            return (f"circuit breaker: {self.failures} tool calls in a row failed (last: "
                    f"`{name}`: {_first_line(content)})")
        return None

    def copy(self) -> Breakers:
        twin = Breakers(self.limits)
        twin.failures, twin.stuck = self.failures, copy.deepcopy(self.stuck)
        return twin


class CliGuard:
    """Limits of one CLI attempt; `halt` stops the CLI (its sandbox's processes). `sent`
    reads the tool results a request body carries (None: the bodies are not read)."""

    def __init__(self, limits: Limits, budget: Budget, sandbox: Sandbox,
                 record: Any = None, sent: SentResults | None = None) -> None:
        self.limits, self.budget, self.sandbox = limits, budget, sandbox
        self.record = record or (lambda *_a, **_k: None)
        self.sent = sent
        self.stop: StopReason | None = None
        self.error: str | None = None
        self.charged = Usage()  # what this attempt's calls added to the budget so far
        self.breakers = Breakers(limits)  # fed by the stream only
        self.reported: set[str] = set()  # the call ids of the results the stream reported
        self.catch_up: Callable[[], None] = lambda: None  # reads what the CLI wrote so far
        self._lock = threading.Lock()

    # -- what the CLI reports ---------------------------------------------------------------
    def charge(self, usage: Usage) -> None:
        """A model call's tokens, as soon as they are known."""
        if not usage.total:
            return
        with self._lock:
            self.charged = self.charged + usage
        tokens = self.budget.tokens
        tokens.add(usage)
        if tokens.exhausted:
            self.halt(StopReason.BUDGET, f"token budget exhausted ({tokens.used} of "
                                         f"{tokens.budget} tokens)")
        else:
            self.check_cap()

    def settle(self, reported: Usage) -> Usage:
        """The attempt ended: charge what the CLI's own total says beyond what was charged
        call by call (requests it did not report one by one); the attempt's usage."""
        with self._lock:
            charged = self.charged
        extra = Usage(*(max(0, a - b) for a, b in zip(reported.to_dict().values(),
                                                      charged.to_dict().values(), strict=True)))
        if extra.total:
            self.budget.tokens.add(extra)
            with self._lock:
                self.charged = self.charged + extra
        return charged + extra

    def tool_result(self, result: CliToolResult) -> None:
        """The stream says one of the CLI's tool calls ended: the stuck-loop breaker and
        failures in a row."""
        with self._lock:
            if result.call_id is not None:
                if result.call_id in self.reported:
                    return
                self.reported.add(result.call_id)
            why = self.breakers.feed(result)
        if why is not None:
            self.halt(StopReason.CIRCUIT_BREAKER, why)

    def check_cap(self) -> None:
        """Stop the CLI when the run has said stop, or its allowance is spent and final."""
        allowance = self.budget.allowance
        if allowance is None or self.stop is not None:
            return
        grant = Grant.read(allowance.path)
        if grant.stop or (grant.final and allowance.price(self.budget.tokens.usage)
                          >= grant.usd):
            self.halt(StopReason.COST_CAP, "stopped at the run's spending cap: no further "
                                           "model call")

    # -- asked before each model call (by the key proxy) --------------------------------------
    def before_call(self, body: bytes | None = None) -> str | None:
        """None when the CLI's next model call (its request `body`) may go out; else why not
        (the CLI is being stopped). May wait while the worker's allowance of the spending cap
        is raised."""
        with contextlib.suppress(OSError, ValueError):  # the CLI's output pipe, just closed
            self.catch_up()
        if self.stop is None and body and self.sent is not None:
            why = self.ahead(body, self.sent)
            if why is not None:
                self.halt(StopReason.CIRCUIT_BREAKER, why)
        if self.stop is not None:
            return self.error
        reason = self.budget.before_call()
        if reason == "cost_cap":
            self.halt(StopReason.COST_CAP, "stopped at the run's spending cap: no further "
                                           "model call")
        return self.error if self.stop is not None else reason

    def ahead(self, body: bytes, sent: SentResults) -> str | None:
        """Why the tool results in `body` that the stream has not reported yet stop the CLI,
        weighed after those it reported (on a copy: only the stream's report moves the
        breakers); None when they do not, or when the body cannot be read."""
        try:
            results = list(sent(body))
            with self._lock:
                trial = self.breakers.copy()
                reported = set(self.reported)
            for result in results:
                if result.call_id is None or result.call_id in reported:
                    continue
                reported.add(result.call_id)
                why = trial.feed(result)
                if why is not None:
                    return why
        except Exception:  # noqa: BLE001 - an untrusted body: judged on the stream alone
            return None
        return None

    def halt(self, stop: StopReason, error: str) -> None:
        with self._lock:
            if self.stop is not None:
                return
            self.stop, self.error = stop, error
        self.record("cli_halted", stop_reason=str(stop), error=error)
        self.sandbox.kill_all(signal.SIGTERM)


def _first_line(text: str, limit: int = 160) -> str:
    line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "(no output)")
    return line if len(line) <= limit else line[: limit - 3] + "..."
