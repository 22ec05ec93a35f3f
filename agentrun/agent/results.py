"""How a conversation ends: what the model submitted, and the outcome of the conversation.

Shared by the conversation that produces them, the hooks that record a submission and run
sub-agents, and the attempt loop that reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from agentrun.core.results import Outcome


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


class AttemptOutcome(Outcome):
    """How one attempt (one conversation) ended; the executor adds what it spent (`usage`).

    What the model reported through `submit_result` (criteria, deviations, ...) is carried in
    the outcome's own fields; `submission` keeps the original, with the task's result model.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    attempts: int = 1
    submission: Submission | None = Field(default=None, exclude=True)
    escalated: bool = False
    wrote: bool = False  # something that may change the worktree was done
    # where the attempt left off, for the retry prompt
    last_thought: str = ""
    last_action: str = ""
    observation: str = ""
