"""The react-validate-reflect-backtrack loop, its breakers and every stop reason."""

from __future__ import annotations

import threading
from pathlib import Path

from agent_fixtures import (
    RecordingProvider,
    call,
    events,
    make_repo,
    make_task,
    no_sleep,
    pairing_problems,
    submit,
    turn,
)

from agentrun.agent.transcript import Transcript
from agentrun.attempts import run_agent
from agentrun.core.events import BaseEvent, RateLimitedEvent
from agentrun.tools.base import INVALID_ARGUMENTS


def run(tmp_path: Path, script, **task_kwargs):
    repo = make_repo(tmp_path)
    provider = RecordingProvider(script)
    transcript = Transcript(None)
    extra = {k: task_kwargs.pop(k) for k in ("cancel", "on_event", "clock", "sleep", "ask")
             if k in task_kwargs}
    extra.setdefault("sleep", no_sleep())
    outcome = run_agent(make_task(repo, **task_kwargs), provider, transcript=transcript, **extra)
    return outcome, provider, transcript, repo


def test_submit_result_completes_with_the_models_report(tmp_path):
    script = [
        turn(call("write_file", path="hello.py", content="print('hi')\n")),
        turn(submit("complete", "wrote hello.py", criteria_met=["hello exists"],
                    deviations=["none really"])),
    ]
    outcome, provider, transcript, repo = run(tmp_path, script)
    assert outcome.status == "complete"
    assert outcome.stop_reason == "completed"
    assert outcome.submitted is True
    assert outcome.summary == "wrote hello.py"
    assert outcome.criteria_met == ["hello exists"]
    assert outcome.deviations == ["none really"]
    assert outcome.steps == 2 and outcome.attempts == 1
    assert (repo / "hello.py").read_text() == "print('hi')\n"
    # the request carried the agent's identity, its system prompt and its tools
    first = provider.requests[0]
    assert first.agent == "spec-executor"
    assert "<role>" in first.system
    names = {t.name for t in first.tools}
    assert {"submit_result", "check_token_budget", "write_file", "spawn_subagent"} <= names
    assert outcome.usage.total > 0


def test_end_turn_without_submit_is_nudged_once_then_never_complete(tmp_path):
    script = [turn(call("write_file", path="a.txt", content="a\n")), turn(text="All done."),
              turn(text="All done, nothing else to change.")]
    outcome, provider, transcript, repo = run(tmp_path, script)
    assert outcome.stop_reason == "no_result" and outcome.submitted is False
    assert outcome.status == "partial"  # the file it wrote is kept, reported as unfinished
    assert "ended its turn without submitting its result with submit_result" in outcome.error
    assert "nothing else to change" in outcome.summary
    assert len(provider.requests) == 3
    assert "without calling submit_result" in provider.requests[2].messages[-1].content
    assert [e["type"] for e in transcript.events].count("nudge") == 1


def test_a_refusal_ends_the_attempt_without_running_its_calls(tmp_path):
    script = [{"text": "I can't help with that.", "stop_reason": "refusal",
               "tool_calls": [call("write_file", path="a.txt", content="a\n")]},
              turn(submit())]
    outcome, provider, _, repo = run(tmp_path, script, retry_on_failure=True, retries=2)
    assert (outcome.status, outcome.stop_reason) == ("failed", "refusal")
    assert outcome.error == "the model refused the task: I can't help with that."
    assert len(provider.requests) == 1 and outcome.attempts == 1  # not asked again
    assert not (repo / "a.txt").exists()


def test_truncated_replies_are_continued_then_end_the_attempt(tmp_path):
    cut_text = {"text": "Here is the plan, part", "stop_reason": "max_tokens"}
    cut_call = {"tool_calls": [call("write_file", path="big.txt", content="x")],
                "stop_reason": "max_tokens"}
    # a cut text is continued; a cut call is not run; a whole reply resets the count
    outcome, provider, transcript, repo = run(tmp_path, [
        cut_text, cut_call, turn(call("write_file", path="a.txt", content="a\n")),
        cut_call, cut_call, cut_call, turn(submit())])
    assert (outcome.status, outcome.stop_reason) == ("partial", "truncated")
    assert "cut off at the output limit 3 times in a row (the last one mid tool call " \
           "`write_file`)" in outcome.error
    assert len(provider.requests) == 6 and not (repo / "big.txt").exists()
    assert "Continue where you stopped" in provider.requests[1].messages[-1].content
    assert "no call of that reply was run" in provider.requests[2].messages[-1].content
    assert provider.requests[2].messages[-2].tool_calls == []  # the cut call is not sent back
    assert [e["where"] for e in events(transcript, "truncated")] == [
        "mid text", "mid tool call `write_file`", *["mid tool call `write_file`"] * 3]


