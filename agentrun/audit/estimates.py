"""Measured context estimates: how much of the model's window a worker for each group needs.

Other tools let the model guess "~15%". Here the tokens are counted (tiktoken, offline) over
exactly what a worker is given: the group's own text, the shared spec sections, PROJECT.md, and
the existing files the group names. Every part is counted on its own and listed, so a figure can
be checked by hand; the total is what one context executing the whole spec would hold.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrun.core.errors import BadInput
from agentrun.protocol import SHARED_SECTIONS  # what a worker's assignment carries
from agentrun.providers.tokens import context_window, estimate_tokens
from agentrun.spec.model import Spec, TaskGroup
from agentrun.spec.refs import looks_like_path

DEFAULT_GROUP_MAX = 0.30
DEFAULT_TOTAL_MAX = 0.50
MAX_EXACT_BYTES = 2_000_000  # larger files are estimated by size: counting them is slow
_CODE = re.compile(r"`([^`\r\n]+)`")


@dataclass(frozen=True)
class Thresholds:
    """Shares of the context window above which a spec needs decomposition."""

    group_max: float = DEFAULT_GROUP_MAX
    total_max: float = DEFAULT_TOTAL_MAX


def thresholds_from(config: Mapping[str, Any] | None, group_max: float | None = None,
                    total_max: float | None = None) -> Thresholds:
    """Flags over `.specflow/config.yaml` (`audit: {group_context_max, total_context_max}`)
    over the defaults; each must be a fraction in (0, 1]."""
    section = (config or {}).get("audit")
    section = {} if section is None else section
    if not isinstance(section, Mapping):
        raise BadInput(".specflow/config.yaml: `audit` must be a mapping",
                       "e.g. `audit: {group_context_max: 0.30, total_context_max: 0.50}`")
    values = {}
    for key, flag, default, name in (
            ("group_context_max", group_max, DEFAULT_GROUP_MAX, "--group-context-max"),
            ("total_context_max", total_max, DEFAULT_TOTAL_MAX, "--total-context-max")):
        value = flag if flag is not None else section.get(key, default)
        where = name if flag is not None else f".specflow/config.yaml audit.{key}"
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not 0 < value <= 1:
            raise BadInput(f"{where} must be a fraction of the context window between 0 and 1,"
                           f" got {value!r}", f"e.g. {default} for {default:.0%}")
        values[key] = float(value)
    return Thresholds(values["group_context_max"], values["total_context_max"])


@dataclass
class Part:
    label: str  # "group G1", "section Context", "acceptance criteria", "PROJECT.md", "file x"
    tokens: int


@dataclass
class UnitEstimate:
    """One worker's context (a group), or the whole spec in one context (`id` "total")."""

    id: str
    tokens: int
    share: float  # of the context window
    parts: list[Part] = field(default_factory=list)
    absent_files: list[str] = field(default_factory=list)  # named, not there yet (to create)
    over: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "tokens": self.tokens, "share": round(self.share, 4),
                "percent": percent(self.share), "over": self.over,
                "parts": [{"label": p.label, "tokens": p.tokens} for p in self.parts],
                "absent_files": self.absent_files}


@dataclass
class ContextEstimate:
    model: str
    window: int
    method: str  # "tiktoken:<encoding>" or "heuristic"
    thresholds: Thresholds
    groups: list[UnitEstimate]
    total: UnitEstimate
    source: str  # "spec": the spec's groups; "proposed": the auditor's; "none": no groups
    single_context: bool  # the spec would run in one context (no groups, or single mode)

    @property
    def problems(self) -> list[str]:
        """Why the measurement says the spec needs decomposition (empty: it fits)."""
        out = [f"{g.id} needs {approx(g.share)} of the {self.window:,}-token context window "
               f"({g.tokens:,} tokens; limit {self.thresholds.group_max:.0%}): split it into "
               "smaller groups" for g in self.groups if g.over]
        if self.total.over:
            out.append(f"executing the whole spec in one context needs "
                       f"{approx(self.total.share)} of the {self.window:,}-token window "
                       f"({self.total.tokens:,} tokens; limit {self.thresholds.total_max:.0%})"
                       ": add task groups that workers can run in separate contexts")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "window": self.window, "method": self.method,
                "source": self.source, "single_context": self.single_context,
                "thresholds": {"group_context_max": self.thresholds.group_max,
                               "total_context_max": self.thresholds.total_max},
                "groups": [g.to_dict() for g in self.groups], "total": self.total.to_dict(),
                "problems": self.problems}


def percent(share: float) -> str:
    if 0 < share < 0.005:
        return "<1%"
    return f"{share:.0%}"


