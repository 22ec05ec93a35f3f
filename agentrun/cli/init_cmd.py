"""`agentrun init`: scaffold `.specflow/` without overwriting anything."""

from __future__ import annotations

from pathlib import Path

import typer

from agentrun.cli.common import JSON_OPT, output

PROJECT_MD = """# Project

## What this project is

Describe the project in a few sentences: its purpose, users and main parts.

## Conventions

- Language and version:
- Code style:
- Test command: `python -m pytest -q`

## Patterns

List the patterns new code should follow (where modules live, error handling, naming).
"""

STATE_MD = """# SpecFlow State

## Current Position

- **Active Specification:** none
- **Status:** idle
- **Next Step:** write a spec in .specflow/specs/ and run `agentrun audit`

## Execution Status

| Spec | Run | Mode | Progress | Updated |
|------|-----|------|----------|---------|

## Queue

| # | ID | Title | Priority | Status | Depends On |
|---|----|-------|----------|--------|------------|

## Decisions

| Date | Specification | Decision |
|------|---------------|----------|

## Warnings

| Date | Specification | Warning |
|------|---------------|---------|
"""

CONFIG_YAML = """# agentrun settings. Flags win over environment variables, then this file.
# provider: anthropic          # anthropic | openai | scripted
# model: claude-sonnet-4-6
# Server URLs and API keys never go here: set OPENAI_BASE_URL / ANTHROPIC_API_KEY ... in the
# environment or in ~/.config/agentrun/config.yaml (outside the repository).
# validation_command: python -m pytest -q
# max_parallel: 4
# token_budget: 100000
# worker_timeout_s: 1800
# on_failure: continue         # continue | abort
# retries: 3                  # fresh attempts after a failed one (per worker)
# max_retries: 2               # model SDK retries on 429/5xx
# command_env: [NODE_ENV]      # variables commands see besides PATH, LANG, TERM, TZ, ...
"""

def init(
    path: Path = typer.Argument(Path("."), help="Project directory (default: here)."),
    json_out: bool = JSON_OPT,
) -> None:
    """Create .specflow/ (PROJECT.md, STATE.md, specs/, config.yaml) and ignore run records."""
    from agentrun.errors import BadInput
    from agentrun.fsutil import atomic_write_text
    from agentrun.run.own_files import GITIGNORE_ENTRY

    out = output(json_out)
    root = path.resolve()
    if not root.is_dir():
        raise BadInput(f"not a directory: {path}", hint="create it first or pass another path")
    specflow = root / ".specflow"
    created, kept = [], []
    for rel, text in (("PROJECT.md", PROJECT_MD), ("STATE.md", STATE_MD),
                      ("config.yaml", CONFIG_YAML)):
        target = specflow / rel
        if target.exists():
            kept.append(target)
        else:
            atomic_write_text(target, text)
            created.append(target)
    for sub in ("specs",):
        target = specflow / sub
        if target.exists():
            kept.append(target)
        else:
            target.mkdir(parents=True)
            created.append(target)
    gitignore = root / ".gitignore"
    existing = gitignore.read_text(encoding="utf-8") if gitignore.exists() else ""
    if GITIGNORE_ENTRY not in existing.splitlines():
        sep = "" if not existing or existing.endswith("\n") else "\n"
        atomic_write_text(gitignore, f"{existing}{sep}{GITIGNORE_ENTRY}\n")
        if not existing:
            created.append(gitignore)
    rel = [str(p.relative_to(root)) for p in created]
    if out.mode == "json":
        out.json({"ok": True, "root": str(root), "created": rel,
                  "kept": [str(p.relative_to(root)) for p in kept]})
        return
    for p in rel:
        out.stdout.print(f"created {p}")
    for p in kept:
        out.stdout.print(f"kept    {p.relative_to(root)} (exists)")
    out.stdout.print("Next: write a spec in .specflow/specs/, then `agentrun audit --static` and "
                     "`agentrun plan`.")