def test_nudge_leads_to_a_submission(tmp_path):
    script = [turn(text="Finished."), turn(submit("complete", "did it", criteria_met=["x"]))]
    outcome, *_ = run(tmp_path, script)
    assert outcome.submitted is True and outcome.criteria_met == ["x"]


def test_every_tool_call_gets_exactly_one_result(tmp_path):
    script = [
        turn(call("read_file", path="README.md"), call("read_file", path="missing.txt"),
             call("list_files")),
        {"tool_calls": [call("write_file", path="x", content="y")],
         "fault": "malformed_arguments"},
        turn(submit()),
    ]
    outcome, provider, transcript, _ = run(tmp_path, script)
    assert outcome.status == "complete"
    last = provider.requests[-1].messages
    assert pairing_problems(last) == []
    results = [m for m in last if m.role == "tool"]
    assert len(results) == 4
    # malformed arguments are reported back to the model, not executed
    bad = events(transcript, "tool_result")[3]
    assert bad["is_error"] and bad["error_kind"] == INVALID_ARGUMENTS
    assert not (tmp_path / "work" / "x").exists()


def test_three_consecutive_tool_errors_force_a_reflection_turn_without_tools(tmp_path):
    script = [
        turn(call("read_file", path="a.txt")),
        turn(call("read_file", path="b.txt")),
        turn(call("read_file", path="c.txt")),
        turn(text="I keep guessing file names; I should list the files first."),
        turn(call("list_files")),
        turn(submit()),
    ]
    outcome, provider, transcript, _ = run(tmp_path, script)
    assert outcome.status == "complete"
    reflection_request = provider.requests[3]
    assert reflection_request.tools == []
    assert "Stop and reflect" in reflection_request.messages[-1].content
    assert "a.txt" in reflection_request.messages[-1].content
    assert all(r.tools for i, r in enumerate(provider.requests) if i != 3)
    assert len(events(transcript, "reflection_forced")) == 1
    # the reflection is kept in context for the next, tool-enabled turn
    assert "list the files first" in provider.texts(4)


def test_errors_after_a_reflection_backtrack_and_clean_the_context(tmp_path):
    script = [
        turn(call("read_file", path="a.txt")),
        turn(call("read_file", path="b.txt")),
        turn(call("read_file", path="c.txt")),
        turn(text="Approach: guessing names failed because they do not exist; trying list."),
        turn(call("read_file", path="d.txt")),
        turn(submit()),
    ]
    outcome, provider, transcript, _ = run(tmp_path, script)
    assert outcome.status == "complete"
    backtracks = events(transcript, "backtrack")
    assert len(backtracks) == 1
    assert "after reflection" in backtracks[0]["reason"]
    after = provider.requests[5].messages
    assert pairing_problems(after) == []
    # the four failed calls, their error outputs and the reflection exchange are gone ...
    assert not any(m.tool_calls for m in after)
    assert not any(m.role == "tool" for m in after)
    assert not any("Stop and reflect" in m.content for m in after)
    # ... replaced by one summary carrying the model's reflection
    summary = after[-1]
    assert summary.role == "user" and "Backtrack 1 of 5" in summary.content
    assert "guessing names failed" in summary.content
    assert after[0].content == "Do the task."


def test_stuck_detection_backtracks_on_identical_calls_and_results(tmp_path):
    script = [turn(call("list_files")) for _ in range(3)] + [turn(submit())]
    outcome, provider, transcript, _ = run(tmp_path, script, stuck_repeats=3)
    assert outcome.status == "complete"
    backtracks = events(transcript, "backtrack")
    assert len(backtracks) == 1
    assert backtracks[0]["reason"].startswith("stuck:")
    assert len(backtracks[0]["removed_calls"]) == 3
    assert not any(m.tool_calls for m in provider.requests[3].messages)
    # two identical calls are not stuck yet
    outcome2, _, transcript2, _ = run(tmp_path / "b", [turn(call("list_files")),
                                                       turn(call("list_files")),
                                                       turn(submit())], stuck_repeats=3)
    assert events(transcript2, "backtrack") == []


