"""The parsed form of a specification: pure data, no parsing logic."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

FrontmatterStyle = Literal["leading", "after_heading", "fenced", "none"]


@dataclass
class Section:
    """A `##` section. Lines are 0-based indexes into the spec's lines; `end` is exclusive."""

    title: str
    level: int
    start: int  # line of the heading
    end: int  # first line after the section's body
    body: str  # text between the heading and the next heading of the same or higher level


@dataclass
class Criterion:
    text: str
    checked: bool = False
    line: int | None = None


@dataclass
class TaskGroup:
    """One task group (`G1`, `G2`, ...) of `## Implementation Tasks`."""

    id: str
    title: str = ""
    tasks: list[str] = field(default_factory=list)
    dependencies: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # paths named in backticks in its tasks
    declared_wave: int | None = None  # from a Wave column, Execution Plan table or Wave N: block
    est_context: str | None = None
    segments: list[str] = field(default_factory=list)
    line: int | None = None  # 1-based line where the group is first defined
    duplicate_lines: list[int] = field(default_factory=list)  # the same id defined again
    self_dependency: bool = False  # it named itself as a dependency (dropped)
    # a plan read from another tool's format (agentrun/formats/): the ids of the source's
    # tasks this group holds, the context its worker reads with them, and its checks
    source_ids: list[str] = field(default_factory=list)
    context: str = ""
    checks: list[str] = field(default_factory=list)


@dataclass
class SourceRef:
    """Where a spec read from another tool's plan came from (see docs/formats.md)."""

    format: str  # speckit, kiro, gsd or taskmaster
    path: str  # the file or folder given, relative to the project root
    files: list[str] = field(default_factory=list)  # every file the plan was read from
    # a task with sub-tasks (Kiro): it runs as its sub-tasks and is ticked when they landed
    containers: dict[str, list[str]] = field(default_factory=dict)
    done: dict[str, str] = field(default_factory=dict)  # group id -> why the plan marks it done


@dataclass
class KeptGroup:
    """A group this run leaves as it is: unchanged since it landed, or done in the source."""

    id: str
    title: str
    source_ids: list[str]
    reason: str


@dataclass
class UnreadRow:
    """A row of a task-group table whose group id could not be read (`Task 2`, or no id in
    the first row): reported, never dropped in silence."""

    line: int  # 1-based
    cell: str  # the group cell as written ("" when empty)


@dataclass
class Spec:
    path: Path
    id: str
    title: str
    text: str
    frontmatter: dict[str, Any] = field(default_factory=dict)
    frontmatter_style: FrontmatterStyle = "none"
    sections: list[Section] = field(default_factory=list)
    acceptance_criteria: list[Criterion] = field(default_factory=list)
    files_to_create: list[str] = field(default_factory=list)
    files_to_modify: list[str] = field(default_factory=list)
    groups: list[TaskGroup] = field(default_factory=list)
    declared_waves: dict[str, int] = field(default_factory=dict)  # group id -> declared wave
    unread_rows: list[UnreadRow] = field(default_factory=list)  # group rows without a usable id
    requirement_sections: int = 0  # ### subsections under Requirements
    source: SourceRef | None = None  # set when the plan was read from another tool's format
    kept: list[KeptGroup] = field(default_factory=list)  # groups left out of this run
    # every group's fingerprint before groups were left out (what a run that lands records)
    fingerprints: dict[str, str] = field(default_factory=dict)

    @property
    def status(self) -> str | None:
        value = self.frontmatter.get("status")
        return None if value is None else str(value)

    @property
    def complexity(self) -> str | None:
        value = self.frontmatter.get("complexity")
        return None if value is None else str(value).lower()

    def section(self, title: str) -> Section | None:
        """The first `##` section whose title matches `title` (case-insensitive, prefix ok)."""
        wanted = title.strip().lower()
        for sec in self.sections:
            if sec.level == 2 and sec.title.strip().lower() == wanted:
                return sec
        for sec in self.sections:
            if sec.level == 2 and sec.title.strip().lower().startswith(wanted):
                return sec
        return None

    def group(self, group_id: str) -> TaskGroup | None:
        return next((g for g in self.groups if g.id == group_id), None)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["path"] = str(self.path)
        data.pop("text")
        for sec in data["sections"]:
            sec.pop("body")
        return data
