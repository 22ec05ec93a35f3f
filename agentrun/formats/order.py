"""Dependencies from the order a plan is written in, and the checks every format's graph
must pass before planning: no dependency on an unknown task, no cycle.

spec-kit and Kiro write their plans as steps (phases, sections, major tasks) of tasks in
order. A task waits for everything before it in its step and for every earlier step; a task
marked parallel starts together with the task before it instead (it waits for what that task
waits for, not for the task itself); a step marked parallel starts together with the step
before it. `sequence` computes exactly that, and `reduce` keeps only the dependencies that are
not implied by others, so the plan shows `G5` rather than `G1, G2, G3, G4, G5`.
"""

from __future__ import annotations

import graphlib
from dataclasses import dataclass, field

from agentrun.formats.model import Unit, bad_plan


@dataclass
class Step:
    items: list[tuple[str, bool]] = field(default_factory=list)  # (group id, parallel mark)
    parallel: bool = False  # the whole step starts with the step before it


def sequence(steps: list[Step]) -> dict[str, set[str]]:
    """Every group's prerequisites (closed: the prerequisites' own are included)."""
    pre: dict[str, set[str]] = {}
    before: set[str] = set()  # the groups of every earlier step
    previous_start: set[str] = set()
    for n, step in enumerate(steps):
        start = set(previous_start) if step.parallel and n else set(before)
        earlier: set[str] = set()
        last: str | None = None
        for gid, parallel in step.items:
            pre[gid] = set(pre[last]) if parallel and last is not None else start | earlier
            earlier.add(gid)
            last = gid
        previous_start = start
        before |= earlier
    return pre


def reduce(pre: dict[str, set[str]], order: list[str]) -> dict[str, list[str]]:
    """The direct dependencies: a prerequisite another prerequisite already waits for is
    implied. In plan order."""
    rank = {gid: i for i, gid in enumerate(order)}
    out: dict[str, list[str]] = {}
    for gid, mine in pre.items():
        implied = set().union(*(pre.get(other, set()) for other in mine)) if mine else set()
        out[gid] = sorted(mine - implied, key=lambda g: rank.get(g, 0))
    return out


def check_graph(units: list[Unit], names: dict[str, str] | None = None) -> None:
    """SpecError (exit 2) for a dependency on a group that does not exist or a cycle, naming
    the source task and its line. `names` shows a group by its source ids (default: first)."""
    known = {u.gid: u for u in units}

    def name(gid: str) -> str:
        if names and gid in names:
            return names[gid]
        unit = known.get(gid)
        return unit.source_ids[0] if unit and unit.source_ids else gid

    for unit in units:
        for dep in unit.deps:
            if dep not in known:
                raise bad_plan(unit.path, unit.line,
                               f"{name(unit.gid)} depends on {name(dep)}, which is not a task "
                               "of this plan",
                               "name a task the plan defines, or remove the dependency")
    sorter = graphlib.TopologicalSorter({u.gid: set(u.deps) for u in units})
    try:
        sorter.prepare()
    except graphlib.CycleError as exc:
        cycle = list(exc.args[1])[:-1][::-1]  # graphlib lists it backwards, first node twice
        first = min(range(len(cycle)), key=lambda i: list(known).index(cycle[i]))
        cycle = cycle[first:] + cycle[:first]
        unit = known[cycle[0]]
        chain = " -> ".join(f"{name(g)} (line {known[g].line})" for g in [*cycle, cycle[0]])
        raise bad_plan(unit.path, unit.line, f"dependency cycle: {chain}",
                       "each arrow means 'depends on'; remove one dependency to break the "
                       "cycle") from None