def test_five_backtracks_terminate_the_attempt(tmp_path):
    stuck_cycle = [turn(call("list_files")) for _ in range(3)]
    script = stuck_cycle * 6 + [turn(submit())]
    outcome, provider, transcript, _ = run(tmp_path, script)
    assert outcome.stop_reason == "circuit_breaker"
    assert outcome.status == "failed"
    assert "5 backtracks" in outcome.error
    assert len(events(transcript, "backtrack")) == 5
    assert outcome.steps == 15
    assert pairing_problems(provider.requests[-1].messages) == []


def test_consecutive_failed_steps_trip_the_breaker(tmp_path):
    script = [turn(call("read_file", path=f"{i}.txt")) for i in range(20)]
    outcome, *_ = run(tmp_path, script, max_consecutive_failures=4, reflection_after_errors=10)
    assert outcome.stop_reason == "circuit_breaker"
    assert "4 consecutive failed steps" in outcome.error
    assert outcome.steps == 4


def test_repeated_denials_escalate_and_block_without_asking_in_ci(tmp_path):
    asked = []
    script = [turn(call("read_file", path="/etc/passwd")),
              turn(call("run_command", command="sudo ls")),
              turn(submit())]
    outcome, _, transcript, _ = run(tmp_path, script, ask=lambda q: asked.append(q) or True)
    assert outcome.status == "blocked"
    assert outcome.stop_reason == "error"
    assert outcome.error.startswith("escalated: permission problem")
    assert asked == []  # not interactive: never asks, even with an answer at hand
    decisions = [e["decision"] for e in events(transcript, "decision")]
    assert decisions == ["continue", "escalate"]


def test_interactive_escalation_asks_and_may_continue(tmp_path):
    asked = []
    script = [turn(call("read_file", path="/etc/passwd")),
              turn(call("run_command", command="sudo ls")),
              turn(submit())]
    outcome, *_ = run(tmp_path, script, interactive=True,
                      ask=lambda q: asked.append(q) or True)
    assert outcome.status == "complete"
    assert len(asked) == 1 and "permission problem" in asked[0]


def test_long_task_confirmation_only_in_interactive_runs(tmp_path):
    script = [turn(call("list_files", path=".", pattern=f"*{i}")) for i in range(5)]
    asked = []
    outcome, *_ = run(tmp_path, script, interactive=True, confirm_after_steps=2,
                      ask=lambda q: asked.append(q) or False)
    assert outcome.stop_reason == "interrupted" and outcome.steps == 2
    assert asked == ["spec-executor has taken 2 steps. Continue?"]
    outcome2, *_ = run(tmp_path / "b", script + [turn(submit())], confirm_after_steps=2,
                       ask=lambda q: asked.append(q) or False)
    assert outcome2.status == "complete" and len(asked) == 1


# -- stop reasons -------------------------------------------------------------------------------


def test_stop_max_steps_partial_when_files_changed(tmp_path):
    script = [turn(call("write_file", path=f"f{i}.txt", content="x")) for i in range(10)]
    outcome, *_ = run(tmp_path, script, max_steps=3)
    assert outcome.stop_reason == "max_steps"
    assert outcome.status == "partial"
    assert outcome.steps == 3
    assert "wrote f0.txt" in outcome.summary
    outcome2, *_ = run(tmp_path / "b", [turn(call("list_files"), text=f"look {i}")
                                        for i in range(5)], max_steps=2)
    assert (outcome2.stop_reason, outcome2.status) == ("max_steps", "failed")


def test_stop_timeout_uses_the_wall_clock(tmp_path):
    now = [0.0]

    def each_step_takes_100s(event):
        if event.type == "step":
            now[0] += 100.0

    repo = make_repo(tmp_path)
    provider = RecordingProvider([turn(call("list_files", pattern=f"*{i}")) for i in range(10)])
    outcome = run_agent(make_task(repo, max_duration_s=250.0), provider,
                        clock=lambda: now[0], sleep=no_sleep(), on_event=each_step_takes_100s)
    assert outcome.stop_reason == "timeout"
    assert outcome.steps == 3
    assert "ran out of time" in outcome.error


