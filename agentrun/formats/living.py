"""Living specs: which groups a run does, and what it records once they landed.

Every group that lands has its fingerprint (agentrun/spec/fingerprint.py: its task text,
files and dependency ids) recorded in `.specflow/execution/<spec>-landed.json`. `--changed`
runs only the groups whose fingerprint differs from the one recorded when they last landed
(or that never landed), plus every group that depends on one of them; the rest are kept.
Without `--changed`, a plan in another format keeps the groups its own file marks done
(ticked, `status: done`, a GSD SUMMARY.md). Kept groups leave the run's plan, and the groups
that run no longer wait for them: their work is already in the branch.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from agentrun.core.fsutil import atomic_write_json
from agentrun.spec.fingerprint import group_fingerprints
from agentrun.spec.model import KeptGroup, Spec

VERSION = 1


def landed_path(execution_dir: Path, spec_id: str) -> Path:
    return execution_dir / f"{spec_id}-landed.json"


def read_landed(path: Path) -> dict[str, dict[str, Any]]:
    """Group id -> {fingerprint, run_id, landed}; empty when there is no (readable) record."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    groups = data.get("groups") if isinstance(data, dict) else None
    return {k: v for k, v in groups.items() if isinstance(v, dict)} \
        if isinstance(groups, dict) else {}


def select(spec: Spec, execution_dir: Path, *, changed: bool) -> Spec:
    """The spec this run works on: its groups less the kept ones (listed in `kept`, with
    why), with `fingerprints` holding every group's fingerprint."""
    prints = group_fingerprints(spec)
    done = spec.source.done if spec.source is not None else {}
    order = [g.id for g in spec.groups]
    if changed:
        landed = read_landed(landed_path(execution_dir, spec.id))
        new = {g for g in order if (g in landed and landed[g].get("fingerprint") != prints[g])
               or (g not in landed and g not in done)}
        run = _with_dependents(spec, new)
        reasons = {g: (f"unchanged since run {landed[g].get('run_id', '?')}" if g in landed
                       else done.get(g, "done")) for g in order if g not in run}
    else:
        run = {g for g in order if g not in done}
        reasons = {g: done[g] for g in order if g not in run}
    out = copy.copy(spec)
    out.fingerprints = prints
    if not reasons:
        return out
    out.groups = [copy.copy(g) for g in spec.groups if g.id in run]
    for g in out.groups:
        g.dependencies = [d for d in g.dependencies if d in run]
    out.declared_waves = {k: v for k, v in spec.declared_waves.items() if k in run}
    out.kept = [KeptGroup(g.id, g.title, list(g.source_ids), reasons[g.id])
                for g in spec.groups if g.id in reasons]
    return out


def _with_dependents(spec: Spec, start: set[str]) -> set[str]:
    dependents: dict[str, set[str]] = {g.id: set() for g in spec.groups}
    for g in spec.groups:
        for d in g.dependencies:
            dependents.setdefault(d, set()).add(g.id)
    out = set(start)
    todo = list(start)
    while todo:
        for nxt in dependents.get(todo.pop(), ()):
            if nxt not in out:
                out.add(nxt)
                todo.append(nxt)
    return out


def record_landed(spec: Spec, execution_dir: Path, landed: list[str], run_id: str,
                  when: str) -> Path | None:
    """Record the fingerprints of the groups that landed in this run (the earlier records of
    the others stay); the record's path, or None when nothing landed."""
    if not landed:
        return None
    prints = spec.fingerprints or group_fingerprints(spec)
    path = landed_path(execution_dir, spec.id)
    groups = read_landed(path)
    for gid in landed:
        if gid in prints:
            groups[gid] = {"fingerprint": prints[gid], "run_id": run_id, "landed": when}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, {"version": VERSION, "spec": spec.id, "groups": groups})
    return path


def after_run(spec: Spec, root: Path, execution_dir: Path, state: Any) -> list[Path]:
    """What a finished run leaves for the next: the landed record, and the plan's own file
    marked where its tasks landed. The files written (for the run's report commit)."""
    from agentrun.core.status import Status
    from agentrun.formats.writeback import write_back

    landed = [gid for gid, g in state.groups.items()
              if g.status == Status.COMPLETE and spec.group(gid) is not None]
    written: list[Path] = []
    record = record_landed(spec, execution_dir, landed, state.run_id, state.finished or "")
    if record is not None:
        written.append(record)
    if spec.source is not None:
        written.extend(write_back(spec, root, landed))
    return written
