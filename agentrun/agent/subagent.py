"""The hooks behind the agent tools: `submit_result`, `check_token_budget`, `spawn_subagent`.

A sub-agent is the same loop on a fresh conversation in the same worktree. Its depth is capped
at 1 (it gets no `spawn_subagent`, and its hooks refuse one anyway), its tools are a subset of
its parent's, and its tokens are added to the parent's tracker, so the parent's budget and
usage include them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, get_args

from pydantic import BaseModel

from agentrun.agent.definitions import AgentDefinition, load_agent
from agentrun.agent.prompts import render
from agentrun.agent.results import AttemptOutcome, Submission
from agentrun.agent.runtime import Runtime
from agentrun.core.errors import BadInput
from agentrun.core.status import ResultStatus, Status, StopReason

SUBMIT_STATUSES = tuple(get_args(ResultStatus))
ALWAYS_TOOLS = ("submit_result", "check_token_budget")  # every agent can finish and budget
MAX_DEPTH = 1

# runs one conversation: (agent, task text, tool names, max steps, depth) -> result
RunConversation = Callable[[AgentDefinition, str, list[str], int, int], AttemptOutcome]


class LoopHooks:
    """`AgentHooks` for one conversation."""

    def __init__(self, rt: Runtime, agent: AgentDefinition, tool_names: list[str], depth: int,
                 run_conversation: RunConversation) -> None:
        self.rt = rt
        self.agent = agent
        self.tool_names = tool_names
        self.depth = depth
        self.run_conversation = run_conversation
        self.submission: Submission | None = None

    def token_budget(self) -> dict[str, Any]:
        return self.rt.tracker.status()

    def submit_result(self, status: str, summary: str, criteria_met: list[str],
                      deviations: list[str], error: str | None,
                      output: BaseModel | None = None,
                      no_change_needed: str | None = None) -> dict[str, Any]:
        if status not in SUBMIT_STATUSES:
            return {"accepted": False,
                    "error": f"status must be one of {', '.join(SUBMIT_STATUSES)}, "
                             f"got {status!r}"}
        self.submission = Submission(status, summary or "", list(criteria_met or []),
                                     list(deviations or []), error or None, output,
                                     no_change_needed or None)
        return {"accepted": True, "status": status,
                "note": "result recorded; the attempt ends after this turn"}

    def spawn_subagent(self, agent: str, task: str, context: str | None,
                       tools: list[str] | None, max_steps: int | None) -> dict[str, Any]:
        def refused(error: str) -> dict[str, Any]:
            return {"success": False, "summary": "", "steps_used": 0, "tokens_used": 0,
                    "error": error}

        if self.depth >= MAX_DEPTH:
            return refused("sub-agents cannot spawn sub-agents (depth is capped at 1); do the "
                           "work yourself or report it in submit_result")
        try:
            definition = load_agent(agent, self.rt.project_root)
        except BadInput as exc:
            return refused(f"{exc.message} ({exc.hint})" if exc.hint else exc.message)
        allowed = [t for t in self.tool_names if t != "spawn_subagent"]
        if tools:
            outside = [t for t in tools if t not in allowed]
            if outside:
                return refused(f"tools not available to the sub-agent: {', '.join(outside)}; "
                               f"choose from {', '.join(allowed)}")
            names = list(dict.fromkeys(tools))
        else:
            names = [t for t in definition.tools if t in allowed]
        names += [t for t in ALWAYS_TOOLS if t not in names]
        cap = self.rt.limits.max_steps
        steps = min(max_steps, cap) if max_steps and max_steps > 0 else \
            self.rt.limits.subagent_max_steps
        text = render("subagent", {"parent": self.agent.name, "task": task,
                                   "context": context or "", "max_steps": steps},
                      self.rt.project_root)
        before = self.rt.tracker.used
        self.rt.record("subagent_start", parent=self.agent.name, agent=definition.name,
                       tools=names, max_steps=steps, task=task)
        result = self.run_conversation(definition, text, names, steps, self.depth + 1)
        tokens = self.rt.tracker.used - before
        success = result.stop_reason == StopReason.COMPLETED and result.status == Status.COMPLETE
        error = None if success else (result.error or f"sub-agent ended: {result.stop_reason}, "
                                                      f"status {result.status}")
        report = {"success": success, "summary": result.summary, "steps_used": result.steps,
                  "tokens_used": tokens, "error": error}
        self.rt.record("subagent_end", parent=self.agent.name, agent=definition.name, **report)
        return report