def approx(share: float) -> str:
    """"~6%", or "<1%" (already approximate)."""
    text = percent(share)
    return text if text.startswith("<") else f"~{text}"


def group_text(group: TaskGroup) -> str:
    """A group as a worker reads it: id, title, dependencies, files, tasks."""
    lines = [f"{group.id}: {group.title}".rstrip(": ")]
    if group.dependencies:
        lines.append(f"Dependencies: {', '.join(group.dependencies)}")
    if group.files:
        lines.append(f"Files: {', '.join(group.files)}")
    lines += [f"- {task}" for task in group.tasks]
    return "\n".join(lines)


class Estimator:
    """Counts parts once each (shared sections and files recur across groups)."""

    def __init__(self, root: Path, model: str) -> None:
        self.root = Path(root).resolve()
        self.model = model
        self.methods: set[str] = set()
        self._files: dict[str, int | None] = {}

    def count(self, text: str) -> int:
        est = estimate_tokens(text, self.model)
        self.methods.add(est.method)
        return est.tokens

    def file_tokens(self, name: str) -> int | None:
        """Tokens of an existing file inside the project; None if it is not there (yet)."""
        if name not in self._files:
            self._files[name] = self._measure(name)
        return self._files[name]

    def _measure(self, name: str) -> int | None:
        path = (self.root / name).resolve()
        if path != self.root and self.root not in path.parents:
            return None  # outside the project: not something a worker may read
        if not path.is_file():
            return None
        try:
            size = path.stat().st_size
            if size > MAX_EXACT_BYTES:
                self.methods.add("heuristic")
                return -(-size // 4)  # ~4 bytes a token
            data = path.read_bytes()
        except OSError:
            return None
        if b"\0" in data:
            return None  # binary: a worker would not read it as text
        return self.count(data.decode("utf-8", errors="replace"))


def quoted_paths(spec: Spec) -> list[str]:
    """Paths the shared sections quote in backticks: what one executor of the whole spec
    would open even when the spec lists no "Files to Create/Modify"."""
    out = []
    for title in SHARED_SECTIONS:
        sec = spec.section(title)
        if sec is not None:
            out += [m.strip() for m in _CODE.findall(sec.body) if looks_like_path(m.strip())]
    return out


def shared_parts(spec: Spec, project_md: str, est: Estimator) -> list[Part]:
    """What every worker of the spec is given, whatever its group."""
    parts = []
    for title in SHARED_SECTIONS:
        sec = spec.section(title)
        if sec is not None and sec.body.strip():
            parts.append(Part(f"section {title}", est.count(sec.body.strip())))
    if spec.acceptance_criteria:
        text = "\n".join(f"- {c.text}" for c in spec.acceptance_criteria)
        parts.append(Part("acceptance criteria", est.count(text)))
    if project_md.strip():
        parts.append(Part("PROJECT.md", est.count(project_md)))
    return parts


def _unit(uid: str, parts: list[Part], files: Iterable[str], est: Estimator, window: int,
          limit: float) -> UnitEstimate:
    parts = list(parts)
    absent = []
    for name in dict.fromkeys(files):
        tokens = est.file_tokens(name)
        if tokens is None:
            absent.append(name)
        else:
            parts.append(Part(f"file {name}", tokens))
    tokens = sum(p.tokens for p in parts)
    share = tokens / window
    return UnitEstimate(uid, tokens, share, parts, absent, over=share > limit)


def estimate_context(spec: Spec, groups: list[TaskGroup], *, root: Path, project_md: str,
                     model: str, thresholds: Thresholds, source: str,
                     single_context: bool) -> ContextEstimate:
    """Measure each group's worker context and the whole spec in one context.

    `single_context` says whether the spec would execute in one context; only then can the
    total exceed its limit (with workers, each group has a fresh context of its own).
    """
    est = Estimator(root, model)
    window = context_window(model)
    shared = shared_parts(spec, project_md, est)
    units = [_unit(g.id, [Part(f"group {g.id}", est.count(group_text(g))), *shared], g.files,
                   est, window, thresholds.group_max) for g in groups]
    all_files = [*spec.files_to_create, *spec.files_to_modify,
                 *(f for g in groups for f in g.files), *quoted_paths(spec)]
    total_parts = [*(Part(f"group {g.id}", est.count(group_text(g))) for g in groups), *shared]
    total = _unit("total", total_parts, all_files, est, window, thresholds.total_max)
    total.over = total.over and single_context
    methods = est.methods or {estimate_tokens("", model).method}
    method = "+".join(sorted(methods))  # "tiktoken:o200k_base", or "+heuristic" for huge files
    return ContextEstimate(model=model, window=window, method=method, thresholds=thresholds,
                           groups=units, total=total, source=source,
                           single_context=single_context)
