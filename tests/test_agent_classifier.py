"""Error classification of tool results and provider errors."""

from __future__ import annotations

import pytest

from agentrun.agent.breakers import CircuitBreaker
from agentrun.agent.classifier import (
    Decision,
    ErrorClassifier,
    classify_provider_error,
    is_infrastructure,
)
from agentrun.providers import errors as pe
from agentrun.providers.base import ToolCall
from agentrun.tools.base import (
    COMMAND_DENIED,
    COMMAND_FAILED,
    INVALID_ARGUMENTS,
    NOT_FOUND,
    PATH_DENIED,
    ToolResult,
)


def fresh() -> ErrorClassifier:
    return ErrorClassifier(CircuitBreaker(), stuck_repeats=3, denials_before_escalation=2)


def failing(i: int, kind: str) -> tuple[ToolCall, ToolResult]:
    return (ToolCall(id=f"c{i}", name="run_command", arguments={"command": f"cmd {i}"}),
            ToolResult.error(kind, f"failure {i}"))


@pytest.mark.parametrize("kind", [INVALID_ARGUMENTS, NOT_FOUND, COMMAND_FAILED])
def test_self_correctable_errors_continue(kind):
    classifier = fresh()
    verdict = classifier.tool_result(*failing(1, kind))
    assert verdict.decision is Decision.CONTINUE and verdict.call_ids == ("c1",)


@pytest.mark.parametrize("kind", [PATH_DENIED, COMMAND_DENIED])
def test_repeated_denials_escalate(kind):
    classifier = fresh()
    assert classifier.tool_result(*failing(1, kind)).decision is Decision.CONTINUE
    assert classifier.tool_result(*failing(2, kind)).decision is Decision.ESCALATE
    classifier.forgive_denials()
    assert classifier.tool_result(*failing(3, kind)).decision is Decision.CONTINUE


def test_errors_after_a_forced_reflection_backtrack():
    classifier = fresh()
    for i in range(3):
        classifier.tool_result(*failing(i, NOT_FOUND))
    assert classifier.breaker.should_reflect()
    classifier.breaker.reflection_forced()
    assert not classifier.breaker.should_reflect()
    assert classifier.tool_result(*failing(9, NOT_FOUND)).decision is Decision.BACKTRACK
    classifier.backtracked()
    assert classifier.breaker.backtracks == 1 and classifier.breaker.consecutive_errors == 0


def test_a_success_resets_the_error_streak():
    classifier = fresh()
    classifier.tool_result(*failing(1, NOT_FOUND))
    classifier.tool_result(*failing(2, NOT_FOUND))
    ok = ToolResult("fine")
    assert classifier.tool_result(ToolCall("c3", "list_files", {}), ok).decision \
        is Decision.CONTINUE
    assert classifier.breaker.consecutive_errors == 0


def test_identical_failures_are_stuck():
    classifier = fresh()
    call, result = failing(1, COMMAND_FAILED)
    decisions = [classifier.tool_result(ToolCall(f"x{i}", call.name, call.arguments),
                                        result).decision for i in range(3)]
    assert decisions == [Decision.CONTINUE, Decision.CONTINUE, Decision.BACKTRACK]


@pytest.mark.parametrize(("error", "decision"), [
    (pe.AuthenticationFailed("no"), Decision.ESCALATE),
    (pe.NotConfigured("no"), Decision.ESCALATE),
    (pe.BadRequest("too long"), Decision.FAIL_GRACEFULLY),
    (pe.RateLimited("slow down"), Decision.FAIL_GRACEFULLY),  # once retries are used up
])
def test_provider_errors(error, decision):
    assert classify_provider_error(error, work_done=True).decision is decision


def test_infrastructure_errors_are_the_retryable_ones():
    assert all(is_infrastructure(e("x")) for e in (
        pe.RateLimited, pe.ServerError, pe.ConnectionFailed, pe.ModelTimeout,
        pe.MalformedResponse))
    assert not any(is_infrastructure(e("x")) for e in (pe.BadRequest, pe.AuthenticationFailed))
