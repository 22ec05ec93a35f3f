"""The execution state of a run: what every group did, saved after every worker returns.

`.specflow/execution/<SPEC>-state.json` is the resume checkpoint: an interrupted or failed run
is continued from it (`agentrun run --resume`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentrun.core.errors import BadInput
from agentrun.core.fsutil import atomic_write_json
from agentrun.core.results import Work
from agentrun.core.status import RunStatus, Status, StopReason
from agentrun.core.usage import Usage
from agentrun.processes import alive


class GroupState(Work):
    """A group of the run: its verified work, where it stands and where it landed."""

    id: str
    title: str = ""
    wave: str = ""
    batch: str = ""
    status: Status = Status.PENDING
    stop_reason: StopReason | None = None
    merge_commit: str | None = None
    branch: str | None = None
    worktree: str | None = None

    def take(self, work: Work, part: int = 0, parts: int = 1) -> None:
        """Record a batch's verified work as this group's: its share of the tokens and the
        cost when the batch holds `parts` groups (this one being number `part`)."""
        for name, value in work.carried(Work).items():
            setattr(self, name, value)
        self.usage = Usage(**{k: split(v, parts)[part] for k, v in work.usage.to_dict().items()})
        self.cost_usd = None if work.cost_usd is None else work.cost_usd / parts


def split(total: int, parts: int) -> list[int]:
    """`total` in `parts` whole shares that add up to it (the first ones one larger)."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


class WaveState(BaseModel):
    model_config = ConfigDict(validate_assignment=True)

    number: int
    label: str
    groups: list[str]
    status: str = "pending"  # pending|running|done|failed (its integration check)|skipped


class IntegrationCheck(BaseModel):
    """The validation command run on a wave's merged result: whether it passed, and when it
    did not, its output's tail, the groups (or combinations) whose merges alone break it, and
    what became of the target branch."""

    wave: str
    command: str
    commit: str  # the merged result that was checked
    base: str  # the target branch before the wave
    ok: bool
    output: str = ""
    culprits: list[list[str]] = Field(default_factory=list)
    base_fails: bool = False  # the wave's base fails the command already
    restored: bool = False  # the target branch was reset to `base`
    kept_branches: list[str] = Field(default_factory=list)
    note: str = ""


class ReviewRecord(BaseModel):
    """One review of the run's result (at its end, after a fix, or by `agentrun review`): the
    verdict, the spec's `### Review vN` it was rendered as (None: the reviewer submitted no
    review), and what the reviewer cost.

    This record is what every command reads back (`fix`, `status`, the spec's rendering): the
    spec's text is written from it, never parsed for it, so nothing written into the spec can
    change what the last review said.
    """

    result: str  # APPROVED | CHANGES_REQUESTED | INCOMPLETE
    version: int | None = None
    error: str | None = None
    findings: int = 0
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float | None = 0.0
    when: str | None = None  # "YYYY-MM-DD HH:MM", as the spec's entry shows it
    reviewer: str = ""  # "code-reviewer (model)"
    head: str | None = None  # the commit reviewed
    parts: int = 1  # requests the change was shown in
    criteria: list[str] = Field(default_factory=list)  # the criteria judged, in order
    verdict: dict[str, Any] | None = None  # the reviewer's answer (`review.verdict.Review`)

    @property
    def judged(self) -> bool:
        """The review gave a verdict (not an error, not incomplete)."""
        return self.version is not None and self.result != "INCOMPLETE"

    def met(self) -> list[bool] | None:
        """Per criterion, whether this review found it met with evidence: all False when it
        was incomplete (nothing was judged met), None when it is no review (an error)."""
        if self.result == "INCOMPLETE":
            return [False] * len(self.criteria)
        if not self.judged or self.verdict is None:
            return None
        met = {c.get("criterion") for c in self.verdict.get("criteria") or []
               if c.get("verdict") == "met" and str(c.get("evidence") or "").strip()}
        return [n in met for n in range(1, len(self.criteria) + 1)]


