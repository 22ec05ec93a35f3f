"""Error classification: what the loop does about a failed tool call or model call.

CONTINUE        the model sees the error and corrects itself (bad arguments, missing file,
                a failing command)
BACKTRACK       the approach is not working (stuck repeating itself, errors continue after a
                forced reflection): clean the context and try another way
FAIL_GRACEFULLY unrecoverable, but the work so far is worth reporting (rejected request, model
                unreachable after retries)
ESCALATE        a safety or permission problem (repeated denials, bad credentials): stop and
                report; only an interactive run may ask a person

Infrastructure errors (rate limits, 5xx, timeouts, malformed bodies) never reach the model:
the loop backs off and calls again, see `modelcall.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from agentrun.agent.breakers import CircuitBreaker, StuckDetector, call_signature
from agentrun.providers.base import ToolCall
from agentrun.providers.errors import AuthenticationFailed, NotConfigured, ProviderError
from agentrun.tools.base import COMMAND_DENIED, PATH_DENIED, ToolResult


class Decision(StrEnum):
    CONTINUE = "continue"
    BACKTRACK = "backtrack"
    FAIL_GRACEFULLY = "fail_gracefully"
    ESCALATE = "escalate"

    @property
    def severity(self) -> int:
        return _SEVERITY[self]


_SEVERITY = {Decision.CONTINUE: 0, Decision.BACKTRACK: 1, Decision.FAIL_GRACEFULLY: 2,
             Decision.ESCALATE: 3}
DENIED_KINDS = frozenset({PATH_DENIED, COMMAND_DENIED})


@dataclass
class Verdict:
    decision: Decision
    reason: str
    call_ids: tuple[str, ...] = ()  # calls that make up the failed approach (for cleaning)

    def worse(self, other: Verdict) -> Verdict:
        return other if other.decision.severity > self.decision.severity else self


OK = Verdict(Decision.CONTINUE, "ok")


class ErrorClassifier:
    """Classifies the tool results of one attempt; keeps the counters that need history."""

    def __init__(self, breaker: CircuitBreaker, stuck_repeats: int = 3,
                 denials_before_escalation: int = 2) -> None:
        self.breaker = breaker
        self.stuck = StuckDetector(stuck_repeats)
        self.denials_before_escalation = denials_before_escalation
        self.denials = 0

    def tool_result(self, call: ToolCall, result: ToolResult) -> Verdict:
        signature = call_signature(call.name, call.arguments, result.content, result.is_error)
        stuck_run = self.stuck.record(call.id, signature)
        self.breaker.record(result.is_error)
        if stuck_run:
            return Verdict(Decision.BACKTRACK,
                           f"stuck: `{call.name}` was called {len(stuck_run)} times in a row with "
                           f"the same arguments and got the same result",
                           tuple(stuck_run))
        if not result.is_error:
            return OK
        kind = result.error_kind or "tool_error"
        if kind in DENIED_KINDS:
            self.denials += 1
            if self.denials >= self.denials_before_escalation:
                return Verdict(Decision.ESCALATE,
                               f"permission problem: {self.denials} denied operations "
                               f"(last: {call.name}: {first_line(result.content)})",
                               (call.id,))
            return Verdict(Decision.CONTINUE, f"{kind}: the model may choose another way",
                           (call.id,))
        if self.breaker.reflected:
            return Verdict(Decision.BACKTRACK,
                           f"errors continued after reflection ({call.name}: "
                           f"{first_line(result.content)})", (call.id,))
        return Verdict(Decision.CONTINUE, f"{kind}: the model sees the error", (call.id,))

    def backtracked(self) -> None:
        self.breaker.backtracked()
        self.stuck.clear()

    def forgive_denials(self) -> None:
        """A person allowed the agent to go on after an escalation."""
        self.denials = 0


def classify_provider_error(exc: ProviderError, *, work_done: bool) -> Verdict:
    """A model call that failed for good (after any infrastructure retries)."""
    if isinstance(exc, AuthenticationFailed | NotConfigured):
        return Verdict(Decision.ESCALATE, f"model access failed: {exc}")
    outcome = "partial result kept" if work_done else "nothing was changed"
    return Verdict(Decision.FAIL_GRACEFULLY, f"model call failed ({outcome}): {exc}")


def is_infrastructure(exc: ProviderError) -> bool:
    """Worth waiting and calling again (rate limit, 5xx, timeout, connection, bad body)."""
    return bool(exc.retryable)


def first_line(text: str, limit: int = 160, empty: str = "") -> str:
    """The first non-blank line of a tool's output, cut to `limit` chars (`empty` if none)."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), empty)
    return line if len(line) <= limit else line[: limit - 3] + "..."
