"""Limits of one execution and the adaptive terminator that enforces them.

Limits scale with the spec's `complexity`; an agent definition's `max_steps` then applies, and
explicit overrides (flags, config) win over both. The terminator is asked before every model
call whether the attempt must stop, and answers with a stop reason or None.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentrun.core.errors import BadInput
from agentrun.core.limits import DEFAULT_REQUEST_RETRIES, DEFAULT_RETRIES, DEFAULT_TOKEN_BUDGET

if TYPE_CHECKING:
    from agentrun.agent.breakers import CircuitBreaker
    from agentrun.agent.budget import TokenTracker
    from agentrun.agent.definitions import AgentDefinition

RETRY_CONDITIONS = frozenset({"build_errors", "test_failures", "tool_errors", "max_steps"})


@dataclass
class Limits:
    max_steps: int  # model turns per attempt
    max_duration_s: float  # wall clock for the whole execution, all attempts together
    max_consecutive_failures: int  # steps in a row whose tool calls all failed
    token_budget: int = DEFAULT_TOKEN_BUDGET  # for the whole execution, sub-agents included
    retry_on_failure: bool = True
    retries: int = DEFAULT_RETRIES  # fresh attempts after a failed one: attempts = 1 + retries
    retry_conditions: frozenset[str] = field(default_factory=lambda: RETRY_CONDITIONS)
    reflection_after_errors: int = 3  # circuit breaker level 1
    max_backtracks: int = 5  # circuit breaker level 2
    stuck_repeats: int = 3  # same call, same arguments, same result this many times in a row
    request_retries: int = DEFAULT_REQUEST_RETRIES  # of a model call on 429, 529, 5xx, timeouts
    max_wait_s: float = 60.0  # the longest wait before a retry; a server asking more: stop
    subagent_max_steps: int = 10
    denials_before_escalation: int = 2  # PATH_DENIED / COMMAND_DENIED results in one attempt
    confirm_after_steps: int = 20  # long-task confirmation, interactive runs only
    validation_timeout_s: float = 600.0

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["retry_conditions"] = sorted(self.retry_conditions)
        return data


# complexity -> (max_steps, max_duration_s, max_consecutive_failures)
_SCALE = {
    "small": (30, 15 * 60.0, 6),
    "medium": (60, 30 * 60.0, 8),
    "large": (100, 60 * 60.0, 10),
}
_ALIASES = {"simple": "small", "trivial": "small", "low": "small", "s": "small",
            "m": "medium", "moderate": "medium", "normal": "medium",
            "complex": "large", "high": "large", "l": "large", "xl": "large"}


def normalise_complexity(complexity: str | None) -> str:
    """small/medium/large from what specs write; anything unknown counts as medium."""
    key = (complexity or "").strip().lower()
    key = _ALIASES.get(key, key)
    return key if key in _SCALE else "medium"


def limits_for(complexity: str | None, agent: AgentDefinition | None = None,
               overrides: dict[str, Any] | None = None) -> Limits:
    """Limits for a task: complexity scale, then the agent's max_steps, then overrides."""
    steps, duration, failures = _SCALE[normalise_complexity(complexity)]
    limits = Limits(max_steps=steps, max_duration_s=duration, max_consecutive_failures=failures)
    if agent is not None and agent.max_steps:
        limits.max_steps = agent.max_steps
    for key, value in (overrides or {}).items():
        if value is None:
            continue  # an unset flag
        _apply(limits, key, value)
    return limits


def _apply(limits: Limits, key: str, value: Any) -> None:
    names = {f.name: f for f in dataclasses.fields(Limits)}
    if key not in names:
        raise BadInput(f"unknown limit {key!r}", f"valid limits: {', '.join(sorted(names))}")
    if key == "retry_conditions":
        items = [value] if isinstance(value, str) else list(value)
        items = [v.strip() for item in items for v in str(item).split(",") if v.strip()]
        unknown = set(items) - RETRY_CONDITIONS - {"all", "none"}
        if unknown:
            raise BadInput(f"unknown retry condition(s): {', '.join(sorted(unknown))}",
                           f"use any of: {', '.join(sorted(RETRY_CONDITIONS))}, all, none")
        conditions = set(items) & RETRY_CONDITIONS
        if "all" in items:
            conditions = set(RETRY_CONDITIONS)
        limits.retry_conditions = frozenset(conditions)
        return
    current = getattr(limits, key)
    try:
        if isinstance(current, bool):
            converted: Any = _to_bool(value)
        elif isinstance(current, int):
            converted = int(value)
        else:
            converted = float(value)
    except (TypeError, ValueError):
        raise BadInput(f"limit {key!r} must be a {type(current).__name__}, got {value!r}",
                       f"set {key} to a number (or true/false)") from None
    if not isinstance(converted, bool) and converted < (1 if key in _POSITIVE else 0):
        floor = "1 or more" if key in _POSITIVE else "zero or more"
        raise BadInput(f"limit {key!r} is out of range: {value!r}", f"set {key} to {floor}")
    setattr(limits, key, converted)


_POSITIVE = {"max_steps", "max_duration_s", "max_consecutive_failures", "token_budget",
             "reflection_after_errors", "max_backtracks", "stuck_repeats", "subagent_max_steps",
             "denials_before_escalation", "validation_timeout_s"}


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(value)


class Terminator:
    """Decides, between steps, whether an attempt must stop, and why."""

    def __init__(self, limits: Limits, tracker: TokenTracker, *, started: float,
                 clock: Callable[[], float] = time.monotonic,
                 cancelled: Callable[[], bool] = lambda: False) -> None:
        self.limits = limits
        self.tracker = tracker
        self.clock = clock
        self.deadline = started + limits.max_duration_s
        self.cancelled = cancelled

    def check(self, steps: int, consecutive_failures: int, backtracks: int,
              max_steps: int | None = None) -> str | None:
        """The stop reason that applies now, most urgent first, or None to go on."""
        if self.cancelled():
            return "interrupted"
        if self.clock() >= self.deadline:
            return "timeout"
        if self.tracker.exhausted:
            return "budget"
        if backtracks >= self.limits.max_backtracks:
            return "circuit_breaker"
        if consecutive_failures >= self.limits.max_consecutive_failures:
            return "circuit_breaker"
        if steps >= (max_steps if max_steps is not None else self.limits.max_steps):
            return "max_steps"
        return None

    def time_left(self) -> float:
        return self.deadline - self.clock()


def stop_message(reason: str, limits: Limits, tracker: TokenTracker, breaker: CircuitBreaker,
                 max_steps: int) -> str:
    """Why a conversation was stopped, in words for the result's error."""
    if reason == "max_steps":
        return f"reached the step limit ({max_steps}) before finishing"
    if reason == "timeout":
        return f"ran out of time (limit {limits.max_duration_s:g}s)"
    if reason == "budget":
        return f"token budget exhausted ({tracker.used} of {tracker.budget} tokens)"
    if reason == "cost_cap":
        return "stopped at the run's spending cap: no further model call"
    if reason == "circuit_breaker":
        if breaker.tripped:
            return f"circuit breaker: {breaker.backtracks} backtracks, the approach " \
                   f"is beyond recovery"
        return f"circuit breaker: {breaker.failed_steps} consecutive failed steps"
    return reason
