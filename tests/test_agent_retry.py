"""The Ralph retry loop: validation backpressure, retry conditions, rollback between attempts."""

from __future__ import annotations

import sys

import pytest
from agent_fixtures import (
    RecordingProvider,
    call,
    events,
    make_repo,
    make_task,
    no_sleep,
    submit,
    turn,
)
from gitutil import commit_files, head, run_git, status

from agentrun.agent.transcript import Transcript
from agentrun.attempts import run_agent
from agentrun.validation import classify_failure_output

CHECK = f"{sys.executable} -c 'import app'"  # a "build": the module must import


def run(repo, script, **kwargs):
    provider = RecordingProvider(script)
    transcript = Transcript(None)
    outcome = run_agent(make_task(repo, "Write app.py.", **kwargs), provider,
                        transcript=transcript, sleep=no_sleep())
    return outcome, provider, transcript


def first_requests(provider):
    """The first request of each attempt (a fresh conversation has one message)."""
    return [r for r in provider.requests if len(r.messages) == 1]


def test_build_error_on_attempt_one_is_fixed_on_attempt_two(tmp_path):
    repo = make_repo(tmp_path)
    script = [
        turn(call("write_file", path="app.py", content="def broken(:\n")),
        turn(submit("complete", "app written")),
        turn(call("write_file", path="app.py", content="def fixed():\n    return 1\n")),
        turn(submit("complete", "app fixed")),
    ]
    outcome, provider, transcript = run(repo, script, retry_on_failure=True,
                                        validation_command=CHECK)
    assert outcome.status == "complete"
    assert outcome.attempts == 2
    assert outcome.steps == 4
    assert outcome.summary == "app fixed"
    assert outcome.error is None
    retry_prompt = first_requests(provider)[1].messages[0].content
    assert "Previous attempt failed" in retry_prompt
    assert "SyntaxError" in retry_prompt
    assert "build_errors" in retry_prompt
    assert "Write app.py." in retry_prompt  # the original task is carried over
    assert 'write_file({"path": "app.py"' in retry_prompt  # last action
    validations = events(transcript, "validation")
    assert [v["ok"] for v in validations] == [False, True]
    assert validations[0]["condition"] == "build_errors"
    # all steps of both attempts are in the transcript
    assert len(events(transcript, "model_turn")) == 4
    assert [e["attempt"] for e in events(transcript, "attempt_start")] == [1, 2]


def test_snapshot_rollback_between_attempts(tmp_path):
    repo = make_repo(tmp_path, {"README.md": "original\n", "keep.txt": "keep\n"})
    base = head(repo)
    seen_at_attempt_two = {}

    class Observer(RecordingProvider):
        def complete(self, request):
            if len(request.messages) == 1 and "Previous attempt failed" in \
                    request.messages[0].content:
                seen_at_attempt_two.update(
                    junk=(repo / "junk.txt").exists(),
                    readme=(repo / "README.md").read_text(),
                    head=head(repo), status=status(repo))
            return super().complete(request)

    script = [
        turn(call("write_file", path="junk.txt", content="attempt one\n")),
        turn(call("edit_file", path="README.md", old="original", new="changed")),
        turn(call("run_command", command="git add -A && git commit -q -m wip")),
        turn(submit("failed", "gave up", error="could not finish")),
        turn(submit("complete", "second try")),
    ]
    provider = Observer(script)
    outcome = run_agent(make_task(repo, retry_on_failure=True), provider, sleep=no_sleep())
    assert outcome.attempts == 2 and outcome.status == "complete"
    assert seen_at_attempt_two == {"junk": False, "readme": "original\n", "head": base,
                                   "status": ""}


def test_retries_exhausted(tmp_path):
    repo = make_repo(tmp_path)
    bad = [turn(call("write_file", path="app.py", content="import nowhere_to_be_found\n")),
           turn(submit())]
    outcome, provider, transcript = run(repo, bad * 3, retry_on_failure=True, retries=2,
                                        validation_command=CHECK)
    assert outcome.attempts == 3
    assert outcome.status == "failed"
    assert outcome.stop_reason == "completed"
    assert outcome.error.startswith("failed after 3 attempts; last error: validation command")
    assert "ModuleNotFoundError" in outcome.error
    assert len(first_requests(provider)) == 3
    assert [e["retry"] for e in events(transcript, "attempt_end")] == [True, True, False]


def test_retry_disabled_fails_after_one_attempt(tmp_path):
    repo = make_repo(tmp_path)
    script = [turn(call("write_file", path="app.py", content="def broken(:\n")),
              turn(submit()), turn(submit())]
    outcome, provider, _ = run(repo, script, retry_on_failure=False, validation_command=CHECK)
    assert outcome.attempts == 1
    assert outcome.status == "failed"
    assert "SyntaxError" in outcome.error
    assert len(provider.requests) == 2
    # the failed final attempt is not rolled back: the work stays for inspection
    assert (repo / "app.py").exists()


