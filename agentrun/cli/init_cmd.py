"""`agentrun init`: scaffold `.specflow/` without overwriting anything."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from agentrun.cli.common import JSON_OPT, output

if TYPE_CHECKING:
    from agentrun.cli.output import Output

PROJECT_MD = """# Project

## What this project is

Describe the project in a few sentences: its purpose, users and main parts.

## Conventions

- Language and version:
- Code style:
- Test command: {test_command}

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
{validation_line}
# max_parallel: 4
# token_budget: 100000
# worker_timeout_s: 1800
# on_failure: continue         # continue | abort
# retries: 3                   # fresh attempts after a failed one (per worker; --retries)
# request_retries: 6           # retries of one model request on 429, 529, 5xx
# command_env: [NODE_ENV]      # variables commands see besides PATH, LANG, TERM, TZ, ...
"""

NO_TEST_COMMAND = ("# validation_command: python -m pytest -q   # no test command found: set the "
                   "one that runs\n#   your tests; without it workers and merges are not "
                   "validated")


def node_copies(root: Path) -> list[str]:
    """The `node_modules` folders a JavaScript project's worktrees need copied in: the root's
    and those of its npm workspaces (their packages are linked from there, relative to the
    copy, so each worktree imports its own)."""
    if not (root / "package.json").is_file() or not (root / "node_modules").is_dir():
        return []
    try:
        data = json.loads((root / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    spaces = data.get("workspaces") if isinstance(data, dict) else None
    if isinstance(spaces, dict):
        spaces = spaces.get("packages")
    patterns = [w for w in spaces if isinstance(w, str)] if isinstance(spaces, list) else []
    nested = sorted({str(d.relative_to(root) / "node_modules") for w in patterns
                     if not Path(w).is_absolute() and ".." not in Path(w).parts
                     for d in root.glob(w) if (d / "node_modules").is_dir()})
    return ["node_modules", *nested]


def detect_test_command(root: Path) -> tuple[str, str] | None:
    """The project's test command and what it was found from, or None: pytest, npm test,
    cargo test, go test, then a Makefile's `test:` target."""
    def text(name: str) -> str:
        path = root / name
        try:
            return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
        except OSError:
            return ""

    for name, marker in (("pytest.ini", ""), ("pyproject.toml", "[tool.pytest"),
                         ("setup.cfg", "[tool:pytest]"), ("tox.ini", "[pytest]")):
        if (root / name).is_file() and marker in text(name):
            return "python -m pytest -q", name
    tests = root / "tests"
    if (tests.is_dir() and any(tests.rglob("test_*.py"))) or any(root.glob("test_*.py")):
        return "python -m pytest -q", "tests/" if tests.is_dir() else "test_*.py files"
    if _npm_test_script(text("package.json")):
        return "npm test", "package.json"
    if (root / "Cargo.toml").is_file():
        return "cargo test", "Cargo.toml"
    if (root / "go.mod").is_file():
        return "go test ./...", "go.mod"
    for name in ("GNUmakefile", "makefile", "Makefile"):
        if re.search(r"^test\s*:(?!=)", text(name), re.MULTILINE):
            return "make test", name
    return None


def _npm_test_script(package_json: str) -> bool:
    """A `test` script that is not npm's placeholder ("Error: no test specified")."""
    try:
        data = json.loads(package_json) if package_json else {}
    except ValueError:
        return False
    scripts = data.get("scripts") if isinstance(data, dict) else None
    test = scripts.get("test") if isinstance(scripts, dict) else None
    return isinstance(test, str) and bool(test.strip()) and "no test specified" not in test


def ignore_lines(root: Path, existing: str) -> tuple[list[str], list[str]]:
    """The lines `init` adds to `.gitignore` (`existing`): the run records' folder and the
    usual environment and cache folders that no line covers yet; and those left out because
    git tracks files in such a folder (ignoring it would hide a worker's new files there)."""
    from agentrun.run.own_files import GITIGNORE_ENTRIES, GITIGNORE_FOLDERS

    def name(line: str) -> str:
        return line.strip().removeprefix("**/").strip("/")

    covered = {name(line) for line in existing.splitlines()
               if line.strip() and not line.lstrip().startswith(("#", "!"))}
    missing = [e for e in GITIGNORE_ENTRIES if name(e) not in covered]
    tracked = _tracked_folders(root, [e for e in missing if e in GITIGNORE_FOLDERS])
    return [e for e in missing if e not in tracked], tracked


def _tracked_folders(root: Path, folders: list[str]) -> list[str]:
    """Those of `folders` (at any depth) in which git tracks a file; none outside a repo."""
    from agentrun.gitcli import run_git

    if not folders:
        return []
    specs = [f":(glob)**/{f}**" for f in folders]
    proc = run_git("ls-files", "-z", "--", *specs, cwd=root)
    if proc.returncode != 0:
        return []
    parts = {part for path in proc.stdout.split("\0") if path for part in path.split("/")[:-1]}
    return [f for f in folders if f.rstrip("/") in parts]


