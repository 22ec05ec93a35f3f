"""Conversation hygiene: clean a failed approach out of the context on backtrack.

Error outputs pile up and confuse the model ("context pollution"). On backtrack the failed calls
are removed and one short reflection summary takes their place. Model APIs reject a tool call
without exactly one result (and a result without its call), so cleaning works on whole
assistant turns: a turn whose calls all failed is dropped together with its results; a turn that
also did useful work is kept and only its failed results are shortened.
"""

from __future__ import annotations

from collections.abc import Iterable

from agentrun.providers.base import Message

REMOVED_STUB = "(failed; output removed on backtrack, see the summary below)"


def clean_context(messages: list[Message], failed_call_ids: Iterable[str], summary: str,
                  drop: Iterable[Message] = ()) -> list[Message]:
    """A new conversation without the failed calls, ending with the reflection summary.

    `drop` names other messages (by identity) that belonged to the failed approach, such as
    the reflection prompt and the model's reflection; they are removed too.
    """
    failed = set(failed_call_ids)
    dropped = {id(m) for m in drop}
    out: list[Message] = []
    skip_results: set[str] = set()
    for msg in messages:
        if id(msg) in dropped and msg.role != "tool":
            if msg.role == "assistant":
                skip_results.update(c.id for c in msg.tool_calls)
            continue
        if msg.role == "assistant" and msg.tool_calls:
            ids = {c.id for c in msg.tool_calls}
            if ids <= failed:
                skip_results.update(ids)
                continue
            out.append(msg)
        elif msg.role == "tool":
            if msg.tool_call_id in skip_results:
                continue
            if msg.tool_call_id in failed:
                msg = Message(role="tool", content=REMOVED_STUB, tool_call_id=msg.tool_call_id,
                              name=msg.name, is_error=True)
            out.append(msg)
        else:
            out.append(msg)
    out.append(Message(role="user", content=summary))
    return out

