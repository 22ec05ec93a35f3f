"""Context cleaning on backtrack keeps every tool call paired with exactly one result."""

from __future__ import annotations

from agent_fixtures import pairing_problems
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrun.agent.context import REMOVED_STUB, clean_context
from agentrun.providers.base import Message, ToolCall


def assistant(*ids: str, text: str = "") -> Message:
    return Message(role="assistant", content=text,
                   tool_calls=[ToolCall(id=i, name="read_file", arguments={"path": i})
                               for i in ids])


def result(call_id: str, error: bool = False) -> Message:
    return Message(role="tool", content=("long error output " * 50) if error else "ok",
                   tool_call_id=call_id, name="read_file", is_error=error)


def test_pairing_problems_are_detected():
    good = [Message(role="user", content="task"), assistant("a", "b"), result("a"),
            result("b")]
    assert pairing_problems(good) == []
    assert pairing_problems(good[:-1]) == ["end: calls ['b'] were never answered"]
    assert "has no open call" in pairing_problems([*good, result("z")])[0]
    unanswered = [good[0], assistant("a"), Message(role="user", content="next")]
    assert "never answered" in pairing_problems(unanswered)[0]
    assert "duplicate" in pairing_problems([assistant("a", "a"), result("a"),
                                            result("a")])[0]


def test_failed_turns_are_replaced_by_the_summary():
    messages = [Message(role="user", content="task"),
                assistant("ok1"), result("ok1"),
                assistant("bad1", text="try a"), result("bad1", error=True),
                assistant("ok2", "bad2"), result("ok2"), result("bad2", error=True),
                assistant("bad3"), result("bad3", error=True)]
    reflection = [Message(role="user", content="reflect"),
                  Message(role="assistant", content="I was wrong")]
    messages += reflection
    cleaned = clean_context(messages, {"bad1", "bad2", "bad3"}, "approach X failed",
                            drop=reflection)
    assert pairing_problems(cleaned) == []
    ids = [c.id for m in cleaned for c in m.tool_calls]
    assert ids == ["ok1", "ok2", "bad2"]  # a turn that also did useful work is kept ...
    bad2 = next(m for m in cleaned if m.tool_call_id == "bad2")
    assert bad2.content == REMOVED_STUB  # ... with its failed output shortened
    assert not any(m.content in ("reflect", "I was wrong") for m in cleaned)
    assert cleaned[-1] == Message(role="user", content="approach X failed")
    assert cleaned[0].content == "task"
    assert messages[6].content != REMOVED_STUB  # the input is not modified


@st.composite
def conversations(draw):
    """A valid conversation of tool turns, and a random set of calls that failed."""
    messages = [Message(role="user", content="task")]
    counter = 0
    failed = set()
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["tools", "text", "user"]))
        if kind == "tools":
            n = draw(st.integers(1, 3))
            ids = [f"c{counter + i}" for i in range(n)]
            counter += n
            messages.append(assistant(*ids))
            for i in ids:
                is_error = draw(st.booleans())
                messages.append(result(i, is_error))
                if is_error:
                    failed.add(i)
        elif kind == "text":
            messages.append(Message(role="assistant", content="thinking"))
        else:
            messages.append(Message(role="user", content="note"))
    extra = draw(st.sets(st.sampled_from([f"c{i}" for i in range(max(counter, 1))])))
    drop = [m for m in messages[1:] if m.role != "tool" and draw(st.booleans())]
    return messages, failed | extra, drop


@settings(max_examples=150, deadline=None)
@given(conversations())
def test_cleaning_always_keeps_calls_paired(case):
    messages, failed, drop = case
    assert pairing_problems(messages) == []
    cleaned = clean_context(messages, failed, "summary", drop=drop)
    assert pairing_problems(cleaned) == []
    assert cleaned[-1].content == "summary"
    kept = {c.id for m in cleaned for c in m.tool_calls}
    for m in cleaned:
        if m.role == "tool" and m.tool_call_id in failed:
            assert m.content == REMOVED_STUB
    # a turn survives only if one of its calls was not part of the failure
    for m in messages:
        if m.tool_calls and m not in drop:
            ids = {c.id for c in m.tool_calls}
            assert (ids <= kept) == (not ids <= failed)
