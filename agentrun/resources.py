"""Where the packaged agents, commands, prompts and example project live.

In a wheel they are force-included under `agentrun/_bundled/`; in a source checkout (or an
editable install) they sit at the repository root. Project-local `.specflow/agents/` and
`.specflow/prompts/` override the packaged files of the same name.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
_KINDS = {"agents": "agents", "commands": "commands", "prompts": "prompts",
          "example": "specflow-example"}
_SOURCE_NAMES = {"agents": "agents", "commands": "commands", "prompts": "prompts",
                 "example": ".specflow-example"}


def packaged_dir(kind: str) -> Path:
    """The packaged directory for `kind` (agents, commands, prompts, example)."""
    bundled = _PACKAGE / "_bundled" / _KINDS[kind]
    if bundled.is_dir():
        return bundled
    source = _PACKAGE.parent / _SOURCE_NAMES[kind]
    if source.is_dir():
        return source
    raise FileNotFoundError(f"packaged {kind!r} directory not found under {_PACKAGE}")


def find_resource(kind: str, name: str, project_root: Path | None = None) -> Path | None:
    """Locate `name` (e.g. 'spec-executor.md'), preferring the project's `.specflow/<kind>/`."""
    if project_root is not None:
        local = Path(project_root) / ".specflow" / kind / name
        if local.is_file():
            return local
    candidate = packaged_dir(kind) / name
    return candidate if candidate.is_file() else None


def list_resources(kind: str, project_root: Path | None = None) -> dict[str, Path]:
    """All `*.md` files of `kind`, project-local ones overriding packaged ones by name."""
    found = {p.name: p for p in sorted(packaged_dir(kind).glob("*.md"))}
    if project_root is not None:
        local = Path(project_root) / ".specflow" / kind
        if local.is_dir():
            found.update({p.name: p for p in sorted(local.glob("*.md"))})
    return found
