"""Planning: task groups → dependency waves → worker batches, and the execution mode.

Deterministic code, no model calls. Waves are the topological layers of the dependency graph;
groups of one layer that name the same file are split into sequential sub-waves so that no two
workers edit one file at once; each worker gets at most `MAX_GROUPS_PER_WORKER` groups.
"""

from __future__ import annotations

import graphlib
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from agentrun.core.errors import PlanError
from agentrun.core.status import RunMode
from agentrun.spec.model import Spec, TaskGroup

MAX_GROUPS_PER_WORKER = 3
SpecSeverity = Literal["critical", "warning", "info"]


@dataclass
class SpecFinding:
    """A lint or audit observation about a spec."""

    severity: SpecSeverity
    code: str
    message: str
    line: int | None = None
    group: str | None = None


@dataclass
class Batch:
    """The groups one worker process executes, in order."""

    id: str
    groups: list[str]

    @property
    def ids(self) -> list[str]:
        """The group ids this batch stands for; a spec without groups is one unit of work,
        named by the batch."""
        return self.groups or [self.id]


@dataclass
class Wave:
    """One step of execution: its batches run in parallel; the next wave waits for all of them.

    `layer` is the dependency layer the wave comes from; sub-waves of one layer share it and
    are labelled `2a`, `2b`, ...
    """

    number: int
    label: str
    layer: int
    groups: list[str]
    batches: list[Batch]


@dataclass
class Plan:
    spec_id: str
    mode: RunMode
    mode_reason: str
    layers: list[list[str]]  # dependency layers, before any split
    waves: list[Wave]  # execution waves; single mode has one wave with one batch
    findings: list[SpecFinding] = field(default_factory=list)
    detected_mode: RunMode = "single"

    @property
    def workers(self) -> int:
        return sum(len(w.batches) for w in self.waves)

    @property
    def group_ids(self) -> list[str]:
        return [g for w in self.waves for g in w.groups]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["workers"] = self.workers
        for wave in data["waves"]:
            wave["parallelism"] = len(wave["batches"])
        return data


def compute_layers(groups: list[TaskGroup]) -> list[list[str]]:
    """Topological layers of the groups' dependency graph, each in spec order.

    Raises PlanError naming an unknown dependency together with the group that names it, or a
    cycle as a chain `G2 -> G3 -> G4 -> G2`.
    """
    known = {g.id for g in groups}
    order = {g.id: i for i, g in enumerate(groups)}
    for group in groups:
        for dep in group.dependencies:
            if dep not in known:
                where = f" (line {group.line})" if group.line else ""
                names = ", ".join(g.id for g in groups)
                raise PlanError(
                    f"group {group.id}{where} depends on unknown group {dep}",
                    hint=f"define {dep} in Implementation Tasks or remove it from "
                         f"{group.id}'s dependencies; known groups: {names}",
                )
            if dep == group.id:
                raise PlanError(f"group {group.id} depends on itself: {group.id} -> {group.id}",
                                hint=f"remove {group.id} from its own dependencies")
    sorter = graphlib.TopologicalSorter({g.id: set(g.dependencies) for g in groups})
    try:
        sorter.prepare()
    except graphlib.CycleError as exc:
        cycle = list(exc.args[1])
        # graphlib reports the cycle with the first node repeated at the end, in reverse
        # dependency order; print it as "depends on" arrows starting at the lowest group.
        chain = cycle[:-1][::-1]
        start = min(range(len(chain)), key=lambda i: order.get(chain[i], 0))
        chain = chain[start:] + chain[:start]
        text = " -> ".join([*chain, chain[0]])
        raise PlanError(f"dependency cycle: {text}",
                        hint="each arrow means 'depends on'; remove one dependency to break "
                             "the cycle") from None
    layers: list[list[str]] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=order.__getitem__)
        layers.append(ready)
        sorter.done(*ready)
    return layers


def split_by_files(layer: list[str], groups: dict[str, TaskGroup]) -> list[list[str]]:
    """Split one layer into sub-waves so that no two groups in a sub-wave share a file.

    Greedy first-fit in spec order: deterministic, and it keeps the common case (no overlap)
    as a single wave.
    """
    subwaves: list[tuple[list[str], set[str]]] = []
    for gid in layer:
        files = set(groups[gid].files)
        for members, used in subwaves:
            if not files & used:
                members.append(gid)
                used |= files
                break
        else:
            subwaves.append(([gid], set(files)))
    return [members for members, _ in subwaves]


