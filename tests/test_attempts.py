"""Attempts above the executor, driven by an executor that is not the built-in loop: snapshot,
validation as backpressure, rollback, and the retry text that carries the failure."""

from __future__ import annotations

import sys
from pathlib import Path

from agent_fixtures import events, make_repo, make_task
from gitutil import status

from agentrun.agent.subagent import Submission
from agentrun.agent.transcript import Transcript
from agentrun.attempts import run_attempts
from agentrun.core.usage import Usage
from agentrun.executors.base import AgentTask, Attempt, AttemptOutcome, Executor
from agentrun.sandbox.local import LocalSandbox

CHECK = f"{sys.executable} -c \"import app; assert app.VALUE == 2, 'VALUE is %r' % app.VALUE\""


class FileWritingExecutor:
    """Writes the files planned for each attempt, then claims success, the way an external
    coding-agent CLI would: no tool loop of ours, one report at the end."""

    def __init__(self, plans: list[dict[str, str]]) -> None:
        self.plans = plans
        self.texts: list[str] = []

    def describe(self) -> dict[str, str]:
        return {"provider": "stub-cli", "model": "stub-1"}

    def run_attempt(self, task: AgentTask, attempt: Attempt) -> AttemptOutcome:
        self.texts.append(attempt.text)
        files = self.plans[attempt.number - 1]
        attempt.before_write()
        for name, content in files.items():
            (Path(task.worktree) / name).write_text(content)
        spent = Usage(input_tokens=100, output_tokens=10)
        attempt.budget.tokens.add(spent)
        names = ", ".join(files)
        return AttemptOutcome(
            stop_reason="completed", status="complete", summary=f"wrote {names}",
            criteria_met=["app works"],
            submission=Submission("complete", f"wrote {names}", ["app works"], [], None),
            steps=3, usage=spent, wrote=True, last_thought="VALUE should be right now",
            last_action=f"write {names}", observation="written")


def run(repo: Path, executor: Executor, **task_kwargs) -> tuple:
    transcript = Transcript(None)
    task = make_task(repo, "Make app.VALUE equal 2.", **task_kwargs)
    outcome = run_attempts(task, executor, LocalSandbox(), transcript=transcript)
    return outcome, transcript


def test_validation_failure_rolls_back_and_retries_with_the_failure(tmp_path):
    repo = make_repo(tmp_path)
    executor = FileWritingExecutor([
        {"app.py": "VALUE = 1\n", "scratch.txt": "left behind\n"},
        {"app.py": "VALUE = 2\n"},
    ])
    outcome, transcript = run(repo, executor, retry_on_failure=True, retries=2,
                              validation_command=CHECK)

    assert outcome.status == "complete" and outcome.attempts == 2
    assert outcome.steps == 6 and outcome.usage == Usage(200, 20)
    assert outcome.criteria_met == ["app works"] and outcome.submitted
    assert [v["ok"] for v in events(transcript, "validation")] == [False, True]
    assert events(transcript, "run_start")[0]["provider"] == "stub-cli"

    first, retry = executor.texts
    assert first == "Make app.VALUE equal 2."
    assert "Previous attempt failed (attempt 1 of 3)" in retry
    assert "VALUE is 1" in retry  # the validation output is fed back
    assert "write app.py, scratch.txt" in retry  # where the attempt left off
    assert retry.rstrip().endswith("Make app.VALUE equal 2.")

    assert len(events(transcript, "rollback")) == 1
    assert not (repo / "scratch.txt").exists()  # the failed attempt's files are gone
    assert (repo / "app.py").read_text() == "VALUE = 2\n"
    assert "scratch.txt" not in status(repo)


def test_without_retries_a_failed_validation_is_the_outcome(tmp_path):
    repo = make_repo(tmp_path)
    executor = FileWritingExecutor([{"app.py": "VALUE = 1\n"}])
    outcome, transcript = run(repo, executor, retry_on_failure=False, validation_command=CHECK)
    assert outcome.status == "failed" and outcome.attempts == 1
    assert outcome.error.startswith(f"validation command `{CHECK}` failed:")
    assert "VALUE is 1" in outcome.error
    assert events(transcript, "rollback") == []
    assert (repo / "app.py").read_text() == "VALUE = 1\n"  # kept for inspection


def test_every_attempt_failing_reports_the_last_failure(tmp_path):
    repo = make_repo(tmp_path)
    executor = FileWritingExecutor([{"app.py": "VALUE = 1\n"}, {"app.py": "VALUE = 3\n"}])
    outcome, _ = run(repo, executor, retry_on_failure=True, retries=1,
                     validation_command=CHECK)
    assert outcome.status == "failed" and outcome.attempts == 2
    assert outcome.error.startswith("failed after 2 attempts; last error: validation command")
    assert "VALUE is 3" in outcome.error
    assert "VALUE is 1" in executor.texts[1]
