"""What a format reader hands over: the plan's groups as the format defines them, with the
context they come with. `build` turns it into the same `Spec` a native spec parses into."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from agentrun.core.errors import SpecError


@dataclass
class Unit:
    """One task group as the format reads it."""

    gid: str  # the group id agentrun uses (G12 for spec-kit T012, ...)
    source_ids: list[str]  # the format's own task ids the group holds
    title: str
    tasks: list[str]  # verbatim task text, one entry per source task
    path: Path  # the file the group is defined in
    line: int  # 1-based line of its definition there
    files: list[str] = field(default_factory=list)
    deps: list[str] = field(default_factory=list)  # group ids
    context: str = ""
    checks: list[str] = field(default_factory=list)
    done: bool = False  # the source marks every task of the group done
    wave: int | None = None  # the wave the source declares (GSD)
    status: str = ""  # why a done group is done, in the source's words ("done in tasks.md")


@dataclass
class Imported:
    """A plan read from another tool's files."""

    format: str
    spec_id: str
    title: str
    origin: Path  # the file or folder given
    files: list[Path]  # every file read
    units: list[Unit]
    context: str = ""
    requirements: str = ""
    criteria: list[str] = field(default_factory=list)
    constraints: str = ""
    containers: dict[str, list[str]] = field(default_factory=dict)

    def unit(self, gid: str) -> Unit | None:
        return next((u for u in self.units if u.gid == gid), None)


def bad_plan(path: Path | str, line: int | None, message: str, hint: str) -> SpecError:
    """A plan that cannot be run as written: exit 2, naming the file and line."""
    where = f"{path}:{line}" if line else str(path)
    return SpecError(f"{where}: {message}", hint, path=str(path), line=line)