def test_stop_interrupted_by_cancel_during_a_slow_model_call(tmp_path):
    import time

    cancel = threading.Event()

    class CancelWhileWaiting(RecordingProvider):
        def complete(self, request):
            if len(self.requests) == 1:  # the second call: cancel while it is being answered
                threading.Timer(0.1, cancel.set).start()
            return super().complete(request)

    repo = make_repo(tmp_path)
    provider = CancelWhileWaiting([turn(call("list_files")), {"text": "slow", "latency_s": 5}])
    started = time.monotonic()
    outcome = run_agent(make_task(repo), provider, cancel=cancel, sleep=no_sleep())
    assert outcome.stop_reason == "interrupted"
    assert time.monotonic() - started < 2.0  # did not wait for the 5 s reply
    assert outcome.steps == 1 and len(provider.requests) == 2


def test_cancel_is_checked_before_every_tool_call(tmp_path):
    cancel = threading.Event()
    seen = []

    def on_event(event):
        seen.append(event)
        if event.type == "step":
            cancel.set()

    script = [turn(call("write_file", path="a.txt", content="a"),
                   call("write_file", path="b.txt", content="b"))]
    outcome, provider, transcript, repo = run(tmp_path, script, cancel=cancel,
                                              on_event=on_event)
    assert outcome.stop_reason == "interrupted"
    assert not (repo / "a.txt").exists() and not (repo / "b.txt").exists()
    results = events(transcript, "tool_result")
    assert [r["content"] for r in results] == ["not executed: the run is stopping "
                                               "(interrupted)"] * 2
    assert (seen[1].type, seen[1].step, seen[1].tool) == ("step", 1, "write_file")


def test_stop_error_after_infrastructure_retries_with_backoff(tmp_path):
    delays: list[float] = []
    script = [{"fault": "rate_limit", "retry_after": 7, "repeat": 1},
              {"fault": "server_error", "repeat": 10}]
    outcome, provider, transcript, _ = run(tmp_path, script, request_retries=3,
                                           sleep=no_sleep(delays))
    assert outcome.stop_reason == "error"
    assert outcome.status == "failed"
    assert delays == [7, 2.0, 4.0]  # Retry-After honoured, then exponential
    assert len(provider.requests) == 4
    assert "server error" in outcome.error
    assert len(events(transcript, "infra_retry")) == 3
    # the model never saw the infrastructure errors
    assert all(len(r.messages) == 1 for r in provider.requests)


def test_a_wait_longer_than_agentrun_waits_stops_at_once_as_rate_limited(tmp_path):
    """A 429 asking for an hour and a 529 asking for two minutes are not waited for; a short
    limit that outlasts the retries ends the same way. Each: one stop, no model turn."""
    cases = {"hour": [{"fault": "rate_limit", "retry_after": 3600}],
             "busy": [{"fault": "overloaded", "retry_after": 120}],
             "storm": [{"fault": "rate_limit", "retry_after": 0.5, "repeat": 9}]}
    for name, script in cases.items():
        delays: list[float] = []
        seen: list[BaseEvent] = []
        outcome, provider, _, _ = run(tmp_path / name, script, request_retries=2,
                                      sleep=no_sleep(delays), on_event=seen.append)
        assert (outcome.status, outcome.stop_reason) == ("failed", "rate_limited"), name
        assert outcome.steps == 0
        stops = [e for e in seen if isinstance(e, RateLimitedEvent)]
        assert len(stops) == 1 and stops[0].error == outcome.error
        assert outcome.error.endswith("stopped, continue later with --resume")
        if name == "hour":
            assert delays == [] and len(provider.requests) == 1
            assert "the server asks to wait 3600 s, longer than agentrun waits (60 s)" in \
                outcome.error and stops[0].wait_s == 3600
        if name == "busy":
            assert "overloaded (529)" in outcome.error and delays == []
        if name == "storm":
            assert delays == [0.5, 0.5] and len(provider.requests) == 3
            assert "still limited after 2 retries, 1 s waited" in outcome.error


