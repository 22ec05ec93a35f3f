"""Before a run: commit the files agentrun itself put in the tree, so the base commit the
workers start from holds what they are told about.

`init` scaffolds `.specflow/` and adds `.specflow/runs/` (and the usual environment and cache
folders) to `.gitignore`; a user then writes
the spec. Without this, the first run either refused (the scaffolding was uncommitted) or
folded the user's spec edit into the report commit after workers had run without it. Only
these files are committed, in a commit of their own; any other change still stops the run.
"""

from __future__ import annotations

from pathlib import Path

from agentrun import gitcli, workspace
from agentrun.config import CONFIG_FILE
from agentrun.core.fsutil import read_capped, relpath
from agentrun.project import Project
from agentrun.spec.model import Spec

GITIGNORE_ENTRY = ".specflow/runs/"  # the run records' line `init` adds to .gitignore
# the environment and cache folders `init` adds too: a `.venv` inside the project is thousands
# of untracked files that would make every run's tree dirty
GITIGNORE_FOLDERS = (".venv/", "venv/", "node_modules/", "__pycache__/", ".pytest_cache/",
                     ".mypy_cache/", "dist/", "build/")
GITIGNORE_ENTRIES = (GITIGNORE_ENTRY, *GITIGNORE_FOLDERS)
# never part of the commit: the run's own records
_RECORDS = (".specflow/runs/", ".specflow/execution/")
_MAX_GITIGNORE = 1024 * 1024


def own_changes(root: Path, project: Project, spec: Spec) -> list[str]:
    """Uncommitted paths that are agentrun's to commit: the spec about to run, STATE.md,
    PROJECT.md and config.yaml, and `.gitignore` when `init`'s entries are its only change."""
    scaffolding = {relpath(p, root) for p in (project.project_md, project.state_md,
                                              project.root / CONFIG_FILE, spec.path)}
    if spec.source is not None:  # a plan in another format: its files are the spec too
        scaffolding |= {relpath(project.root / f, root) for f in spec.source.files}
    gitignore = relpath(project.root / ".gitignore", root)
    ours = []
    for path in workspace.dirty_paths(root, ignore=_RECORDS):
        if path in scaffolding or (path == gitignore and _only_our_entry(root, path)):
            ours.append(path)
    return ours


def _only_our_entry(root: Path, rel: str) -> bool:
    """Whether the file differs from HEAD's only by our entry (either side far larger than
    a .gitignore is not read: it is not)."""
    try:
        now = read_capped(root / rel, _MAX_GITIGNORE).decode("utf-8")
    except (OSError, ValueError):
        return False
    size = gitcli.git("cat-file", "-s", f"HEAD:{rel}", cwd=root, check=False)
    if size.isdigit() and int(size) > _MAX_GITIGNORE:
        return False
    before = gitcli.git("show", f"HEAD:{rel}", cwd=root, check=False) if size else ""
    return _without_entry(now) == _without_entry(before)


def _without_entry(text: str) -> list[str]:
    return [line for line in text.splitlines()
            if line.strip() and line not in GITIGNORE_ENTRIES]


def commit_message(spec: Spec, root: Path, paths: list[str]) -> str:
    """'agentrun: commit SPEC-001 and scaffolding before run', then every path, one a line."""
    spec_rel = relpath(spec.path, root)
    plan = spec.source.files if spec.source is not None else []  # relative to the project

    def of_spec(path: str) -> bool:
        return path == spec_rel or any(path == f or path.endswith("/" + f) for f in plan)

    what = [spec.id] if any(of_spec(p) for p in paths) else []
    if not all(of_spec(p) for p in paths):
        what.append("scaffolding")
    return f"agentrun: commit {' and '.join(what)} before run\n\n" + "\n".join(paths) + "\n"


def commit_own_changes(root: Path, spec: Spec, paths: list[str]) -> str | None:
    """Commit exactly `paths` (nothing else that is staged); the new commit, or None."""
    if not paths:
        return None
    gitcli.git("add", "--", *paths, cwd=root)
    gitcli.git("commit", "-q", "--no-verify", "-m", commit_message(spec, root, paths),
               "--", *paths, cwd=root, env=workspace.ensure_identity(root) or None)
    return workspace.head_commit(root)
