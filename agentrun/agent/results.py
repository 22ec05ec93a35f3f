"""How a conversation ends: what the model submitted, and the result of the conversation.

Shared by the conversation that produces them, the hooks that record a submission and run
sub-agents, and the attempt loop that reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel


@dataclass
class Submission:
    """What `submit_result` recorded; `output` is the task's validated result model, if any."""

    status: str
    summary: str
    criteria_met: list[str]
    deviations: list[str]
    error: str | None
    output: BaseModel | None = None
    no_change_needed: str | None = None  # why `complete` needs no change (checked by the run)


@dataclass
class AttemptResult:
    """How one conversation ended."""

    stop_reason: str
    status: str
    summary: str
    error: str | None = None
    submission: Submission | None = None
    steps: int = 0
    escalated: bool = False
    last_thought: str = ""
    last_action: str = ""
    observation: str = ""
    wrote: bool = False  # a write tool was called
