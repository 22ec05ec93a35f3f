"""A task that declares a result model: the loop asks for it, refuses what does not fit in
the same conversation, and hands the validated object to the caller."""

from __future__ import annotations

from typing import Literal

from agent_fixtures import RecordingProvider, call, make_repo, make_task, submit, turn
from pydantic import BaseModel

from agentrun.attempts import run_agent


class Review(BaseModel):
    decision: Literal["approve", "reject"]
    reasons: list[str] = []


def test_a_refused_output_is_corrected_and_reaches_the_caller(tmp_path):
    provider = RecordingProvider([
        turn(submit(output={"decision": "maybe"})),
        turn(submit(output={"decision": "approve", "reasons": ["tests pass"]})),
    ])
    outcome = run_agent(make_task(make_repo(tmp_path), output=Review), provider)
    assert outcome.status == "complete" and outcome.submitted and outcome.steps == 2
    assert outcome.output == Review(decision="approve", reasons=["tests pass"])
    refusal = provider.requests[1].messages[-1]
    assert refusal.is_error and "- output.decision: Input should be 'approve' or 'reject'" \
        in refusal.content


def test_ending_without_the_output_fails_and_says_why(tmp_path):
    provider = RecordingProvider([
        turn(submit(status="complete")),  # no output: refused
        turn(text="I approve."),
        turn(text="Really, I approve."),  # after the nudge
    ])
    outcome = run_agent(make_task(make_repo(tmp_path), output=Review), provider)
    assert outcome.status == "failed" and outcome.stop_reason == "completed"
    assert outcome.output is None and not outcome.submitted
    assert outcome.error == ("ended without submitting its result (`output`) with "
                             "submit_result; the last one was refused: output: missing "
                             "(required)")


def test_a_sub_agent_submits_plainly(tmp_path):
    provider = RecordingProvider({
        "default": [turn(call("spawn_subagent", agent="code-reviewer", task="Look.")),
                    turn(submit(output={"decision": "reject"}))],
        "agents": {"code-reviewer": [turn(submit("complete", "Looked."))]},
    })
    outcome = run_agent(make_task(make_repo(tmp_path), output=Review), provider)
    assert outcome.output == Review(decision="reject")
    parent, child = provider.requests[0], provider.requests[1]
    assert child.agent == "code-reviewer"
    offered = {r.agent: next(t for t in r.tools if t.name == "submit_result").parameters
               for r in (parent, child)}
    assert "output" in offered[parent.agent]["required"]
    assert "output" not in offered["code-reviewer"]["properties"]


def test_a_task_without_a_result_model_is_unchanged(tmp_path):
    provider = RecordingProvider([turn(submit()), turn(text="unused")])
    outcome = run_agent(make_task(make_repo(tmp_path)), provider)
    assert outcome.status == "complete" and outcome.output is None and outcome.submitted
    [tool] = [t for t in provider.requests[0].tools if t.name == "submit_result"]
    assert "output" not in tool.parameters["properties"]
