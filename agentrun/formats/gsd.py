"""GSD ("get-shit-done") plans: `.planning/phases/NN-name/NN-MM-PLAN.md`, one file or a whole
phase folder (its `*-PLAN.md` files together).

A plan is YAML frontmatter (`phase`, `plan`, `wave`, `depends_on`, `files_modified`,
`must_haves`, ...) and XML-ish blocks: `<objective>`, `<tasks>` of `<task type="auto">` with
`<name>`, `<files>`, `<action>`, `<verify>`, `<acceptance_criteria>`, `<done>`, then
`<verification>` and `<success_criteria>` (get-shit-done/templates/phase-prompt.md). GSD runs a
phase wave by wave (the `wave` numbers are computed when planning), one executor per plan, the
plan's tasks in order. So each plan is one group `G<plan>`: its tasks are the group's tasks, it
waits for every plan of the wave before its own and for its `depends_on`, and it modifies its
`files_modified`. `<verify>` and `<verification>` are its checks; `must_haves`,
`<acceptance_criteria>`, `<done>` and `<success_criteria>` the run's criteria. A plan whose
`NN-MM-SUMMARY.md` exists is done (GSD writes it when a plan finishes).
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import yaml

from agentrun.core.errors import SpecError
from agentrun.formats.model import Imported, Unit, bad_plan
from agentrun.formats.order import check_graph
from agentrun.spec import frontmatter
from agentrun.yamlload import safe_load

NAME = "gsd"
PLAN_FILE = re.compile(r"^(\d+(?:\.\d+)*)-(\d+)-PLAN\.md$", re.I)
_BLOCK = r"<{tag}\b[^>]*>(.*?)</{tag}>"
_TASK = re.compile(r"<task\b([^>]*)>(.*?)</task>", re.S)
_ATTR = re.compile(r'(\w[\w-]*)\s*=\s*"([^"]*)"')
_AUTOMATED = re.compile(r"</?automated>")
_HUMAN_STOPS = ("checkpoint:decision", "checkpoint:human-action")


def detect(text: str) -> bool:
    """Frontmatter naming a `phase` and a `plan`, and `<task` blocks."""
    head = text.lstrip("\ufeff")[:4000]
    return head.startswith("---") and re.search(r"(?m)^phase\s*:", head) is not None \
        and re.search(r"(?m)^plan\s*:", head) is not None and "<task" in text


def plan_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and PLAN_FILE.match(p.name))


class _Plan:
    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.text = text
        shown = str(path)
        block = frontmatter.locate_dashed(text, shown)
        if block is None or block.style != "leading":
            raise bad_plan(path, 1, "a GSD plan starts with YAML frontmatter (phase, plan, wave, "
                           "depends_on, ...)", "add the frontmatter the GSD template has")
        try:
            meta = safe_load(block.yaml_text)
        except yaml.YAMLError as exc:
            raise bad_plan(path, block.open_line + 1, f"invalid YAML frontmatter: {exc}",
                           "fix the YAML between the `---` lines") from None
        self.meta: dict[str, Any] = meta if isinstance(meta, dict) else {}
        m = PLAN_FILE.match(path.name)
        phase_no = m.group(1) if m else str(self.meta.get("phase", "")).split("-")[0]
        plan_no = m.group(2) if m else str(self.meta.get("plan", ""))
        if not phase_no or not plan_no.isdigit():
            raise bad_plan(path, 1, "cannot tell the plan's phase and number",
                           "name the file NN-MM-PLAN.md, or set `phase:` and `plan:`")
        declared = str(self.meta.get("phase", "")).split("-")[0]
        if m and declared and _number(declared) != _number(phase_no):
            raise bad_plan(path, _key_line(text, "phase"), f"plan {path.name} says it belongs "
                           f"to phase {self.meta.get('phase')}: it fits no phase of its file name",
                           "make `phase:` and the file name agree")
        self.phase_no = phase_no
        self.number = int(plan_no)
        self.id = f"{phase_no}-{plan_no.zfill(2)}"
        wave = self.meta.get("wave")
        self.wave = wave if isinstance(wave, int) and not isinstance(wave, bool) else None
        self.line = 1


def read_paths(origin: Path, spec_id: str) -> Imported:
    """A PLAN.md file, or a phase folder's plans."""
    paths = plan_files(origin) if origin.is_dir() else [origin]
    if not paths:
        raise SpecError(f"{origin}: no GSD plans (NN-MM-PLAN.md) in this folder",
                        "pass a phase folder of .planning/phases/, or one PLAN.md",
                        path=str(origin))
    plans = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SpecError(f"cannot read {path}: {exc}", "check the file", path=str(path)) \
                from None
        plans.append(_Plan(path, text))
    return _build(origin, plans, spec_id)