def test_infrastructure_errors_recover_transparently(tmp_path):
    delays: list[float] = []
    script = [{"fault": "timeout", "repeat": 2}, turn(submit())]
    outcome, *_ = run(tmp_path, script, sleep=no_sleep(delays))
    assert outcome.status == "complete" and outcome.steps == 1
    assert delays == [1.0, 2.0]


def test_bad_request_fails_gracefully_keeping_partial_work(tmp_path):
    script = [turn(call("write_file", path="done.txt", content="half")),
              {"fault": "bad_request"}]
    outcome, _, transcript, repo = run(tmp_path, script)
    assert outcome.stop_reason == "error"
    assert outcome.status == "partial"
    assert "wrote done.txt" in outcome.summary
    assert (repo / "done.txt").exists()
    decision = events(transcript, "decision")[-1]
    assert decision["decision"] == "fail_gracefully"


def test_authentication_failure_escalates(tmp_path):
    outcome, _, transcript, _ = run(tmp_path, [{"fault": "auth"}])
    assert outcome.status == "blocked"
    assert outcome.stop_reason == "error"
    assert events(transcript, "decision")[-1]["decision"] == "escalate"


def test_on_event_reports_attempts_and_steps(tmp_path):
    seen = []
    outcome, *_ = run(tmp_path, [turn(call("list_files")), turn(submit())],
                      on_event=seen.append)
    kinds = [e.type for e in seen]
    assert kinds == ["attempt", "step", "tool", "step", "tool", "attempt_end"]
    steps, tools = seen[1::2][:2], seen[2::2][:2]
    assert [s.tool for s in steps] == ["list_files", "submit_result"]
    assert steps[1].tokens == outcome.usage.total
    # each model call says when it began, each tool call when it began and how it ended
    assert steps[0].started <= tools[0].started <= steps[1].started
    assert [(t.name, t.error) for t in tools] == [("list_files", False),
                                                  ("submit_result", False)]


def test_a_broken_progress_display_does_not_stop_the_agent(tmp_path):
    def broken(event):
        raise RuntimeError("display crashed")

    outcome, _, transcript, _ = run(tmp_path, [turn(submit())], on_event=broken)
    assert outcome.status == "complete"
    assert events(transcript, "on_event_error")


def test_commands_cannot_outlive_the_deadline(tmp_path):
    now = [0.0]

    class LateClock(RecordingProvider):
        def complete(self, request):
            now[0] = 599.6  # 0.4 s of the 600 s limit left when the command starts
            return super().complete(request)

    repo = make_repo(tmp_path)
    provider = LateClock([turn(call("run_command", command="sleep 5", timeout_s=300)),
                          turn(submit())])
    transcript = Transcript(None)
    outcome = run_agent(make_task(repo, max_duration_s=600.0), provider, transcript=transcript,
                        clock=lambda: now[0], sleep=no_sleep())
    result = events(transcript, "tool_result")[0]
    assert result["error_kind"] == "timeout"
    assert "timed out after 0.5s" in result["content"]
    assert outcome.stop_reason == "completed"


def test_asking_never_waits_without_a_terminal(monkeypatch):
    import io

    from agentrun.agent.interaction import ask_yes_no

    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))  # piped input is not a person
    assert ask_yes_no("Continue?") is False


def test_the_first_model_call_goes_before_the_files_and_every_tool_waits_for_them(tmp_path):
    # a fresh worker checks its files out while the first call is made (worker.py)
    repo = make_repo(tmp_path)
    provider = RecordingProvider([turn(call("read_file", path="late.txt")),
                                  turn(submit("complete", "read it"))])
    task = make_task(repo)
    ready: list[int] = []  # model requests made when the files were waited for

    def files_ready() -> None:
        if not ready:
            (repo / "late.txt").write_text("checked out\n")
        ready.append(len(provider.requests))

    task.files_ready = files_ready
    transcript = Transcript(None)
    outcome = run_agent(task, provider, transcript=transcript, sleep=no_sleep())
    assert outcome.status == "complete"
    assert ready[0] == 1  # the first call had gone out; the tool call then waited
    assert "checked out" in provider.texts(1)  # and read the file that had arrived