def test_test_failure_detected_from_validation_output(tmp_path):
    repo = make_repo(tmp_path)
    commit_files(repo, {"check.py": (
        "import pathlib, sys\n"
        "if pathlib.Path('fixed').exists():\n"
        "    print('1 passed'); sys.exit(0)\n"
        "print('FAILED tests/test_app.py::test_add - assert 1 == 2')\n"
        "print('1 failed, 3 passed in 0.01s'); sys.exit(1)\n")})
    command = f"{sys.executable} check.py"
    script = [turn(submit()), turn(call("write_file", path="fixed", content="")),
              turn(submit())]
    outcome, provider, transcript = run(repo, script, retry_on_failure=True,
                                        retry_conditions=frozenset({"test_failures"}),
                                        validation_command=command)
    assert outcome.status == "complete" and outcome.attempts == 2
    assert events(transcript, "validation")[0]["condition"] == "test_failures"
    retry_prompt = first_requests(provider)[1].messages[0].content
    assert "test_failures" in retry_prompt and "test_add" in retry_prompt


def test_retry_only_for_enabled_conditions(tmp_path):
    repo = make_repo(tmp_path)
    script = [turn(call("write_file", path="app.py", content="def broken(:\n")),
              turn(submit()), turn(submit())]
    outcome, _, transcript = run(repo, script, retry_on_failure=True,
                                 retry_conditions=frozenset({"test_failures"}),
                                 validation_command=CHECK)
    assert outcome.attempts == 1 and outcome.status == "failed"
    end = events(transcript, "attempt_end")[0]
    assert end["condition"] == "build_errors" and end["retry"] is False


def test_max_steps_is_a_retry_condition(tmp_path):
    repo = make_repo(tmp_path)
    script = [turn(call("list_files", pattern="*a")), turn(call("list_files", pattern="*b")),
              turn(submit("complete", "quick"))]
    outcome, provider, _ = run(repo, script, retry_on_failure=True, max_steps=2)
    assert outcome.attempts == 2 and outcome.status == "complete"
    assert "ran out of steps" in first_requests(provider)[1].messages[0].content


def test_budget_and_escalation_are_never_retried(tmp_path):
    repo = make_repo(tmp_path)
    script = [turn(call("read_file", path="/etc/passwd")),
              turn(call("read_file", path="/etc/shadow")), turn(submit())]
    outcome, _, _ = run(repo, script, retry_on_failure=True)
    assert outcome.status == "blocked" and outcome.attempts == 1


@pytest.mark.parametrize(("output", "expected"), [
    ("  File \"app.py\", line 1\n    def broken(:\n SyntaxError: invalid syntax", "build_errors"),
    ("ModuleNotFoundError: No module named 'x'", "build_errors"),
    ("ERROR collecting tests/test_a.py\n1 error in 0.1s", "build_errors"),
    ("src/main.c:3:5: error: expected ';' before '}' token", "build_errors"),
    ("error[E0308]: mismatched types", "build_errors"),
    ("Program.cs(12,5): error CS1002: ; expected", "build_errors"),
    ("FAILED tests/test_a.py::test_x - assert 1 == 2\n1 failed, 2 passed", "test_failures"),
    ("FAILED t.py::test_imp - ModuleNotFoundError: gone\n1 failed", "test_failures"),
    ("--- FAIL: TestAdd (0.00s)", "test_failures"),
    ("AssertionError: expected 3", "test_failures"),
    ("something went wrong", "test_failures"),
])
def test_classify_failure_output(output, expected):
    assert classify_failure_output(output) == expected


def test_validation_is_skipped_when_nothing_claims_success(tmp_path):
    repo = make_repo(tmp_path)
    outcome, _, transcript = run(repo, [turn(submit("partial", "half"))],
                                 validation_command="false")
    assert outcome.status == "partial" and events(transcript, "validation") == []
    run_git(repo, "status")  # the repository is intact


def test_without_a_snapshot_there_is_no_retry_on_a_dirty_tree(tmp_path):
    plain = tmp_path / "not-a-repo"
    plain.mkdir()
    script = [turn(call("write_file", path="a.txt", content="a")),
              turn(submit("failed", "no", error="broke")), turn(submit())]
    provider = RecordingProvider(script)
    transcript = Transcript(None)
    outcome = run_agent(make_task(plain, retry_on_failure=True), provider,
                        transcript=transcript, sleep=no_sleep())
    assert outcome.attempts == 1 and outcome.status == "failed"
    assert "cannot roll back" in outcome.error
    assert events(transcript, "snapshot_failed")
    assert (plain / "a.txt").read_text() == "a"