def read(path: Path, text: str, spec_id: str) -> Imported:
    return _build(path, [_Plan(path, text)], spec_id)


def _build(origin: Path, plans: list[_Plan], spec_id: str) -> Imported:
    by_id: dict[str, _Plan] = {}
    for plan in plans:
        if plan.id in by_id:
            raise bad_plan(plan.path, 1, f"plan {plan.id} is defined twice ({by_id[plan.id].path} "
                           f"and {plan.path})", "keep one PLAN.md per plan number")
        by_id[plan.id] = plan
    units: list[Unit] = []
    criteria: list[str] = []
    requirements: list[str] = []
    for plan in plans:
        unit, crit = _unit(plan)
        units.append(unit)
        criteria.extend(crit)
        requirements.extend(str(r) for r in _list(plan.meta.get("requirements"))
                            if str(r) not in requirements)
    gid = {p.id: f"G{p.number}" for p in plans}
    waves = sorted({p.wave for p in plans if p.wave is not None})
    for plan, unit in zip(plans, units, strict=True):
        deps: list[str] = []
        if plan.wave is not None:
            lower = [w for w in waves if w < plan.wave]
            if lower:
                deps.extend(gid[p.id] for p in plans if p.wave == lower[-1])
        for ref in _list(plan.meta.get("depends_on")):
            target = _plan_ref(ref, plan.phase_no)
            if target in by_id:
                other = by_id[target]
                if plan.wave is not None and other.wave is not None and other.wave >= plan.wave:
                    raise bad_plan(plan.path, _key_line(plan.text, "depends_on"),
                                   f"plan {plan.id} (wave {plan.wave}) depends on {target}, "
                                   f"which is in wave {other.wave}: the waves contradict "
                                   "depends_on", "put the plan in a later wave than the plans "
                                   "it depends on")
                if gid[target] not in deps:
                    deps.append(gid[target])
            elif not _done_elsewhere(plan.path, target):
                known = _exists_elsewhere(plan.path, target)
                raise bad_plan(plan.path, _key_line(plan.text, "depends_on"),
                               f"plan {plan.id} depends on {target}, which "
                               + ("is not part of this run and not done (it has no "
                                  f"{target}-SUMMARY.md)" if known else
                                  "is not a plan of this phase"),
                               "run its phase folder first, or together with this plan"
                               if known else "name a plan that exists in depends_on")
        unit.deps = deps
    check_graph(units, {u.gid: u.source_ids[0] for u in units})
    phase = str(plans[0].meta.get("phase") or plans[0].phase_no)
    title = f"Phase {phase}" if origin.is_dir() or len(plans) > 1 else \
        f"Plan {plans[0].id}: {units[0].title.split(': ', 1)[-1]}"
    imported = Imported(format=NAME, spec_id=spec_id, title=title, origin=origin,
                        files=[p.path for p in plans], units=units,
                        context=f"GSD phase {phase}; plans run wave by wave, as GSD's "
                                "execute-phase runs them.",
                        requirements="\n".join(f"- {r}" for r in requirements),
                        criteria=criteria)
    roadmap = roadmap_path(plans[0].path)
    if roadmap is not None:
        imported.files.append(roadmap)
        ticked = roadmap_ticked(roadmap.read_text(encoding="utf-8"))
        for plan, unit in zip(plans, units, strict=True):
            if plan.id in ticked and not unit.done:
                unit.done, unit.status = True, f"ticked in {roadmap.name}"
    return imported