def import_lines(root: Path, command: str | None) -> dict[str, list[str]]:
    """What `init` says about imports: how workers' commands import their worktree's Python
    code (`notes`), and what the user must set where agentrun cannot arrange it (`advice`)."""
    import os

    from agentrun.layout import editable_paths, import_advice, python_source_roots, virtualenvs

    roots = [r for r in python_source_roots(root) if r != "."]
    notes = []
    if roots:
        shown = ", ".join(f"{r}/" for r in roots)
        editable = editable_paths(root, virtualenvs(root, os.environ))
        why = (" (the editable install points at this checkout's)" if editable else "")
        notes.append(f"imports: workers' commands put their own worktree's {shown} first on "
                     f"PYTHONPATH{why}")
    return {"notes": notes, "advice": import_advice(root, os.environ, command)}


def init(
    path: Path = typer.Argument(Path("."), help="Project directory (default: here)."),
    json_out: bool = JSON_OPT,
) -> None:
    """Create .specflow/ (PROJECT.md, STATE.md, specs/, config.yaml); add run records and the
    usual environment and cache folders (.venv, node_modules, __pycache__, ...) to .gitignore."""
    from agentrun.core.errors import BadInput

    out = output(json_out)
    root = path.resolve()
    if not root.is_dir():
        raise BadInput(f"not a directory: {path}", hint="create it first or pass another path")
    done = _scaffold(root)
    detected, copies = done["detected"], done["copies"]
    imports = import_lines(root, detected[0] if detected else None)
    rel = [str(p.relative_to(root)) for p in done["created"]]
    if out.mode == "json":
        out.json({"ok": True, "root": str(root), "created": rel,
                  "kept": [str(p.relative_to(root)) for p in done["kept"]],
                  "gitignore_added": done["added"], "gitignore_tracked": done["tracked"],
                  "validation_command": detected[0] if detected else None,
                  "worktree_copy": copies, "imports": imports})
        return
    _print_init(out, root, done, rel)
    for line in imports["notes"]:
        out.stdout.print(line, markup=False)
    for line in imports["advice"]:
        out.warn(line)
    out.stdout.print("Next: `agentrun new \"Title\"` to start a spec, then `agentrun audit "
                     "--static` and `agentrun plan`.", markup=False)


def _scaffold(root: Path) -> dict[str, Any]:
    """Write what is missing of .specflow/ and .gitignore; what was created, kept, added."""
    from agentrun.core.fsutil import atomic_write_text

    specflow = root / ".specflow"
    detected = detect_test_command(root)
    gitignore = root / ".gitignore"
    existing = gitignore.read_text(encoding="utf-8") if gitignore.exists() else ""
    added, tracked = ignore_lines(root, existing)
    copies = [] if "node_modules/" in tracked else node_copies(root)
    project_md = PROJECT_MD.format(test_command=f"`{detected[0]}`" if detected else
                                   "(none found; set `validation_command` in config.yaml)")
    config_yaml = CONFIG_YAML.format(validation_line=(
        f"validation_command: {detected[0]}   # found from {detected[1]}; must pass before "
        "work counts as done" if detected else NO_TEST_COMMAND) + (
        f"\nworktree_copy: [{', '.join(copies)}]   # every worktree gets its own copy (npm "
        "workspaces link their packages\n#   there), so its commands import its code"
        if copies else ""))
    created: list[Path] = []
    kept: list[Path] = []
    for name, text in (("PROJECT.md", project_md), ("STATE.md", STATE_MD),
                       ("config.yaml", config_yaml), ("specs", None)):
        target = specflow / name
        if target.exists():
            kept.append(target)
            continue
        if text is None:
            target.mkdir(parents=True)
        else:
            atomic_write_text(target, text)
        created.append(target)
    if added:
        sep = "" if not existing or existing.endswith("\n") else "\n"
        atomic_write_text(gitignore, existing + sep + "".join(f"{line}\n" for line in added))
        if not existing:
            created.append(gitignore)
    return {"detected": detected, "copies": copies, "created": created, "kept": kept,
            "added": added, "tracked": tracked, "gitignore": gitignore}


def _print_init(out: Output, root: Path, done: dict[str, Any], rel: list[str]) -> None:
    detected, copies, added, tracked = (done["detected"], done["copies"], done["added"],
                                        done["tracked"])
    for shown in rel:
        out.stdout.print(f"created {shown}", markup=False)
    for p in done["kept"]:
        out.stdout.print(f"kept    {p.relative_to(root)} (exists)", markup=False)
    if added and done["gitignore"] not in done["created"]:
        out.stdout.print(f"updated .gitignore: added {', '.join(added)} (your lines are "
                         "unchanged)", markup=False)
    if tracked:
        out.stdout.print(f"left out of .gitignore: {', '.join(tracked)} (git tracks files "
                         "there)", markup=False)
    if ".specflow/config.yaml" in rel:
        out.stdout.print(f"validation command: {detected[0]} (found from {detected[1]})"
                         if detected else "validation command: none found; runs will be "
                         "\"not validated\" until you set validation_command in "
                         ".specflow/config.yaml", markup=False)
        if copies:
            out.stdout.print(f"worktree copy: {', '.join(copies)} (each worktree gets its own, "
                             "so its commands import its code)", markup=False)
