"""The retry loop's policy: validation as backpressure, what a failure was, and whether
another attempt can fix it.

A validation command (the project's tests or build) runs whenever an attempt claims success;
a non-zero exit turns the claim into a failure whose error is the command's output. Failures
are sorted into retry conditions so that a run can choose which ones to retry:
build_errors, test_failures, tool_errors, max_steps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from agentrun.core.status import Status, StopReason
from agentrun.sandbox.base import Sandbox
from agentrun.tools.base import TIMEOUT, CommandPolicy
from agentrun.tools.command import execute_command
from agentrun.tools.policy import check_command

_BUILD = [re.compile(p, re.MULTILINE) for p in (
    r"\b(SyntaxError|IndentationError|TabError|ImportError|ModuleNotFoundError)\b",
    r"^ERROR collecting\b",
    r"\berrors? during collection\b",
    r"^\S+?:\d+(:\d+)?:\s*(fatal )?error\b",  # gcc, clang, tsc --pretty false, javac
    r"^error(\[E\d+\])?:",  # rustc, cargo
    r"\berror (CS|TS)\d+\b",  # C#, TypeScript
    r"\b(cannot find symbol|undefined reference to|compilation (failed|terminated))\b",
    r"\bBUILD FAILED\b",
    r"\bcould not compile\b",
)]
_TESTS = [re.compile(p, re.MULTILINE) for p in (
    r"\b\d+ failed\b",  # pytest summary
    r"^FAILED\b",  # pytest -ra / short summary
    r"\bAssertionError\b",
    r"^FAIL\b|^--- FAIL:",  # unittest, go test
    r"\bTests?:\s+\d+ failed\b",  # jest
    r"\btest result: FAILED\b",  # cargo test
)]
_TESTS_RAN = re.compile(r"\b\d+ failed\b|^FAILED\b|test result: FAILED", re.MULTILINE)


def classify_failure_output(output: str) -> str:
    """'build_errors' or 'test_failures' for the output of a failed build/test command.

    Build errors win when only build patterns match or when tests never ran (a collection
    error); when tests ran and failed it is a test failure even if the failure mentions an
    import error. Output that matches neither counts as a test failure, because a validation
    command is most often the test command.
    """
    build = any(p.search(output) for p in _BUILD)
    tests = any(p.search(output) for p in _TESTS)
    if build and (not tests or not _TESTS_RAN.search(output)):
        return "build_errors"
    return "test_failures"


@dataclass
class Validation:
    command: str
    ok: bool
    output: str
    condition: str | None  # build_errors / test_failures when it failed and may be retried
    error: str | None = None


def run_validation(sandbox: Sandbox, worktree: Path, policy: CommandPolicy, command: str,
                   timeout_s: float) -> Validation:
    """Run the validation command in the worktree, in the worker's sandbox, under the policy of
    the agent's own commands (deny list, timeout cap, secret scrubbing), so that the output it
    is judged by reads as the agent's own `run_command` would."""
    refusal = check_command(command, worktree, policy.deny)
    if refusal is not None:  # the agent cannot fix this by trying again
        return Validation(command, False, refusal.message(), None,
                          f"validation command `{command}` could not run: {refusal.message()}")
    timeout = min(float(timeout_s), float(policy.max_timeout_s))
    try:
        result = execute_command(sandbox, command, worktree, policy, timeout)
    except OSError as exc:  # no shell, no worktree: nothing an attempt can fix
        return Validation(command, False, str(exc), None, f"validation command `{command}` "
                          f"could not run: {type(exc).__name__}: {exc}")
    if not result.is_error:
        return Validation(command, True, result.content, None)
    if result.error_kind == TIMEOUT:
        return Validation(command, False, result.content, "test_failures",
                          f"validation command `{command}` timed out after {timeout:g}s")
    return Validation(command, False, result.content, classify_failure_output(result.content),
                      f"validation command `{command}` failed:\n{tail(result.content)}")


def tail(text: str, limit: int = 3_000) -> str:
    """The end of a long output, where build and test tools print their verdict."""
    text = text.strip()
    return text if len(text) <= limit else "...\n" + text[-limit:]


def failure_condition(stop_reason: StopReason | None, status: Status, error: str | None,
                      validation: Validation | None) -> str | None:
    """The retry condition a finished attempt falls under, or None when it must not be retried
    (success, a deliberate partial/blocked report, or a stop that retrying cannot fix)."""
    if validation is not None and not validation.ok:
        return validation.condition
    if stop_reason == "completed":
        if status == "failed":
            text = error or ""
            return classify_failure_output(text) if _mentions_build_or_test(text) \
                else "tool_errors"
        return None
    if stop_reason == "max_steps":
        return "max_steps"
    if stop_reason == "circuit_breaker":
        return "tool_errors"
    return None  # budget, timeout, interrupted, error/escalation: another attempt cannot help


# A model that submits `failed` with its reason has judged the task beyond it: one more try
# with that reason in front of it can help (a fresh look), more at full price rarely do.
SELF_REPORTED_RETRIES = 1


def self_reported_failure(stop_reason: StopReason | None, status: Status, submitted: bool,
                          validation: Validation | None) -> bool:
    """The attempt ended with the model's own `failed` report (not a validation failure,
    limit or error), whose retries `SELF_REPORTED_RETRIES` caps."""
    return (submitted and validation is None and stop_reason == StopReason.COMPLETED
            and status == Status.FAILED)


def _mentions_build_or_test(text: str) -> bool:
    return any(p.search(text) for p in (*_BUILD, *_TESTS))