def _unit(plan: _Plan) -> tuple[Unit, list[str]]:
    text = plan.text
    objective = _block(text, "objective")
    tasks_block = _block(text, "tasks") or text
    tasks: list[str] = []
    checks: list[str] = []
    criteria: list[str] = []
    files = [str(f).strip() for f in _list(plan.meta.get("files_modified")) if str(f).strip()]
    source_ids = [plan.id]
    offset = text.find(tasks_block) if tasks_block is not text else 0
    for n, m in enumerate(_TASK.finditer(tasks_block), start=1):
        attrs = dict(_ATTR.findall(m.group(1)))
        kind = attrs.get("type", "auto")
        body = m.group(2)
        line = text.count("\n", 0, offset + m.start()) + 1
        name = _block(body, "name") or f"Task {n}"
        if kind in _HUMAN_STOPS:
            raise bad_plan(plan.path, line, f"plan {plan.id} task {n} is a {kind}: it stops for "
                           "a person in the middle of the plan, which a run cannot do",
                           "decide it (or do the manual step) first and write the outcome into "
                           "the plan, or remove the checkpoint")
        if kind.startswith("checkpoint:"):  # human-verify: a person checks it after the run
            what = " ".join(_block(body, "what-built").split())
            how = " ".join(_block(body, "how-to-verify").split())
            criteria.append(f"{plan.id}: (a person checks) {what}: {how}".strip())
            source_ids.append(f"{plan.id}#{n}")
            continue
        parts = [name]
        task_files = _block(body, "files")
        if task_files:
            parts.append(f"Files: {' '.join(task_files.split())}")
            files.extend(f for f in (_file(x) for x in re.split(r"[,\n]", task_files)) if f)
        read_first = _block(body, "read_first")
        if read_first:
            parts.append(f"Read first:\n{_dedent(read_first)}")
        action = _block(body, "action")
        if action:
            parts.append(_dedent(action))
        done_when = _block(body, "done")
        if done_when:
            parts.append(f"Done when: {_dedent(done_when)}")
            criteria.append(f"{plan.id} {name}: {' '.join(done_when.split())}")
        tasks.append("\n".join(parts))
        verify = _block(body, "verify")
        if verify:
            checks.append(f"{name}: {html.unescape(_dedent(_AUTOMATED.sub('', verify)))}")
        for raw in _block(body, "acceptance_criteria").splitlines():
            item = raw.strip().lstrip("-*").strip()
            if item:
                criteria.append(f"{plan.id} {name}: {item}")
        source_ids.append(f"{plan.id}#{n}")
    if not tasks:
        raise bad_plan(plan.path, 1, f"plan {plan.id} has no <task> blocks a run can do",
                       "write its tasks in <tasks> as the GSD template does")
    for raw in _block(text, "verification").splitlines():
        item = re.sub(r"^\s*(?:[-*]|\d+\.)\s*(?:\[[ xX]\]\s*)?", "", raw).strip()
        if item and not item.lower().startswith("before declaring"):
            checks.append(item)
    criteria.extend(_must_haves(plan))
    for raw in _block(text, "success_criteria").splitlines():
        item = raw.strip().lstrip("-*").strip()
        if item and item.lower() != "all tasks completed":
            criteria.append(f"{plan.id}: {item}")
    done = plan.path.with_name(f"{plan.id}-SUMMARY.md").is_file()
    context = [f"Plan {plan.id} ({plan.path.name})"]
    if objective:
        context.append(_dedent(objective))
    reqs = _list(plan.meta.get("requirements"))
    if reqs:
        context.append("Requirements: " + ", ".join(str(r) for r in reqs))
    title = objective.strip().splitlines()[0].strip() if objective.strip() else tasks[0]
    unit = Unit(gid=f"G{plan.number}", source_ids=source_ids, title=f"{plan.id}: {_short(title)}",
                tasks=tasks, path=plan.path, line=1, files=_unique(files),
                context="\n\n".join(context), checks=checks, done=done, wave=plan.wave,
                status=f"{plan.id}-SUMMARY.md exists" if done else "")
    return unit, criteria


