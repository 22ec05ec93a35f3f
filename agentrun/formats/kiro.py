"""Kiro `tasks.md` (`.kiro/specs/<feature>/tasks.md`), and cc-sdd's variant of it.

Tasks are numbered checklist items: `- [ ] 1. Title` with sub-tasks `- [ ] 1.1 Title` (nested
under it, or at the same indentation after it; cc-sdd may also write the major task as a
`## 1. Title` heading), each with detail bullets and `_Requirements: 1.2, 3.1_`. Kiro runs the
tasks in order. cc-sdd's rules (tools/cc-sdd/templates/shared/settings/rules/
tasks-generation.md): order implies dependency; ` (P)` after a task's number (or, as its
template writes it, at the end of the title) means it has no dependency on its immediately
preceding peers and runs with them; `_Depends: 1.2, 2.3_` names a
dependency outright; `- [ ]*` or `7.9*` marks an optional test task (run like the others);
`_Boundary: ..._` names the component a task stays in.

Every task that is not a container of sub-tasks is one group: `N` is `G<N>`, sub-task `N.M`
is `G<N>` followed by the M-th letter (`2.1` is `G2a`). A major task with sub-tasks is their
container: it runs as its sub-tasks, and its checkbox is ticked when they all landed. The
`requirements.md` beside `tasks.md`, when there is one, gives each task the text of the
requirements it cites.
"""

from __future__ import annotations

import re
import string
from pathlib import Path

from agentrun.formats.model import Imported, Unit, bad_plan
from agentrun.formats.order import Step, check_graph, reduce, sequence
from agentrun.formats.text import CheckboxItem, checklist, paths_in
from agentrun.spec.markdown import Doc

NAME = "kiro"
NUMBERED = re.compile(r"^(\d+(?:\.\d+)*)\.?(\*?)[ \t]+(?:\((P)\)[ \t]*)?(.*)$")
_HEADING = re.compile(r"^(\d+)\.?[ \t]+(?:\((P)\)[ \t]*)?(.*)$")
_META = re.compile(r"^[-*]\s+_?(Requirements|Depends|Boundary|Contracts)_?\s*:\s*(.*?)_?\s*$",
                   re.I)
_TRAILING_P = re.compile(r"[ \t]+\(P\)[ \t]*$")
_LETTERS = string.ascii_lowercase
_REQ = re.compile(r"^\s*(\d+(?:\.\d+)?)\.?\s+(.*)$")


def detect(text: str) -> bool:
    """A numbered checklist task (`- [ ] 1. ...` or `- [ ] 2.1 ...`)."""
    return re.search(r"(?m)^\s*[-*]\s+\[[ xX]\]\*?\s+\d+(?:\.\d+)*\.?\*?\s+\S", text) is not None


class _Task:
    def __init__(self, tid: str, item: CheckboxItem | None, line: int, title: str, parallel: bool,
                 optional: bool) -> None:
        self.tid = tid
        self.item = item
        self.line = line  # 1-based
        self.title = title
        self.parallel = parallel
        self.optional = optional
        self.children: list[_Task] = []
        self.details: list[str] = []
        self.meta: dict[str, str] = {}


def read(path: Path, text: str, spec_id: str) -> Imported:
    plan = checklist(text)
    doc = plan.doc
    majors: list[_Task] = []
    by_id: dict[str, _Task] = {}
    for h in doc.headings:  # cc-sdd: `## 1. Project Foundation` as the major task
        m = _HEADING.match(h.text)
        if m and h.level >= 2:
            task = _Task(m.group(1), None, h.line + 1, m.group(3).strip(), bool(m.group(2)),
                         False)
            _add(path, task, majors, by_id)
    for item in plan.items:
        m = NUMBERED.match(item.head)
        if m is None:
            continue
        tid, star, parallel, title = m.groups()
        trailing = _TRAILING_P.search(title)  # cc-sdd's template puts the mark at the end
        if trailing:
            title = title[:trailing.start()]
        task = _Task(tid, item, item.line + 1, title.strip(), bool(parallel or trailing),
                     item.optional or bool(star))
        for line in item.body:
            meta = _META.match(line.strip())
            if meta:
                task.meta[meta.group(1).lower()] = meta.group(2).strip().strip("_").strip()
            else:
                task.details.append(line)
        if tid.count(".") > 1:
            raise bad_plan(path, task.line, f"task {tid} nests deeper than Kiro's two levels",
                           "number it as a sub-task of a major task (N.M)")
        if "." in tid:
            parent = by_id.get(tid.split(".")[0])
            if parent is None or _owner(majors, task.line) is not parent:
                raise bad_plan(path, task.line, f"task {tid} fits no task: it is not under "
                               f"task {tid.split('.')[0]}",
                               "put each sub-task under (or right after) its major task")
            if tid in by_id:
                raise bad_plan(path, task.line, f"task {tid} is numbered twice (lines "
                               f"{by_id[tid].line} and {task.line})",
                               "give each task its own number")
            parent.children.append(task)
            by_id[tid] = task
        else:
            _add(path, task, majors, by_id)
    if not majors:
        raise bad_plan(path, None, "no tasks found (numbered checklist items `- [ ] 1. ...`)",
                       "check that this is a Kiro tasks.md")
    requirements = _requirements(path.parent / "requirements.md")
    units: list[Unit] = []
    steps: list[Step] = []
    containers: dict[str, list[str]] = {}
    explicit: dict[str, list[str]] = {}
    gid_of: dict[str, str] = {}
    for major in majors:
        leaves = major.children or [major]
        if major.children:
            containers[major.tid] = [c.tid for c in major.children]
        step = Step(parallel=major.parallel)
        for task in leaves:
            gid = _gid(path, task)
            gid_of[task.tid] = gid
            step.items.append((gid, task.parallel and task is not major))
            units.append(_unit(path, task, major, gid, requirements))
            explicit[gid] = re.findall(r"\d+(?:\.\d+)?", task.meta.get("depends", ""))
        steps.append(step)
    order = [u.gid for u in units]
    deps = reduce(sequence(steps), order)
    for unit in units:
        extra: list[str] = []
        for ref in explicit[unit.gid]:
            target = [ref] if ref in gid_of else containers.get(ref)
            if target is None:
                raise bad_plan(path, unit.line, f"{unit.source_ids[0]} depends on {ref}, which "
                               "is not a task of this plan",
                               "name a task the plan defines in _Depends:_, or remove it")
            extra.extend(gid_of[t] for t in target if gid_of[t] != unit.gid)
        unit.deps = [*deps[unit.gid], *(d for d in extra if d not in deps[unit.gid])]
    check_graph(units)
    for major in majors:
        if major.children:
            for unit in units:
                if unit.source_ids[0] in containers[major.tid]:
                    unit.context = f"Part of task {major.tid}: {major.title}\n" + unit.context
    imported = Imported(format=NAME, spec_id=spec_id, title=_title(doc, path), origin=path,
                        files=[path], units=units, context=_preamble(doc),
                        containers={k: v for k, v in containers.items()
                                    if by_id[k].item is not None})
    if requirements:
        imported.files.append(path.parent / "requirements.md")
        imported.requirements = "\n".join(f"{k}. {v}" for k, v in requirements.items())
        imported.criteria = [f"{k}: {v}" for k, v in requirements.items() if "." in k]
    return imported


