"""Shared pieces for the agent loop tests: a recording scripted provider, a worktree, a task."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gitutil import init_repo

from agentrun.agent.definitions import load_agent
from agentrun.agent.terminator import Limits
from agentrun.agent.transcript import Transcript
from agentrun.executors.base import AgentTask
from agentrun.providers.base import Message, Request, Turn
from agentrun.providers.scripted import ScriptedProvider


class RecordingProvider(ScriptedProvider):
    """The scripted provider, keeping a copy of every request it was sent."""

    def __init__(self, script: Any, **kwargs: Any) -> None:
        super().__init__(script, **kwargs)
        self.requests: list[Request] = []

    def complete(self, request: Request) -> Turn:
        self.requests.append(request)
        return super().complete(request)

    def texts(self, index: int) -> str:
        """Every message text of request `index`, joined: what the model could read."""
        return "\n".join(m.content for m in self.requests[index].messages)


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def turn(*calls: dict[str, Any], text: str = "", tokens: int | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {"text": text, "tool_calls": list(calls)}
    if tokens is not None:
        data["usage"] = {"input_tokens": tokens, "output_tokens": 0}
    return data


def submit(status: str = "complete", summary: str = "done", **extra: Any) -> dict[str, Any]:
    return call("submit_result", status=status, summary=summary,
                criteria_met=extra.pop("criteria_met", []),
                deviations=extra.pop("deviations", []), **extra)


def make_repo(tmp_path: Path, files: dict[str, str] | None = None) -> Path:
    return init_repo(tmp_path / "work", files or {"README.md": "# test\n"})


def limits(**overrides: Any) -> Limits:
    base: dict[str, Any] = {"max_steps": 30, "max_duration_s": 600.0,
                            "max_consecutive_failures": 50, "retry_on_failure": False}
    base.update(overrides)
    return Limits(**base)


def make_task(worktree: Path, text: str = "Do the task.", *, agent: str = "spec-executor",
              **overrides: Any) -> AgentTask:
    validation = overrides.pop("validation_command", None)
    interactive = overrides.pop("interactive", False)
    project_root = overrides.pop("project_root", None)
    group = overrides.pop("group", "")
    output = overrides.pop("output", None)
    return AgentTask(agent=load_agent(agent, project_root), task=text, worktree=worktree,
                     limits=limits(**overrides), group=group, validation_command=validation,
                     interactive=interactive, project_root=project_root, output=output)


def events(transcript: Transcript, type: str | None = None) -> list[dict[str, Any]]:
    return [e for e in transcript.events if type is None or e["type"] == type]


def no_sleep(delays: list[float] | None = None):
    """A sleep that records the delays asked for and returns at once."""
    recorded = delays if delays is not None else []

    def sleep(seconds: float) -> None:
        recorded.append(seconds)

    return sleep


def pairing_problems(messages: list[Message]) -> list[str]:
    """Every assistant tool call answered by exactly one tool message right after it, and no
    tool message without its call. Returns the problems found (empty when valid)."""
    problems: list[str] = []
    pending: set[str] = set()
    for i, msg in enumerate(messages):
        if msg.role == "tool":
            if msg.tool_call_id not in pending:
                problems.append(f"message {i}: tool result {msg.tool_call_id!r} has no open call")
            pending.discard(msg.tool_call_id or "")
            continue
        if pending:
            problems.append(f"message {i}: calls {sorted(pending)} were never answered")
            pending = set()
        if msg.role == "assistant":
            ids = [c.id for c in msg.tool_calls]
            if len(set(ids)) != len(ids):
                problems.append(f"message {i}: duplicate tool call ids {ids}")
            pending = set(ids)
    if pending:
        problems.append(f"end: calls {sorted(pending)} were never answered")
    return problems