def _must_haves(plan: _Plan) -> list[str]:
    must = plan.meta.get("must_haves")
    if not isinstance(must, dict):
        return []
    out = [f"{plan.id}: {t}" for t in _list(must.get("truths")) if isinstance(t, str)]
    for art in _list(must.get("artifacts")):
        if isinstance(art, dict) and art.get("path"):
            line = f"{plan.id}: `{art['path']}` exists"
            if art.get("provides"):
                line += f" and provides {art['provides']}"
            if art.get("contains"):
                line += f" (contains `{art['contains']}`)"
            out.append(line)
    for link in _list(must.get("key_links")):
        if isinstance(link, dict) and link.get("from"):
            out.append(f"{plan.id}: {link['from']} connects to {link.get('to', '?')}"
                       + (f" via {link['via']}" if link.get("via") else ""))
    return out


def roadmap_path(plan_path: Path) -> Path | None:
    """`.planning/ROADMAP.md` for a plan under `.planning/phases/...`."""
    for parent in plan_path.resolve().parents:
        if parent.name == "phases" and (parent.parent / "ROADMAP.md").is_file():
            return parent.parent / "ROADMAP.md"
    return None


ROADMAP_LINE = r"^\s*[-*]\s+\[([ xX])\]\s+\**{id}(?:-PLAN\.md)?\b"


def roadmap_ticked(text: str) -> set[str]:
    """Plan ids whose ROADMAP.md checkbox (`- [x] 01-02: ...`) is ticked."""
    return set(re.findall(r"(?m)^\s*[-*]\s+\[[xX]\]\s+\**(\d+(?:\.\d+)*-\d+)\b", text))


def _block(text: str, tag: str) -> str:
    m = re.search(_BLOCK.format(tag=re.escape(tag)), text, re.S)
    return m.group(1) if m else ""


def _dedent(text: str) -> str:
    lines = text.strip("\n").splitlines()
    indents = [len(x) - len(x.lstrip()) for x in lines if x.strip()]
    cut = min(indents) if indents else 0
    return "\n".join(x[cut:].rstrip() for x in lines).strip()


def _file(text: str) -> str:
    text = re.sub(r"\s*\(.*$", "", text.strip().lstrip("-*").strip()).strip().strip("`")
    return text if text and " " not in text else ""


def _list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _plan_ref(ref: Any, phase_no: str) -> str:
    text = str(ref).strip().removesuffix(".md").removesuffix("-PLAN")
    if isinstance(ref, int) or re.fullmatch(r"\d+", text):
        return f"{phase_no}-{int(text):02d}"
    return text


def _phases_dir(plan_path: Path) -> Path | None:
    for parent in plan_path.resolve().parents:
        if parent.name == "phases":
            return parent
    return None


def _done_elsewhere(plan_path: Path, plan_id: str) -> bool:
    folder = _phases_dir(plan_path) or plan_path.resolve().parent
    return any(folder.rglob(f"{plan_id}-SUMMARY.md"))


def _exists_elsewhere(plan_path: Path, plan_id: str) -> bool:
    folder = _phases_dir(plan_path) or plan_path.resolve().parent
    return any(folder.rglob(f"{plan_id}-PLAN.md"))


def _number(text: str) -> tuple[int, ...] | str:
    try:
        return tuple(int(x) for x in text.split("."))
    except ValueError:
        return text


def _key_line(text: str, key: str) -> int:
    m = re.search(rf"(?m)^{re.escape(key)}\s*:", text)
    return text.count("\n", 0, m.start()) + 1 if m else 1


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 80 else text[:79] + "…"


def _unique(items: list[str]) -> list[str]:
    out: list[str] = []
    for item in items:
        if item not in out:
            out.append(item)
    return out