class RunState(BaseModel):
    model_config = ConfigDict(validate_assignment=True)

    run_id: str
    spec_id: str
    spec_path: str
    mode: str
    base_commit: str
    target_branch: str | None
    # the commit the run last left its target branch at (run/target.py checks it)
    target_head: str | None = None
    started: str
    finished: str | None = None
    status: RunStatus = RunStatus.RUNNING
    current_wave: int = 0
    waves: list[WaveState] = Field(default_factory=list)
    groups: dict[str, GroupState] = Field(default_factory=dict)
    provider: str = ""
    model: str = ""
    warnings: list[str] = Field(default_factory=list)
    resumed_from: str | None = None
    stop_reason: StopReason | None = None  # the run's own (integration), not its agents'
    integration_command: str | None = None  # None: the run was not integration-checked
    integration: list[IntegrationCheck] = Field(default_factory=list)
    reviews: list[ReviewRecord] = Field(default_factory=list)
    review_skipped: str | None = None  # why the run was not reviewed (`--no-review`, ...)
    # what this run and every run it resumes spent, as the spending cap counts it
    spent_usd: float | None = None
    # the settings fixed when the run (or the run it resumes) started: the commit whose agents
    # and prompts apply, and `.specflow/config.yaml` as read then (`Project.pinned`)
    start_commit: str | None = None
    config: dict[str, Any] | None = None
    # each group's task as this run was given it (spec/fingerprint.py): a resume reuses a
    # group's finished work only while its fingerprint is the same
    fingerprints: dict[str, str] = Field(default_factory=dict)
    # the run's OpenTelemetry trace, when it was traced (agentrun/telemetry/)
    trace_id: str | None = None
    # `pid:start` of the process running it (agentrun/processes.py): a `running` run whose
    # process is gone was killed before it could say so (None: between CI jobs)
    process: str | None = None

    @property
    def orphaned(self) -> bool:
        """`running`, but the process that ran it is gone: it was interrupted."""
        return self.status == RunStatus.RUNNING and self.process is not None \
            and alive(self.process) is False

    @property
    def usage(self) -> Usage:
        total = Usage()
        for g in self.groups.values():
            total = total + g.usage
        for r in self.reviews:
            total = total + r.usage
        return total

    @property
    def cost_usd(self) -> float | None:
        costs = [g.cost_usd for g in self.groups.values() if g.status != Status.PENDING]
        costs += [r.cost_usd for r in self.reviews]
        known = [c for c in costs if c is not None]
        return round(sum(known), 6) if len(known) == len(costs) else None

    def unfinished(self) -> list[str]:
        """The spec's groups the run did not complete, in words ("G2 failed", "G3 blocked");
        a fix batch (wave `fix-N`) is the review's work, not the spec's."""
        return [f"{g.id} {g.status}" for g in self.groups.values()
                if g.status != Status.COMPLETE and not g.wave.startswith("fix-")]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for g in self.groups.values():
            out[g.status] = out.get(g.status, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        data["usage"] = self.usage.to_dict()
        data["cost_usd"] = self.cost_usd
        data["counts"] = self.counts()
        last = self.reviews[-1] if self.reviews else None
        data["review"] = {"reviewed": last is not None and last.version is not None,
                          "result": last.result if last else None,
                          "version": last.version if last else None,
                          "skipped": self.review_skipped}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunState:
        return cls.model_validate(data)


def state_path(execution_dir: Path, spec_id: str) -> Path:
    return execution_dir / f"{spec_id}-state.json"


def save_state(path: Path, state: RunState) -> None:
    atomic_write_json(path, state.to_dict())


def load_state(path: Path) -> RunState | None:
    """The checkpoint at `path`, or None when there is none.

    A checkpoint that cannot be read back (not JSON, or JSON of another shape) is bad input:
    ignoring it would hide the last run from `status` and make `--resume` start over silently.
    """
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        problem = _shape_problem(data)
        if problem is None:
            return RunState.from_dict(data)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        problem = str(exc) or type(exc).__name__
    raise BadInput(f"the execution state {path} cannot be read: {problem}",
                   hint="run without --resume to start afresh (the new run replaces it), or "
                        "delete the file")


_TEXT_FIELDS = ("run_id", "spec_id", "spec_path", "mode", "base_commit", "started")
_NESTED = (("waves", list), ("groups", dict), ("integration", list), ("reviews", list))


def _shape_problem(data: Any) -> str | None:
    """What makes `data` something other than a saved RunState, or None."""
    if not isinstance(data, dict):
        return f"expected a JSON object, found {type(data).__name__}"
    for name in _TEXT_FIELDS:
        if not isinstance(data.get(name), str):
            return f"`{name}` is missing or not a string"
    for name, kind in _NESTED:
        value = data.get(name, kind())
        if not isinstance(value, kind):
            return f"`{name}` is not a {'list' if kind is list else 'mapping'}"
        items = value.values() if isinstance(value, dict) else value
        if not all(isinstance(item, dict) for item in items):
            return f"an entry of `{name}` is not a mapping"
    return None
