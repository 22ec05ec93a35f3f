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
"""

from __future__ import annotations

import signal
import threading
from typing import Any

from agentrun.agent.allowance import Grant
from agentrun.agent.breakers import StuckDetector, call_signature
from agentrun.agent.terminator import Limits
from agentrun.core.status import StopReason
from agentrun.core.usage import Usage
from agentrun.executors.base import Budget
from agentrun.sandbox.base import Sandbox


class CliGuard:
    """Limits of one CLI attempt; `halt` stops the CLI (its sandbox's processes)."""

    def __init__(self, limits: Limits, budget: Budget, sandbox: Sandbox,
                 record: Any = None) -> None:
        self.limits, self.budget, self.sandbox = limits, budget, sandbox
        self.record = record or (lambda *_a, **_k: None)
        self.stop: StopReason | None = None
        self.error: str | None = None
        self.charged = Usage()  # what this attempt's calls added to the budget so far
        self.failures = 0  # tool calls in a row that failed
        self.stuck = StuckDetector(limits.stuck_repeats)
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

    def tool_result(self, name: str, arguments: Any, content: str, is_error: bool) -> None:
        """One of the CLI's tool calls ended: the stuck-loop breaker and failures in a row."""
        if not is_error:
            self.failures = 0
            self.stuck.clear()
            return
        self.failures += 1
        args = arguments if isinstance(arguments, dict) else {"input": arguments}
        repeated = self.stuck.record("", call_signature(name, args, content, True))
        if repeated:
            self.halt(StopReason.CIRCUIT_BREAKER,
                      f"stuck: `{name}` was called {len(repeated)} times in a row with the "
                      f"same arguments and failed the same way ({_first_line(content)})")
        elif self.failures >= self.limits.max_consecutive_failures:
            self.halt(StopReason.CIRCUIT_BREAKER,
                      f"circuit breaker: {self.failures} tool calls in a row failed (last: "
                      f"`{name}`: {_first_line(content)})")

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
    def before_call(self) -> str | None:
        """None when the CLI's next model call may go out; else why not (the CLI is being
        stopped). May wait while the worker's allowance of the spending cap is raised."""
        if self.stop is not None:
            return self.error
        reason = self.budget.before_call()
        if reason == "cost_cap":
            self.halt(StopReason.COST_CAP, "stopped at the run's spending cap: no further "
                                           "model call")
        return self.error if self.stop is not None else reason

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
