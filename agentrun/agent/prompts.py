"""Prompt templates: jinja2 markdown files in `prompts/`, overridable per project.

Templates render with StrictUndefined, so a template that names a value we do not pass fails
loudly (as `BadInput` naming the template) instead of sending the model an empty hole. They
render in Jinja's sandbox: a project's template is text, and must never reach Python's internals
(`{{ ''.__class__.__mro__ }}` fails as `BadInput` instead of running).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, TypedDict

import jinja2
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment

from agentrun.core.errors import BadInput
from agentrun.resources import find_resource, list_resources

_ENV = SandboxedEnvironment(undefined=jinja2.StrictUndefined, keep_trailing_newline=False,
                            trim_blocks=True, lstrip_blocks=True, autoescape=False)


def template_path(name: str, project_root: Path | None = None) -> Path:
    """Where the template `name` (without `.md`) comes from: the project's or the packaged."""
    path = find_resource("prompts", f"{name}.md", project_root)
    if path is None:
        available = ", ".join(sorted(p.removesuffix(".md")
                                     for p in list_resources("prompts", project_root)))
        raise BadInput(f"prompt template {name!r} not found",
                       f"available templates: {available or '(none)'}; add "
                       f".specflow/prompts/{name}.md to define it")
    return path


@functools.lru_cache(maxsize=32)
def compile_template(source: str) -> jinja2.Template:
    """A template compiled once per process (the worker pool's server compiles the packaged
    ones before it starts any worker)."""
    return _ENV.from_string(source)


def render(name: str, values: dict[str, Any], project_root: Path | None = None) -> str:
    """Render `prompts/<name>.md` with `values`."""
    path = template_path(name, project_root)
    try:
        template = compile_template(path.read_text(encoding="utf-8"))
        return template.render(**values).strip() + "\n"
    except SecurityError as exc:
        raise BadInput(f"prompt template {path} tries an unsafe operation: {exc}",
                       "templates may only use the values they are given; remove the access "
                       "to Python attributes") from None
    except jinja2.UndefinedError as exc:
        raise BadInput(f"prompt template {path} uses an unknown value: {exc.message}",
                       f"available values: {', '.join(sorted(values))}") from None
    except jinja2.TemplateSyntaxError as exc:
        raise BadInput(f"prompt template {path} line {exc.lineno}: {exc.message}",
                       "fix the jinja2 syntax of the template") from None


def render_worker_assignment(assignment: dict[str, Any],
                             project_root: Path | None = None) -> str:
    """The task text a worker agent receives, from an assignment dict.

    Accepted keys (all optional except the groups): `spec_id`, `spec_title` (or a nested
    `spec: {id, title, path}`), `groups: [{id, title, tasks, dependencies, files, context,
    checks}]`,
    `context`, `requirements`, `acceptance_criteria` (list or text), `constraints`,
    `project_md`, `validation_command`, `branch`. Sections are either text or, for
    `sections: {context, requirements, ...}`, a nested mapping.
    """
    return render("worker_assignment", assignment_values(assignment), project_root)


class GroupValues(TypedDict):
    """One task group as the template sees it."""

    id: str
    title: str
    tasks: list[str]
    dependencies: list[str]
    files: list[str]
    context: str
    checks: list[str]


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def assignment_values(a: dict[str, Any]) -> dict[str, Any]:
    """Normalise an assignment dict into the values the template expects."""
    spec = _mapping(a.get("spec"))
    sections = _mapping(a.get("sections"))

    def section(key: str) -> str:
        value = a.get(key, sections.get(key))
        if isinstance(value, list | tuple):
            return "\n".join(f"- {item}" for item in value)
        return str(value or "").strip()

    criteria = a.get("acceptance_criteria", sections.get("acceptance_criteria")) or []
    if isinstance(criteria, str):
        criteria = [ln.strip().removeprefix("- [ ]").removeprefix("- [x]").strip(" -")
                    for ln in criteria.splitlines() if ln.strip()]
    criteria = [c.get("text", "") if isinstance(c, dict) else str(c) for c in criteria]
    groups: list[GroupValues] = []
    for g in a.get("groups") or []:
        g = g if isinstance(g, dict) else {"id": str(g)}
        groups.append({
            "id": str(g.get("id", "")),
            "title": str(g.get("title") or ""),
            "tasks": [str(t) for t in g.get("tasks") or []],
            "dependencies": [str(d) for d in g.get("dependencies") or []],
            "files": [str(f) for f in g.get("files") or []],
            "context": str(g.get("context") or "").strip(),
            "checks": [str(c) for c in g.get("checks") or []],
        })
    return {
        "spec_id": str(a.get("spec_id") or spec.get("id") or ""),
        "spec_title": str(a.get("spec_title") or spec.get("title") or ""),
        "groups": groups,
        "group_ids": ", ".join(g["id"] for g in groups),
        "context": section("context"),
        "requirements": section("requirements"),
        "acceptance_criteria": [c for c in criteria if c],
        "constraints": section("constraints"),
        "project_md": str(a.get("project_md") or "").strip(),
        "validation_command": str(a.get("validation_command") or ""),
        "branch": str(a.get("branch") or ""),
        "executor": str(a.get("executor") or "builtin"),
    }