def _add(path: Path, task: _Task, majors: list[_Task], by_id: dict[str, _Task]) -> None:
    if task.tid in by_id:
        raise bad_plan(path, task.line, f"task {task.tid} is numbered twice (lines "
                       f"{by_id[task.tid].line} and {task.line})", "give each task its own number")
    majors.append(task)
    majors.sort(key=lambda t: t.line)
    by_id[task.tid] = task


def _owner(majors: list[_Task], line: int) -> _Task | None:
    """The major task a line follows."""
    owner = None
    for major in majors:
        if major.line < line:
            owner = major
    return owner


def _gid(path: Path, task: _Task) -> str:
    if "." not in task.tid:
        return f"G{int(task.tid)}"
    major, sub = task.tid.split(".")
    if not 1 <= int(sub) <= len(_LETTERS):
        raise bad_plan(path, task.line, f"sub-task {task.tid}: agentrun numbers sub-tasks 1 to "
                       f"{len(_LETTERS)}", "split the major task in two")
    return f"G{int(major)}{_LETTERS[int(sub) - 1]}"


def _unit(path: Path, task: _Task, major: _Task, gid: str,
          requirements: dict[str, str]) -> Unit:
    text = "\n".join([task.title, *task.details]).strip()
    context: list[str] = []
    if task.meta.get("boundary"):
        context.append(f"Boundary: {task.meta['boundary']}")
    cited = task.meta.get("requirements", "")
    if cited:
        context.append(f"Requirements: {cited}")
        for ref in re.findall(r"\d+(?:\.\d+)?", cited):
            if ref in requirements:
                context.append(f"- {ref}: {requirements[ref]}")
    if task.optional:
        context.append("Optional test task (marked `*` in the plan).")
    item = task.item
    done = bool(item and item.checked)
    return Unit(gid=gid, source_ids=[task.tid], title=f"{task.tid} {_short(task.title)}",
                tasks=[text], path=path, line=task.line, files=paths_in(text),
                context="\n".join(context), done=done,
                status=f"ticked in {path.name}" if done else "")


def _requirements(path: Path) -> dict[str, str]:
    """`requirements.md`'s numbered requirements (`### Requirement 1`) and acceptance
    criteria (`1. WHEN ... THEN ...` under it, cited as `1.1`)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    out: dict[str, str] = {}
    current: str | None = None
    for raw in Doc(text).lines:
        head = re.match(r"^#{2,4}\s+Requirement\s+(\d+)\s*[:.—-]?\s*(.*)$", raw.strip(), re.I)
        if head:
            current = head.group(1)
            out[current] = head.group(2).strip() or f"Requirement {current}"
            continue
        story = re.match(r"^\*\*User Story:?\*\*:?\s*(.*)$", raw.strip(), re.I)
        if current and story:
            out[current] += f" — {story.group(1).strip()}"
            continue
        m = _REQ.match(raw)
        if current and m and "." not in m.group(1) and not raw.startswith((" ", "\t")):
            out[f"{current}.{m.group(1)}"] = m.group(2).strip()
    return out


def _title(doc: Doc, path: Path) -> str:
    h1 = next((h for h in doc.headings if h.level == 1), None)
    title = re.sub(r"^implementation plan\s*[:—-]?\s*(for\s+)?", "", h1.text, flags=re.I) \
        if h1 else ""
    return title.strip() or path.parent.name


def _preamble(doc: Doc) -> str:
    """Prose before the first task or task heading (an overview)."""
    h1 = next((h for h in doc.headings if h.level == 1), None)
    start = h1.body_line if h1 else 0
    out: list[str] = []
    for raw in doc.lines[start:]:
        stripped = raw.strip()
        if re.match(r"^[-*]\s+\[[ xX]\]", stripped) or re.match(r"^#+\s+\d+\.?\s", stripped) \
                or stripped.lower().startswith(("## tasks", "## task list")):
            break
        out.append(raw)
    return "\n".join(out).strip()


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 80 else text[:79] + "…"
