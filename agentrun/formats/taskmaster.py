"""Taskmaster `.taskmaster/tasks/tasks.json` (claude-task-master).

The file holds tasks with `id`, `title`, `description`, `details`, `testStrategy`,
`dependencies`, `status`, `priority` and `subtasks` — either as `{"tasks": [...]}` or, since
tags, as `{"<tag>": {"tasks": [...], "metadata": {...}}, ...}`; every tag is read
(apps/docs/capabilities/task-structure.mdx). Each task is one group: its own text, then each
sub-task's, in the order the sub-tasks' dependencies allow; `testStrategy` is its checks and
`acceptanceCriteria` the run's criteria. A task's `dependencies` name tasks of its tag; a
sub-task's name a sibling sub-task as `<task>.<sub>` (the form Taskmaster writes now) or by
its number, another task's sub-task as `<task>.<sub>`, and a task by its number: a number its
own task already depends on is that task (Taskmaster's validator reads it so), otherwise a
sibling when there is one (as its next-task logic reads it), otherwise another task.
Groups are `G<id>` (with several tags, `G<tag number><id as 3 digits>`: tag 2's task 7 is
`G2007`). Tasks whose status is `done`, `completed`, `cancelled` or `deferred` are not run.
"""

from __future__ import annotations

import graphlib
import json
from pathlib import Path
from typing import Any

from agentrun.formats.jsonspan import JsonSpanError, ObjectSpan, parse
from agentrun.formats.model import Imported, Unit, bad_plan
from agentrun.formats.order import check_graph
from agentrun.formats.text import paths_in

NAME = "taskmaster"
NOT_RUN = ("done", "completed", "cancelled", "canceled", "deferred")
MAX_ID = 999


def detect(text: str) -> bool:
    """JSON whose top level has `tasks`, or tags that each have `tasks`."""
    stripped = text.lstrip("\ufeff \t\r\n")
    if not stripped.startswith("{"):
        return False
    try:
        data = json.loads(stripped)
    except (ValueError, RecursionError):
        return False
    return bool(tag_lists(data))


def tag_lists(data: Any) -> list[tuple[str | None, dict[str, Any]]]:
    if not isinstance(data, dict):
        return []
    if isinstance(data.get("tasks"), list):
        return [(None, data)]
    tags = [(k, v) for k, v in data.items() if isinstance(v, dict) and
            isinstance(v.get("tasks"), list)]
    return tags if tags and len(tags) == len(data) else []


def read(path: Path, text: str, spec_id: str) -> Imported:
    body = text.lstrip("\ufeff")
    try:
        data, spans = parse(body)
    except JsonSpanError as exc:
        raise bad_plan(path, exc.line, f"invalid JSON: {exc}", "fix the JSON syntax") from None
    tags = tag_lists(data)
    if not tags:
        raise bad_plan(path, 1, "no Taskmaster tasks (a `tasks` list, or tags with one)",
                       "check that this is a Taskmaster tasks.json")
    many = len(tags) > 1
    units: list[Unit] = []
    criteria: list[str] = []
    context: list[str] = []
    for number, (tag, holder) in enumerate(tags, start=1):
        metadata = holder.get("metadata")
        meta: dict[str, Any] = metadata if isinstance(metadata, dict) else {}
        if tag is not None:
            described = f": {meta['description']}" if meta.get("description") else ""
            context.append(f"Tag {tag}{described}")
        tag_units, tag_criteria = _tag(path, tag if many else None, number if many else None,
                                       holder["tasks"], spans)
        units.extend(tag_units)
        criteria.extend(tag_criteria)
    check_graph(units)
    names = ", ".join(t for t, _ in tags if t) or "tasks"
    return Imported(format=NAME, spec_id=spec_id, title=f"Taskmaster {names}", origin=path,
                    files=[path], units=units, context="\n".join(context), criteria=criteria)


