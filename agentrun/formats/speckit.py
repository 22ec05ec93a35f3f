"""GitHub spec-kit `tasks.md` (`specs/NNN-feature/tasks.md`).

Tasks are checklist lines `- [ ] T012 [P] [US1] Create User model in src/models/user.py`
under `## Phase N: ...` headings (Setup, Foundational, one per user story, Polish). The
format's order rules (templates/tasks-template.md and the implement command of spec-kit):
phases run in order, and so do the `###` sections inside a phase (tests before
implementation); inside a section tasks run in order, except that a task marked `[P]` may run
in parallel with the one before it. `(depends on T012, T013)` in a task adds those. Each task
is one group `G<n>` for `T<n>`. The `spec.md` beside `tasks.md`, when there is one, gives each
story's text as its tasks' context, and the acceptance scenarios and success criteria as the
run's criteria. The prose `## Dependencies` section is not read: its rules are the ones above.
"""

from __future__ import annotations

import re
from pathlib import Path

from agentrun.formats.model import Imported, Unit, bad_plan
from agentrun.formats.order import Step, check_graph, reduce, sequence
from agentrun.formats.text import checklist, heading_of, paths_in
from agentrun.spec.markdown import Doc, Heading, norm_title

NAME = "speckit"
TASK = re.compile(r"^(T\d+)\b[ \t]*((?:\[[^\]\n]*\][ \t]*)*)(.*)$")
_ID_LIKE = re.compile(r"^T[\w-]*\b")
_PHASE = re.compile(r"^phase\b", re.I)
_STORY_PHASE = re.compile(r"\buser\s+story\s+(\d+)\b", re.I)
_STORY = re.compile(r"^US(\d+)$", re.I)
_DEPENDS = re.compile(r"\bdepends\s+on\s+((?:T\d+(?:\s*(?:,|and|&)\s*)?)+)", re.I)
_REF = re.compile(r"T\d+")
_LABEL_LINE = re.compile(r"^\*\*(Goal|Purpose|Independent Test)\*\*:?\s*(.*)$", re.I)
_TITLE = re.compile(r"^(?:tasks|task list)\s*[:—-]\s*", re.I)


def detect(text: str) -> bool:
    """A checklist line with a `T<digits>` task id."""
    return re.search(r"(?m)^\s*[-*]\s+\[[ xX]\]\s+T\d+\b", text) is not None


def read(path: Path, text: str, spec_id: str) -> Imported:
    plan = checklist(text)
    doc = plan.doc
    phases = _phases(doc)
    units: list[Unit] = []
    steps: list[Step] = []
    step_key: tuple[int, int] | None = None
    seen: dict[int, Unit] = {}
    explicit: dict[str, list[str]] = {}
    story_of: dict[str, int] = {}
    for item in plan.items:
        m = TASK.match(item.head)
        heading = _phase_of(phases, item.line)
        if m is None:
            if heading is not None and (_ID_LIKE.match(item.head) or item.depth == 0):
                raise bad_plan(path, item.line + 1,
                               f"a task without a task id: {item.head[:60]!r}",
                               "start every task with its id, T followed by digits (T001)")
            continue
        tid, labels_text, rest = m.groups()
        if heading is None:
            raise bad_plan(path, item.line + 1, f"task {tid} fits no phase: it is not under a "
                           "`## Phase N: ...` heading",
                           "move it into the phase it belongs to")
        labels = re.findall(r"\[([^\]\n]*)\]", labels_text)
        number = int(tid[1:])
        if number in seen:
            raise bad_plan(path, item.line + 1, f"task id {tid} is used twice (lines "
                           f"{seen[number].line} and {item.line + 1})", "give each task its own id")
        story = next((int(s.group(1)) for s in map(_STORY.match, labels) if s), None)
        phase_story = _STORY_PHASE.search(heading.text)
        if story is not None and phase_story and int(phase_story.group(1)) != story:
            raise bad_plan(path, item.line + 1,
                           f"task {tid} is labelled US{story} but sits in phase "
                           f"{heading.text!r}: it fits no phase",
                           f"move it into User Story {story}'s phase, or fix its label")
        if story is None and phase_story:
            story = int(phase_story.group(1))
        task = "\n".join([rest.strip(), *item.body]).strip()
        unit = Unit(gid=f"G{number}", source_ids=[tid], title=f"{tid} {_one_line(rest)}",
                    tasks=[task], path=path, line=item.line + 1, files=paths_in(task),
                    context=_context(doc, heading, item.line), done=item.checked,
                    status=f"ticked in {path.name}" if item.checked else "")
        seen[number] = unit
        units.append(unit)
        explicit[unit.gid] = [f"G{int(r[1:])}" for d in _DEPENDS.finditer(task)
                              for r in _REF.findall(d.group(1))]
        if story is not None:
            story_of[unit.gid] = story
        key = (heading.line, _section_line(doc, heading, item.line))
        if key != step_key:
            steps.append(Step())
            step_key = key
        steps[-1].items.append((unit.gid, any(x.strip().upper() == "P" for x in labels)))
    if not units:
        raise bad_plan(path, None, "no tasks found (checklist lines `- [ ] T001 ...` under "
                       "`## Phase N: ...` headings)", "check that this is a spec-kit tasks.md")
    order = [u.gid for u in units]
    deps = reduce(sequence(steps), order)
    known = {u.gid for u in units}
    for unit in units:
        extra = [d for d in explicit[unit.gid] if d != unit.gid]
        unknown = [d for d in extra if d not in known]
        if unknown:
            raise bad_plan(path, unit.line, f"{unit.source_ids[0]} depends on T"
                           f"{int(unknown[0][1:]):03d}, which is not a task of this plan",
                           "name a task the plan defines, or remove the dependency")
        unit.deps = [*deps[unit.gid], *(d for d in extra if d not in deps[unit.gid])]
    check_graph(units)
    imported = Imported(format=NAME, spec_id=spec_id, title=_title(doc, path), origin=path,
                        files=[path], units=units, context=_preamble(doc))
    _spec_md(path.parent / "spec.md", imported, story_of)
    return imported


