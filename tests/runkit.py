"""Build projects for end-to-end runs: a real git repo, a spec, and a model script."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from gitutil import init_repo, run_git

STATE_MD = """# SpecFlow State

## Current Position

- **Active Specification:** {spec}
- **Status:** audited
- **Next Step:** agentrun run

## Execution Status

| Spec | Run | Mode | Progress | Updated |
|------|-----|------|----------|---------|

## Decisions

| Date | Specification | Decision |
|------|---------------|----------|
| 2026-01-01 | {spec} | keep this row |

## Warnings

| Date | Specification | Warning |
|------|---------------|---------|
"""


def spec_text(spec_id: str, groups: list[tuple[str, list[str], str]],
              status: str = "audited") -> str:
    """A spec whose groups are (id, dependencies, file each group creates)."""
    rows = "\n".join(f"| {gid} | Create `{path}` | {', '.join(deps) or '—'} |"
                     for gid, deps, path in groups)
    tasks = f"""
## Implementation Tasks

### Task Groups

| Group | Tasks | Dependencies |
|-------|-------|--------------|
{rows}
""" if groups else ""
    return f"""---
id: {spec_id}
type: feature
status: {status}
complexity: small
---
# {spec_id}: End-to-end fixture

## Context

A project used by the end-to-end tests.

## Task

Create the files the task groups name.

## Requirements

Each group creates its own file.

## Acceptance Criteria

- [ ] every file exists
- [ ] nothing else changes

## Constraints

- Do not touch other files.
{tasks}"""


def writes(path: str, content: str, *, status: str = "complete",
           criteria: list[str] | None = None, latency: float = 0.0) -> list[dict[str, Any]]:
    """Turns that write one file and submit the result."""
    first: dict[str, Any] = {"text": f"Creating {path}.",
                             "tool_calls": [{"name": "write_file",
                                             "arguments": {"path": path, "content": content}}],
                             "usage": {"input_tokens": 1000, "output_tokens": 100}}
    if latency:
        first["latency_s"] = latency
    return [first, submit(status, f"wrote {path}", criteria or ["every file exists"])]


def submit(status: str, summary: str, criteria: list[str] | None = None,
           error: str | None = None) -> dict[str, Any]:
    args: dict[str, Any] = {"status": status, "summary": summary,
                            "criteria_met": criteria or [], "deviations": []}
    if error:
        args["error"] = error
    return {"tool_calls": [{"name": "submit_result", "arguments": args}],
            "usage": {"input_tokens": 1200, "output_tokens": 50}}


def command(cmd: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "run_command", "arguments": {"command": cmd}}],
            "usage": {"input_tokens": 900, "output_tokens": 30}}


def make_project(root: Path, spec_id: str, spec: str, script: dict[str, Any],
                 files: dict[str, str] | None = None) -> Path:
    init_repo(root, {
        "README.md": "# fixture\n",
        ".gitignore": ".specflow/runs/\n",
        ".specflow/PROJECT.md": "# Project\n\nA fixture.\n",
        ".specflow/STATE.md": STATE_MD.format(spec=spec_id),
        f".specflow/specs/{spec_id}.md": spec,
        ".specflow/script.yaml": yaml.safe_dump(script, sort_keys=False),
        **(files or {}),
    })
    return root


def scripted(*extra: str, review: bool = False) -> list[str]:
    """`run` options for the project's script; runs are not reviewed unless `review` (a test
    about review scripts the reviewer's turns under `agents: {code-reviewer: [...]}`)."""
    return ["--provider", "scripted", "--script", ".specflow/script.yaml", "--yes",
            *([] if review else ["--no-review"]), "--json", *extra]


def log(root: Path, *args: str) -> str:
    return run_git(root, "log", *args)