def make_batches(group_ids: list[str], max_workers: int | None = None) -> list[Batch]:
    """One group per worker by default; with `max_workers`, pack up to 3 groups per worker."""
    if not group_ids:
        return []
    count = len(group_ids)
    if max_workers and max_workers > 0:
        count = max(min(max_workers, len(group_ids)),
                    -(-len(group_ids) // MAX_GROUPS_PER_WORKER))
    buckets: list[list[str]] = [[] for _ in range(count)]
    per = -(-len(group_ids) // count)
    for i, gid in enumerate(group_ids):
        buckets[min(i // per, count - 1)].append(gid)
    return [Batch(id="_".join(b), groups=b) for b in buckets if b]


def detect_mode(spec: Spec, layers: list[list[str]]) -> tuple[RunMode, str]:
    """Orchestrated only when at least two groups can run in the same wave."""
    if spec.section("Implementation Tasks") is None and not spec.groups:
        return "single", "no Implementation Tasks section"
    if not spec.groups:
        return "single", "Implementation Tasks has no task groups"
    if len(spec.groups) == 1:
        return "single", "only one task group"
    widest = max(len(layer) for layer in layers)
    if widest < 2:
        return "single", f"{len(spec.groups)} groups but all sequential (no parallelism)"
    parallel = sum(1 for layer in layers if len(layer) > 1)
    return "orchestrated", (f"{len(spec.groups)} groups in {len(layers)} waves; "
                            f"{parallel} wave(s) can run groups in parallel")


def wave_drift(spec: Spec, layers: list[list[str]]) -> list[SpecFinding]:
    """Declared waves are advice: report every group whose declared wave differs."""
    computed = {gid: i + 1 for i, layer in enumerate(layers) for gid in layer}
    findings = []
    for gid, declared in spec.declared_waves.items():
        actual = computed.get(gid)
        if actual is None:
            findings.append(SpecFinding("warning", "declared-wave-unknown-group",
                                    f"a declared wave names {gid}, which is not a task group",
                                    group=gid))
        elif actual != declared:
            group = spec.group(gid)
            deps = ", ".join(group.dependencies) if group and group.dependencies else "none"
            findings.append(SpecFinding(
                "warning", "wave-drift",
                f"{gid} is declared in wave {declared} but its dependencies ({deps}) put it "
                f"in wave {actual}; the computed wave is used",
                line=group.line if group else None, group=gid))
    return findings


def definition_findings(spec: Spec) -> list[SpecFinding]:
    """Slips in how groups are written: a table row whose group id cannot be read (its work
    would never run), an id defined twice (its rows were merged into one group, which is
    rarely what the author meant) and a group that depends on itself."""
    findings = []
    for row in spec.unread_rows:
        what = (f"the group id `{row.cell}` cannot be read" if row.cell else
                "a task-group row has no group id (and no row above it to continue)")
        findings.append(SpecFinding(
            "critical", "unreadable-group",
            f"line {row.line}: {what}; its tasks would not run — write the id as G1, G2, ...",
            line=row.line))
    for g in spec.groups:
        if g.duplicate_lines:
            lines = ", ".join(str(n) for n in [g.line, *g.duplicate_lines])
            findings.append(SpecFinding(
                "critical", "duplicate-group",
                f"{g.id} is defined more than once (lines {lines}); its rows were merged — "
                "give each group its own id, or mark the rows as segments (S1, S2)",
                line=g.duplicate_lines[0], group=g.id))
        if g.self_dependency:
            findings.append(SpecFinding("warning", "self-dependency",
                                    f"{g.id} names itself as a dependency (ignored)",
                                    line=g.line, group=g.id))
    return findings


def build_plan(spec: Spec, mode: RunMode | None = None, max_workers: int | None = None) -> Plan:
    """Plan a spec. Raises PlanError on a cycle or an unknown dependency."""
    groups = {g.id: g for g in spec.groups}
    layers = compute_layers(spec.groups)
    detected, reason = detect_mode(spec, layers)
    findings = [*definition_findings(spec), *wave_drift(spec, layers)]
    chosen = mode or detected
    if mode and mode != detected:
        reason = f"--mode {mode} (detected {detected}: {reason})"

    waves: list[Wave] = []
    if chosen == "single":
        ordered = [gid for layer in layers for gid in layer]
        waves.append(Wave(number=1, label="1", layer=1, groups=ordered,
                          batches=[Batch(id="single", groups=ordered)]))
    else:
        for layer_no, layer in enumerate(layers, start=1):
            subwaves = split_by_files(layer, groups)
            if len(subwaves) > 1:
                shared = _shared_files(layer, groups)
                findings.append(SpecFinding(
                    "warning", "file-overlap",
                    f"wave {layer_no}: groups {', '.join(layer)} name the same file(s) "
                    f"{', '.join(shared)}; split into {len(subwaves)} sequential sub-waves"))
            for i, members in enumerate(subwaves):
                label = str(layer_no) if len(subwaves) == 1 else f"{layer_no}{chr(97 + i)}"
                waves.append(Wave(number=len(waves) + 1, label=label, layer=layer_no,
                                  groups=members, batches=make_batches(members, max_workers)))
    return Plan(spec_id=spec.id, mode=chosen, mode_reason=reason, layers=layers, waves=waves,
                findings=findings, detected_mode=detected)


def _shared_files(layer: list[str], groups: dict[str, TaskGroup]) -> list[str]:
    seen: dict[str, int] = {}
    for gid in layer:
        for path in set(groups[gid].files):
            seen[path] = seen.get(path, 0) + 1
    return sorted(p for p, n in seen.items() if n > 1)
