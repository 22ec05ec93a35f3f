"""Agent definitions: markdown files with YAML frontmatter (name, description, tools, model,
max_steps); the body is the system prompt. A project's `.specflow/agents/<name>.md` overrides
the packaged file of the same name.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agentrun.core.errors import BadInput
from agentrun.resources import find_resource, list_resources
from agentrun.tools.names import resolve_tool_names
from agentrun.yamlload import safe_load

_KEYS = {"name", "description", "tools", "model", "max_steps", "executor"}
EXECUTORS = ("builtin", "claude-code", "codex")  # who can run a worker's attempts


@dataclass
class AgentDefinition:
    name: str
    description: str
    tools: list[str]
    model: str | None
    max_steps: int | None
    system_prompt: str
    path: Path
    executor: str | None = None  # who runs it in a worker (an EXECUTORS name; flags win)


def available_agents(project_root: Path | None = None) -> list[str]:
    return sorted(name.removesuffix(".md") for name in list_resources("agents", project_root))


def load_agent(name: str, project_root: Path | None = None) -> AgentDefinition:
    """Load the agent `name`; an unknown name raises BadInput listing the available agents."""
    path = None
    if name and "/" not in name and "\\" not in name and not name.startswith("."):
        path = find_resource("agents", f"{name}.md", project_root)
    if path is None:
        raise BadInput(f"unknown agent {name!r}",
                       f"available agents: {', '.join(available_agents(project_root))}; "
                       f"or add .specflow/agents/{name}.md")
    return parse_agent(path, name)


def parse_agent(path: Path, expected_name: str | None = None) -> AgentDefinition:
    """Parse one definition file; every problem is a BadInput naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"cannot read agent definition {path}: {exc}",
                       "make it a readable UTF-8 markdown file") from None
    meta, body = _split_frontmatter(text, path)
    unknown = set(meta) - _KEYS
    if unknown:
        raise BadInput(f"agent definition {path}: unknown frontmatter key(s) "
                       f"{', '.join(sorted(map(str, unknown)))}",
                       f"allowed keys: {', '.join(sorted(_KEYS))}")
    name = str(meta.get("name") or path.stem)
    if expected_name is not None and name != expected_name:
        raise BadInput(f"agent definition {path} declares name {name!r} but is loaded as "
                       f"{expected_name!r}", f"set `name: {expected_name}` or rename the file")
    if not body.strip():
        raise BadInput(f"agent definition {path} has no system prompt",
                       "write the agent's instructions below the frontmatter")
    return AgentDefinition(
        name=name,
        description=str(meta.get("description") or "").strip(),
        tools=_tools(meta.get("tools"), path),
        model=str(meta["model"]) if meta.get("model") else None,
        max_steps=_max_steps(meta.get("max_steps"), path),
        system_prompt=body.strip() + "\n",
        path=path,
        executor=_executor(meta.get("executor"), path),
    )


def _executor(value: object, path: Path) -> str | None:
    if value is None:
        return None
    if isinstance(value, str) and value in EXECUTORS:
        return value
    raise BadInput(f"agent definition {path}: unknown executor {value!r}",
                   f"use one of {', '.join(EXECUTORS)}")


def _split_frontmatter(text: str, path: Path) -> tuple[dict[str, Any], str]:
    text = text.removeprefix("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise BadInput(f"agent definition {path} has no frontmatter",
                       "start the file with a `---` YAML block (name, description, tools)")
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        raise BadInput(f"agent definition {path}: frontmatter is not closed",
                       "end the YAML block with a `---` line")
    try:
        meta = safe_load("".join(lines[1:end])) or {}
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise BadInput(f"agent definition {path}: invalid YAML frontmatter ({detail})",
                       "fix the YAML syntax in the `---` block") from None
    if not isinstance(meta, dict):
        raise BadInput(f"agent definition {path}: frontmatter must be a mapping",
                       "write `key: value` lines in the `---` block")
    return meta, "".join(lines[end + 1:])


def _tools(value: Any, path: Path) -> list[str]:
    """Our tool names, in order; a missing `tools` key means every tool."""
    if value is not None and not isinstance(value, str) and not (
            isinstance(value, list) and all(isinstance(i, str) for i in value)):
        raise BadInput(f"agent definition {path}: `tools` must be a list of tool names",
                       "e.g. `tools: [read_file, write_file, run_command]`")
    try:
        return list(resolve_tool_names(value))
    except BadInput as exc:
        raise BadInput(f"agent definition {path}: {exc.message}", exc.hint) from None


def _max_steps(value: Any, path: Path) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadInput(f"agent definition {path}: `max_steps` must be a positive integer",
                       "e.g. `max_steps: 40`, or remove the key")
    return value
