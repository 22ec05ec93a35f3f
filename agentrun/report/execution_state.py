"""The execution state of a run: what every group did, saved after every worker returns.

`.specflow/execution/<SPEC>-state.json` is the resume checkpoint: an interrupted or failed run
is continued from it (`agentrun run --resume`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from agentrun.errors import BadInput
from agentrun.fsutil import atomic_write_json
from agentrun.protocol import RunStatus, Status, StopReason
from agentrun.providers.base import Usage


@dataclass
class GroupState:
    id: str
    title: str = ""
    wave: str = ""
    batch: str = ""
    status: Status = Status.PENDING
    commits: list[str] = field(default_factory=list)
    merge_commit: str | None = None
    files_created: list[str] = field(default_factory=list)
    files_modified: list[str] = field(default_factory=list)
    files_deleted: list[str] = field(default_factory=list)
    criteria_met: list[str] = field(default_factory=list)
    deviations: list[str] = field(default_factory=list)
    error: str | None = None
    summary: str = ""
    no_change_needed: str | None = None
    attempts: int = 0
    steps: int = 0
    usage: dict[str, int] = field(default_factory=lambda: Usage().to_dict())
    cost_usd: float | None = 0.0
    duration_s: float = 0.0
    stop_reason: StopReason | None = None
    branch: str | None = None
    worktree: str | None = None

    def __post_init__(self) -> None:
        self.status = Status(self.status)
        if self.stop_reason is not None:
            self.stop_reason = StopReason(self.stop_reason)


@dataclass
class WaveState:
    number: int
    label: str
    groups: list[str]
    status: str = "pending"  # pending|running|done|failed (its integration check)|skipped


@dataclass
class IntegrationCheck:
    """The validation command run on a wave's merged result: whether it passed, and when it
    did not, its output's tail, the groups (or combinations) whose merges alone break it, and
    what became of the target branch."""

    wave: str
    command: str
    commit: str  # the merged result that was checked
    base: str  # the target branch before the wave
    ok: bool
    output: str = ""
    culprits: list[list[str]] = field(default_factory=list)
    base_fails: bool = False  # the wave's base fails the command already
    restored: bool = False  # the target branch was reset to `base`
    kept_branches: list[str] = field(default_factory=list)
    note: str = ""


@dataclass
class ReviewRecord:
    """One review of the run's merged result (at its end, or after a fix): the verdict, the
    spec's `### Review vN` it was written as (None: the reviewer submitted no review), and
    what the reviewer cost."""

    result: str  # APPROVED | CHANGES_REQUESTED
    version: int | None = None
    error: str | None = None
    findings: int = 0
    usage: dict[str, int] = field(default_factory=lambda: Usage().to_dict())
    cost_usd: float | None = 0.0


@dataclass
class RunState:
    run_id: str
    spec_id: str
    spec_path: str
    mode: str
    base_commit: str
    target_branch: str | None
    started: str
    finished: str | None = None
    status: RunStatus = RunStatus.RUNNING
    current_wave: int = 0
    waves: list[WaveState] = field(default_factory=list)
    groups: dict[str, GroupState] = field(default_factory=dict)
    provider: str = ""
    model: str = ""
    warnings: list[str] = field(default_factory=list)
    resumed_from: str | None = None
    stop_reason: StopReason | None = None  # the run's own (integration), not its agents'
    integration_command: str | None = None  # None: the run was not integration-checked
    integration: list[IntegrationCheck] = field(default_factory=list)
    reviews: list[ReviewRecord] = field(default_factory=list)
    review_skipped: str | None = None  # why the run was not reviewed (`--no-review`, ...)

    def __post_init__(self) -> None:
        self.status = RunStatus(self.status)
        if self.stop_reason is not None:
            self.stop_reason = StopReason(self.stop_reason)

    @property
    def usage(self) -> Usage:
        total = Usage()
        for g in self.groups.values():
            total = total + Usage(**g.usage)
        for r in self.reviews:
            total = total + Usage(**r.usage)
        return total

    @property
    def cost_usd(self) -> float | None:
        costs = [g.cost_usd for g in self.groups.values() if g.status != Status.PENDING]
        costs += [r.cost_usd for r in self.reviews]
        return None if any(c is None for c in costs) else round(sum(costs), 6)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for g in self.groups.values():
            out[g.status] = out.get(g.status, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
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
        names = {f.name for f in fields(cls)}
        nested = ("waves", "groups", "integration", "reviews")
        base = {k: v for k, v in data.items() if k in names and k not in nested}
        gnames = {f.name for f in fields(GroupState)}
        return cls(
            **base,
            waves=[WaveState(**w) for w in data.get("waves", [])],
            groups={k: GroupState(**{f: v for f, v in g.items() if f in gnames})
                    for k, g in data.get("groups", {}).items()},
            integration=[IntegrationCheck(**c) for c in data.get("integration", [])],
            reviews=[ReviewRecord(**r) for r in data.get("reviews", [])],
        )


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
