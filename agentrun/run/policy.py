"""Which paths a worker's branch may change before it is merged.

A worker is untrusted (its model may follow an injection in any file it reads), and what it
commits is merged into the user's branch, where agentrun and the user's tools read it next.
So a branch that changes one of these paths fails its groups instead of merging:

- **orchestrator-owned** files — the run record (`.specflow/runs/`), the execution state
  (`.specflow/execution/`), `.specflow/STATE.md` and the spec being run. agentrun writes them
  itself during the run; a worker's copy is never legitimate, whatever the spec says.
- **control files** — `.specflow/config.yaml` and the project's agent, prompt and command
  overrides (`.specflow/agents/`, `.specflow/prompts/`, `.specflow/commands/`): the next run
  reads them as its own configuration and templates.
- **files that make tools run code** — git hook directories (`.githooks/`, `.husky/`,
  `.lefthook/` and the repository's `core.hooksPath` target), `lefthook.yml`,
  `.pre-commit-config.yaml`, CI definitions (`.github/workflows/`, `.github/actions/`,
  `.gitlab-ci.yml`) and `.gitmodules` (submodule URLs and update commands).

A control or code-running path the spec names under Files to Create/Modify is the work
itself: it merges, and is flagged (a deviation and a `protected_change` event) so the summary
and the reviewer see it. `.gitattributes` is not on the list: it only names filter and merge
drivers, whose commands live in git config, which is not part of any branch.

Paths compare case-insensitively, so `.Husky/pre-commit` is caught on a file system that
would check it out as `.husky/pre-commit`; a `.git` component in any case is always refused.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from agentrun import workspace
from agentrun.project import Project
from agentrun.spec.model import Spec

OWNED, CONTROL, RUNS_CODE = "orchestrator-owned file", "agentrun control file", \
    "file that makes tools run code"

_CONTROL_DIRS = (".specflow/agents/", ".specflow/prompts/", ".specflow/commands/")
_CONTROL_FILES = (".specflow/config.yaml", ".specflow/config.yml")
_CODE_DIRS = (".githooks/", ".husky/", ".lefthook/", ".github/workflows/", ".github/actions/")
_CODE_FILES = ("lefthook.yml", "lefthook.yaml", ".lefthook.yml", ".lefthook.yaml",
               "lefthook-local.yml", ".pre-commit-config.yaml", ".gitlab-ci.yml",
               ".gitmodules")


def _key(path: str) -> str:
    """A repository path in the form rules compare: `/`-separated, no `./`, case-folded."""
    return posixpath.normpath(path.replace("\\", "/").strip()).lstrip("/").casefold()


@dataclass(frozen=True)
class Finding:
    """A changed path a rule covers: `allowed` when the spec names it as work to do."""

    path: str
    kind: str
    allowed: bool

    def reason(self) -> str:
        if self.allowed:
            return (f"changed {self.path} ({self.kind}), which the spec names under Files to "
                    "Create/Modify: merged, review it")
        unless = "" if self.kind == OWNED else \
            " unless the spec names it under Files to Create/Modify"
        return f"changed {self.path} ({self.kind}): a worker may not change it{unless}"


class MergePolicy:
    """The path rules of one repository and one spec (see the module doc)."""

    def __init__(self, *, spec_path: str, control_root: str = "", hooks_dir: str | None = None,
                 named: Iterable[str] = ()) -> None:
        prefix = _key(control_root) + "/" if control_root not in ("", ".") else ""
        self.owned_dirs = tuple(prefix + d for d in (".specflow/runs/", ".specflow/execution/"))
        self.owned_files = (prefix + ".specflow/state.md", _key(spec_path))
        self.control_dirs = tuple(prefix + d for d in _CONTROL_DIRS)
        self.control_files = tuple(prefix + f for f in _CONTROL_FILES)
        self.code_dirs = _CODE_DIRS + ((_key(hooks_dir) + "/",) if hooks_dir else ())
        self.named = {_key(p) for p in named}

    @classmethod
    def for_run(cls, root: Path, project: Project, spec: Spec) -> MergePolicy:
        """The rules for merging work on `spec` into the repository at `root`."""
        root_real = root.resolve()
        return cls(spec_path=_inside(root_real, spec.path) or spec.path.name,
                   control_root=_inside(root_real, project.root) or "",
                   hooks_dir=_hooks_dir(root_real),
                   named=[*spec.files_to_create, *spec.files_to_modify])

    def kind(self, path: str) -> str | None:
        """Which rule covers `path` (a repository path), or None when it is ordinary work."""
        key = _key(path)
        if ".git" in key.split("/"):
            return OWNED
        if key in self.owned_files or key.startswith(self.owned_dirs):
            return OWNED
        if key in self.control_files or key.startswith(self.control_dirs):
            return CONTROL
        name_at_root = "/" not in key
        if key.startswith(self.code_dirs) or (name_at_root and key in _CODE_FILES):
            return RUNS_CODE
        return None

    def check(self, paths: Iterable[str]) -> list[Finding]:
        """The changed paths that a rule covers, in the order given."""
        found = []
        for path in paths:
            kind = self.kind(path)
            if kind is not None:
                found.append(Finding(path, kind, kind != OWNED and _key(path) in self.named))
        return found


def _inside(root: Path, path: Path) -> str | None:
    """`path` relative to `root` (`/`-separated), or None when it lies outside."""
    try:
        return Path(path).resolve().relative_to(root).as_posix()
    except ValueError:
        return None


def _hooks_dir(root: Path) -> str | None:
    """The repository's own `core.hooksPath` (the last one its config files set, ignoring
    the override agentrun's git calls pass) as a path inside it, if it points inside."""
    proc = workspace.run_git("config", "--show-scope", "--get-all", "core.hooksPath", cwd=root)
    values = [line.split("\t", 1)[1] for line in proc.stdout.splitlines()
              if "\t" in line and not line.startswith("command\t")]
    value = values[-1].strip() if values else ""
    if not value or value.startswith("~"):
        return None
    target = _inside(root, root / value)
    return None if target in (None, ".") else target
