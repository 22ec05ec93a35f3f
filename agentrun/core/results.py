"""How work ended: one `Outcome` model from an attempt up to a group of the run state.

A worker's `WorkerResult` is a JSON file, validated on read: a worker's claims are data to
check, not facts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentrun.core.fsutil import TooLarge, atomic_write_text, read_capped
from agentrun.core.status import ResultStatus, Status, StopReason
from agentrun.core.usage import Usage

# a worker's result file is read back by the orchestrator: no more than this
MAX_RESULT_BYTES = 16 * 1024 * 1024


class Outcome(BaseModel):
    """How a piece of work ended: one model from an attempt up to a group of the run state.

    Each layer adds only what it alone knows: an attempt what the model did
    (agent/results.py), a task its structured output (attempts.py), a worker what git holds
    (`Work`, `WorkerResult`), the run where it landed (report/execution_state.py). A layer is
    built from the one below with `carried()`, so no field is copied by hand.
    """

    model_config = ConfigDict(validate_assignment=True)

    status: Status
    summary: str = ""
    criteria_met: list[str] = Field(default_factory=list)
    deviations: list[str] = Field(default_factory=list)
    error: str | None = None
    no_change_needed: str | None = None  # the model's reason a `complete` needs no commit
    attempts: int = 0
    steps: int = 0
    usage: Usage = Field(default_factory=Usage)
    stop_reason: StopReason | None = StopReason.COMPLETED

    def carried(self, upto: type[Outcome] | None = None) -> dict[str, Any]:
        """The fields this outcome shares with `upto` (default: the `Outcome` fields), to
        build the next layer from."""
        names = (upto or Outcome).model_fields
        return {name: getattr(self, name) for name in names if name in type(self).model_fields}


class Work(Outcome):
    """An outcome with what git holds for it and what it cost."""

    files_created: list[str] = Field(default_factory=list)
    files_modified: list[str] = Field(default_factory=list)
    files_deleted: list[str] = Field(default_factory=list)
    commits: list[str] = Field(default_factory=list)
    cost_usd: float | None = 0.0
    duration_s: float = 0.0


class WorkerResult(Work):
    """What a worker returns for its batch (docs/ARCHITECTURE.md), plus where the work
    lives (branch, worktree)."""

    status: ResultStatus
    stop_reason: StopReason = StopReason.COMPLETED
    group: str
    groups: list[str]
    branch: str | None = None
    worktree: str | None = None
    batch: str | None = None

    @classmethod
    def for_batch(cls, ids: list[str], batch: str, branch: str | None,
                  worktree: str | None = None, **fields: Any) -> WorkerResult:
        """The result for the groups `ids` of `batch`, with `fields`."""
        return cls(group=ids[0], groups=list(ids), batch=batch, branch=branch,
                   worktree=worktree, **fields)

    def write(self, path: Path) -> None:
        atomic_write_text(path, self.model_dump_json(indent=2) + "\n")

    @classmethod
    def read(cls, path: Path) -> WorkerResult:
        """Parse a result file; raises ValueError with a readable reason when invalid."""
        return cls.read_with_extras(path)[0]

    @classmethod
    def read_with_extras(cls, path: Path) -> tuple[WorkerResult, dict[str, Any]]:
        """The result and the file's whole JSON object (CI jobs add spec, base commit, ...)."""
        try:
            text = read_capped(Path(path), MAX_RESULT_BYTES).decode("utf-8")
        except FileNotFoundError:
            raise ValueError(f"no result file at {path}") from None
        except UnicodeDecodeError:
            raise ValueError(f"result file {path} is not UTF-8 text") from None
        except TooLarge:
            raise ValueError(f"result file {path} is larger than {MAX_RESULT_BYTES:,} "
                             "bytes") from None
        except OSError as exc:
            raise ValueError(f"cannot read result file {path}: {exc.strerror or exc}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"result file {path} is not valid JSON ({exc.msg} at line "
                             f"{exc.lineno})") from None
        try:
            return cls.model_validate(data), data
        except ValidationError as exc:
            raise ValueError(f"result file {path} does not match the result schema: "
                             f"{first_error(exc)}") from None


def first_error(exc: Exception) -> str:
    """The first problem pydantic found (and how many more), or the first line of `exc`."""
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"]) or "(root)"
        return f"{loc}: {err['msg']}" + (f" (+{exc.error_count() - 1} more)"
                                         if exc.error_count() > 1 else "")
    return str(exc).splitlines()[0]
