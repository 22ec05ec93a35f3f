"""What the group readers find (one definition per table row or heading, and declared
waves), and how definitions of one id merge into a task group — segments merge, a second plain
definition in the same source is recorded as a slip, a self-dependency is dropped and noted."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentrun.spec.model import TaskGroup, UnreadRow
from agentrun.spec.refs import unique


@dataclass
class GroupDef:
    """One definition of a group: a table row or a heading with its body."""

    gid: str
    line: int  # 1-based
    title: str = ""
    tasks: list[str] = field(default_factory=list)
    deps: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    wave: int | None = None
    est: str | None = None
    segment: str | None = None
    source: str = ""  # which table or "heading": one group defined twice in one source is a slip


@dataclass
class Found:
    defs: list[GroupDef] = field(default_factory=list)
    waves: list[tuple[int, str, int]] = field(default_factory=list)  # (line, group, wave)
    unread: list[UnreadRow] = field(default_factory=list)

    def declare(self, line: int, refs: list[str], wave: int | None) -> None:
        if wave is not None:
            self.waves.extend((line, gid, wave) for gid in refs)


def merge(found: Found) -> tuple[list[TaskGroup], dict[str, int]]:
    declared: dict[str, int] = {}
    for _, gid, wave in sorted(found.waves, key=lambda w: w[0]):
        declared.setdefault(gid, wave)
    groups: dict[str, TaskGroup] = {}
    unsegmented: dict[tuple[str, str], int] = {}  # (group, source) -> line of its definition
    for d in sorted(found.defs, key=lambda d: d.line):
        g = groups.get(d.gid)
        if g is None:
            g = groups[d.gid] = TaskGroup(id=d.gid, title=d.title, line=d.line)
        if d.segment is None:
            if (d.gid, d.source) in unsegmented:
                g.duplicate_lines.append(d.line)  # segments merge; a second plain row is a slip
            unsegmented.setdefault((d.gid, d.source), d.line)
        if d.gid in d.deps and d.segment is None:  # a segment may follow its sibling
            g.self_dependency = True
        g.title = g.title or d.title
        g.tasks.extend(t for t in d.tasks if t not in g.tasks)
        g.dependencies = unique(g.dependencies + [x for x in d.deps if x != d.gid])
        g.files = unique(g.files + d.files)
        g.est_context = g.est_context or d.est
        if d.segment and d.segment not in g.segments:
            g.segments.append(d.segment)
    for g in groups.values():
        g.declared_wave = declared.get(g.id)
    return list(groups.values()), declared