def _tag(path: Path, tag: str | None, number: int | None, tasks: list[Any],
         spans: dict[int, ObjectSpan]) -> tuple[list[Unit], list[str]]:
    prefix = f"{tag}:" if tag else ""
    by_id: dict[str, dict[str, Any]] = {}
    gid: dict[str, str] = {}
    for task in tasks:
        line = _line(spans, task)
        if not isinstance(task, dict) or "id" not in task:
            raise bad_plan(path, line, f"a task without an id in {tag or 'the task list'}",
                           "give every task an `id`")
        tid = str(task["id"])
        if not tid.isdigit() or int(tid) > MAX_ID:
            raise bad_plan(path, line, f"task id {task['id']!r} is not a number from 1 to "
                           f"{MAX_ID}", "number tasks as Taskmaster does (1, 2, 3, ...)")
        if tid in by_id:
            raise bad_plan(path, line, f"task id {prefix}{tid} is used twice (lines "
                           f"{_line(spans, by_id[tid])} and {line})", "give each task its own id")
        by_id[tid] = task
        gid[tid] = f"G{number}{int(tid):03d}" if number else f"G{int(tid)}"
    units: list[Unit] = []
    criteria: list[str] = []
    for tid, task in by_id.items():
        line = _line(spans, task)
        subtasks = [s for s in task.get("subtasks") or [] if isinstance(s, dict)]
        deps: list[str] = []
        for ref in task.get("dependencies") or []:
            target = str(ref).split(".")[0]
            if target not in gid:
                raise bad_plan(path, line, f"task {prefix}{tid} depends on {prefix}{ref}, which "
                               "is not a task of this list",
                               "name an existing task in `dependencies`, or remove it")
            if target != tid and gid[target] not in deps:
                deps.append(gid[target])
        ordered = _subtask_order(path, prefix, tid, subtasks, spans, by_id, gid, deps)
        texts = [_text(task)]
        checks = [f"Test strategy: {task['testStrategy']}"] if _str(task, "testStrategy") else []
        ids = [f"{prefix}{tid}"]
        for sub in ordered:
            sid = f"{tid}.{sub.get('id')}"
            ids.append(f"{prefix}{sid}")
            texts.append(f"Subtask {sid}: {_text(sub)}")
            if _str(sub, "testStrategy"):
                checks.append(f"Subtask {sid}: {sub['testStrategy']}")
            criteria.extend(f"{prefix}{sid}: {c}" for c in _criteria(sub))
        criteria.extend(f"{prefix}{tid}: {c}" for c in _criteria(task))
        status = str(task.get("status") or "pending").lower()
        context = [f"Taskmaster task {prefix}{tid}"
                   + (f" (priority {task['priority']})" if _str(task, "priority") else "")]
        files = paths_in("\n".join(texts))
        units.append(Unit(gid=gid[tid], source_ids=ids,
                          title=f"{prefix}{tid} {_str(task, 'title')}", tasks=texts,
                          path=path, line=line, files=files, deps=deps,
                          context="\n".join(context), checks=checks, done=status in NOT_RUN,
                          status=f"status {status} in {path.name}" if status in NOT_RUN else ""))
    return units, criteria


def _subtask_order(path: Path, prefix: str, tid: str, subtasks: list[dict[str, Any]],
                   spans: dict[int, ObjectSpan], tasks: dict[str, dict[str, Any]],
                   gid: dict[str, str], deps: list[str]) -> list[dict[str, Any]]:
    """The sub-tasks in an order their sibling dependencies allow (as listed, otherwise);
    a dependency on another task's sub-task becomes a dependency of the group."""
    by_sid = {str(s.get("id")): s for s in subtasks}
    parent_deps = {str(d).split(".")[0] for d in tasks[tid].get("dependencies") or []}
    graph: dict[str, set[str]] = {}
    for sub in subtasks:
        sid = str(sub.get("id"))
        graph[sid] = set()
        for ref in sub.get("dependencies") or []:
            text = str(ref)
            if "." not in text and (text in parent_deps or (text not in by_sid
                                                            and text in tasks)):
                # a task's number: the one its task depends on already, or another task
                if text != tid and gid[text] not in deps:
                    deps.append(gid[text])
                continue
            owner, _, other = text.partition(".") if "." in text else (tid, "", text)
            if owner == tid:
                if other not in by_sid:
                    raise bad_plan(path, _line(spans, sub), f"sub-task {prefix}{tid}.{sid} "
                                   f"depends on {prefix}{tid}.{other}, which does not exist",
                                   "name an existing sub-task, or remove the dependency")
                if other != sid:
                    graph[sid].add(other)
                continue
            target = tasks.get(owner)
            if target is None or other not in {str(s.get("id")) for s in
                                               target.get("subtasks") or [] if isinstance(s, dict)}:
                raise bad_plan(path, _line(spans, sub), f"sub-task {prefix}{tid}.{sid} depends "
                               f"on {prefix}{text}, which is not a task of this list",
                               "name an existing task or sub-task, or remove the dependency")
            if gid[owner] not in deps:
                deps.append(gid[owner])
    sorter = graphlib.TopologicalSorter(graph)
    try:
        sorter.prepare()
    except graphlib.CycleError as exc:
        cycle = list(exc.args[1])[:-1][::-1]
        listed = [str(s.get("id")) for s in subtasks]
        first = min(range(len(cycle)), key=lambda i: listed.index(cycle[i]))
        cycle = cycle[first:] + cycle[:first]
        chain = " -> ".join(f"{prefix}{tid}.{s} (line {_line(spans, by_sid[s])})"
                            for s in [*cycle, cycle[0]])
        raise bad_plan(path, _line(spans, by_sid[cycle[0]]), f"dependency cycle: {chain}",
                       "each arrow means 'depends on'; remove one dependency to break the "
                       "cycle") from None
    listed = [str(s.get("id")) for s in subtasks]
    order: list[str] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=listed.index)
        order.extend(ready)
        sorter.done(*ready)
    return [by_sid[s] for s in order]


def _text(task: dict[str, Any]) -> str:
    parts = [_str(task, "title"), _str(task, "description"), _str(task, "details")]
    return "\n\n".join(p for p in parts if p)


def _criteria(task: dict[str, Any]) -> list[str]:
    value = task.get("acceptanceCriteria")
    items = value if isinstance(value, list) else str(value or "").splitlines()
    return [str(x).strip().lstrip("-*").strip() for x in items if str(x).strip().lstrip("-*")]


def _str(task: dict[str, Any], key: str) -> str:
    value = task.get(key)
    return value.strip() if isinstance(value, str) else "" if value is None else str(value)


def _line(spans: dict[int, ObjectSpan], value: Any) -> int:
    span = spans.get(id(value))
    return span.line if span else 1