def _phases(doc: Doc) -> list[tuple[Heading, int]]:
    """(phase heading, line where the phase ends)."""
    out: list[tuple[Heading, int]] = []
    for n, h in enumerate(doc.headings):
        if h.level < 2 or not _PHASE.match(norm_title(h.text)):
            continue
        end = len(doc.lines)
        for nxt in doc.headings[n + 1:]:
            if nxt.level <= h.level:
                end = nxt.line
                break
        out.append((h, end))
    return out


def _phase_of(phases: list[tuple[Heading, int]], line: int) -> Heading | None:
    return next((h for h, end in phases if h.line < line < end), None)


def _section_line(doc: Doc, phase: Heading, line: int) -> int:
    """The `###` section (deeper than the phase heading) a task is in; the phase's own
    line for a task before its first section."""
    chain = [h for h in heading_of(doc, line) if h.line >= phase.line and h.level > phase.level]
    return chain[0].line if chain else phase.line


def _context(doc: Doc, phase: Heading, line: int) -> str:
    parts = [f"Phase: {phase.text}"]
    end = min((h.line for h in doc.headings if h.line > phase.line), default=len(doc.lines))
    for raw in doc.lines[phase.body_line:end]:
        m = _LABEL_LINE.match(raw.strip())
        if m:
            parts.append(f"{m.group(1)}: {m.group(2).strip()}")
    section = [h for h in heading_of(doc, line) if h.level > phase.level and h.line > phase.line]
    if section:
        parts.append(f"Section: {section[0].text}")
    return "\n".join(parts)


def _title(doc: Doc, path: Path) -> str:
    h1 = next((h for h in doc.headings if h.level == 1), None)
    title = _TITLE.sub("", h1.text).strip() if h1 else ""
    return title or path.parent.name


def _preamble(doc: Doc) -> str:
    """The lines between the title and the first `##` heading (Input, Prerequisites, ...)."""
    h1 = next((h for h in doc.headings if h.level == 1), None)
    start = h1.body_line if h1 else 0
    end = next((h.line for h in doc.headings if h.level >= 2 and h.line >= start),
               len(doc.lines))
    return "\n".join(doc.lines[start:end]).strip()


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 80 else text[:79] + "…"


def _spec_md(path: Path, imported: Imported, story_of: dict[str, int]) -> None:
    """Context and criteria from the feature's `spec.md`: each user story's text for its
    tasks, the functional requirements, the acceptance scenarios and success criteria."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return
    imported.files.append(path)
    doc = Doc(text)
    stories: dict[int, str] = {}
    criteria: list[str] = []
    for n, h in enumerate(doc.headings):
        end = next((x.line for x in doc.headings[n + 1:] if x.level <= h.level),
                   len(doc.lines))
        body = doc.lines[h.body_line:end]
        title = norm_title(h.text)
        story = _STORY_PHASE.search(h.text)
        if story and h.level >= 3:
            number = int(story.group(1))
            text_lines = []
            for raw in body:
                if raw.strip().lower().startswith("**acceptance scenarios"):
                    break
                text_lines.append(raw)
            stories[number] = f"{h.text}\n" + "\n".join(text_lines).strip()
            scenarios = [_item(x) for x in body if re.match(r"^\s*\d+\.\s+", x)]
            criteria.extend(f"US{number}: {s}" for s in scenarios if s)
        elif title.startswith("functional requirements"):
            imported.requirements = "\n".join(body).strip()
        elif title.startswith("measurable outcomes") or (
                title.startswith("success criteria") and h.level == 2 and not any(
                    x.level > 2 for x in doc.headings[n + 1:n + 2])):
            criteria.extend(_item(x) for x in body if re.match(r"^\s*(?:[-*]|\d+\.)\s+", x))
    imported.criteria = [c for c in criteria if c]
    for unit in imported.units:
        story_number = story_of.get(unit.gid)
        if story_number is not None and story_number in stories:
            unit.context += f"\nUser story (spec.md): {stories[story_number]}"


def _item(line: str) -> str:
    return re.sub(r"^\s*(?:[-*]|\d+\.)\s+(?:\[[ xX]\]\s+)?", "", line).strip()
