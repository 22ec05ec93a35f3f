"""Token budget: the tracker, the warnings injected into the conversation, enforcement."""

from __future__ import annotations

import json
import threading

import pytest
from agent_fixtures import RecordingProvider, call, events, make_repo, make_task, submit, turn

from agentrun.agent.budget import TokenTracker
from agentrun.agent.transcript import Transcript
from agentrun.attempts import run_agent
from agentrun.core.usage import Usage


@pytest.mark.parametrize(("used", "threshold", "recommendation"), [
    (0, 0, "continue"), (499, 0, "continue"), (500, 50, "summarize"),
    (699, 50, "summarize"), (700, 70, "spawn_subagent"), (899, 70, "spawn_subagent"),
    (900, 90, "complete_now"), (999, 90, "complete_now"), (1000, 100, "stop"),
    (1500, 100, "stop"),
])
def test_thresholds_and_recommendations(used, threshold, recommendation):
    tracker = TokenTracker(1000)
    tracker.add(used)
    assert tracker.threshold() == threshold
    assert tracker.recommendation() == recommendation
    assert tracker.status()["recommendation"] == recommendation
    assert tracker.exhausted == (used >= 1000)
    assert tracker.remaining == max(0, 1000 - used)


def test_all_token_kinds_count_and_usage_is_summed():
    tracker = TokenTracker(100_000)
    total = tracker.add(Usage(input_tokens=10, output_tokens=5, cache_read_tokens=100,
                              cache_write_tokens=20))
    tracker.add(Usage(input_tokens=1, output_tokens=1))
    assert total == 135
    assert tracker.used == 137
    assert tracker.usage == Usage(11, 6, 100, 20)


def test_concurrent_adds_are_not_lost():
    tracker = TokenTracker(10**9)

    def add_many():
        for _ in range(2000):
            tracker.add(Usage(input_tokens=1, output_tokens=2))

    threads = [threading.Thread(target=add_many) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert tracker.used == 4 * 2000 * 3


def test_check_token_budget_reports_the_current_state(tmp_path):
    repo = make_repo(tmp_path)
    script = [turn(call("check_token_budget"), tokens=300),
              turn(call("check_token_budget"), tokens=300),
              turn(submit(), tokens=10)]
    provider = RecordingProvider(script)
    run_agent(make_task(repo, token_budget=1000), provider)
    results = [m for m in provider.requests[-1].messages if m.role == "tool"]
    assert json.loads(results[0].content) == {
        "used": 300, "budget": 1000, "remaining": 700, "percent": 30.0, "threshold": 0,
        "recommendation": "continue"}
    assert json.loads(results[1].content) == {
        "used": 600, "budget": 1000, "remaining": 400, "percent": 60.0, "threshold": 50,
        "recommendation": "summarize"}


def test_warning_injected_once_at_70_percent_then_at_90(tmp_path):
    repo = make_repo(tmp_path)
    script = [turn(call("list_files", pattern="*a"), tokens=400),
              turn(call("list_files", pattern="*b"), tokens=350),  # 75%
              turn(call("list_files", pattern="*c"), tokens=100),  # 85%: no second warning
              turn(call("list_files", pattern="*d"), tokens=60),  # 91%
              turn(submit(), tokens=10)]
    provider = RecordingProvider(script)
    transcript = Transcript(None)
    outcome = run_agent(make_task(repo, token_budget=1000), provider, transcript=transcript)
    assert outcome.status == "complete"

    def warnings(i):
        return [m.content for m in provider.requests[i].messages
                if m.role == "user" and "Token budget" in m.content]

    assert warnings(1) == []
    assert len(warnings(2)) == 1 and "75.0% used" in warnings(2)[0]
    assert "spawn_subagent" in warnings(2)[0]
    assert provider.requests[2].messages[-1].content == warnings(2)[0]  # injected last
    assert len(warnings(3)) == 1
    assert len(warnings(4)) == 2 and "Finish now" in warnings(4)[1]
    assert [e["threshold"] for e in events(transcript, "budget_warning")] == [70, 90]
    # cumulative tokens are recorded on every step
    assert [e["cumulative_tokens"] for e in events(transcript, "model_turn")] == \
        [400, 750, 850, 910, 920]


def test_budget_enforced_at_100_percent(tmp_path):
    repo = make_repo(tmp_path)
    script = [turn(call("write_file", path="a.txt", content="a"), tokens=600),
              turn(call("list_files"), tokens=500),
              turn(submit(), tokens=10)]
    provider = RecordingProvider(script)
    outcome = run_agent(make_task(repo, token_budget=1000, retry_on_failure=True), provider)
    assert outcome.stop_reason == "budget"
    assert outcome.status == "partial"  # a.txt was written
    assert outcome.attempts == 1  # no budget left for a retry
    assert len(provider.requests) == 2
    assert outcome.usage.total == 1100
    assert "token budget exhausted (1100 of 1000" in outcome.error


def test_budget_exhausted_without_work_fails(tmp_path):
    repo = make_repo(tmp_path)
    provider = RecordingProvider([turn(call("list_files"), tokens=2000), turn(submit())])
    outcome = run_agent(make_task(repo, token_budget=1000), provider)
    assert (outcome.stop_reason, outcome.status) == ("budget", "failed")
