"""Which changes a worker's branch may make before it is merged.

A worker is untrusted (its model may follow an injection in any file it reads), and what it
commits is merged into the user's branch, where agentrun and the user's tools read it next.
The branch is judged from its git trees (paths, modes, symlink targets), never from a working
tree. Two rules:

- **path_denied**, always refused: any path under a `.specflow` folder, at any depth (specs,
  run records, execution state, STATE.md, config, agent/prompt/command overrides: agentrun
  writes those itself), the spec being run wherever it lives (for a plan from another tool,
  every file it was read from and the file its progress is marked in), a `.git` component, a
  gitlink
  (a nested repository or submodule: git would run commands configured inside it), and a
  symlink whose target leaves the repository, is the repository's root, or lies in a `.git`
  or `.specflow` folder.
- **files that make tools run code** — git hook directories (`.githooks/`, `.husky/`,
  `.lefthook/` and the repository's `core.hooksPath` target), `lefthook.yml`,
  `.pre-commit-config.yaml`, CI definitions (`.github/workflows/`, `.github/actions/`,
  `.gitlab-ci.yml`) and `.gitmodules` (submodule URLs and update commands). One the spec names
  under Files to Create/Modify is the work itself: it merges, and is flagged (a deviation and a
  `protected_change` event) so the summary and the reviewer see it.

`.gitattributes` is not on the list: it only names filter and merge drivers, whose commands
live in git config, which is not part of any branch (and agentrun's git neutralises them).
Paths compare case-insensitively, so `.Husky/pre-commit` is caught on a file system that
would check it out as `.husky/pre-commit`, and `.SpecFlow/x` like `.specflow/x`.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from agentrun import gitcli
from agentrun.project import Project
from agentrun.spec.model import Spec
from agentrun.workspace import TreeChange

PATH_DENIED, RUNS_CODE = "path_denied", "file that makes tools run code"
GITLINK, SYMLINK = "160000", "120000"

_OWN_FOLDERS = (".git", ".specflow")
_CODE_DIRS = (".githooks/", ".husky/", ".lefthook/", ".github/workflows/", ".github/actions/")
_CODE_FILES = ("lefthook.yml", "lefthook.yaml", ".lefthook.yml", ".lefthook.yaml",
               "lefthook-local.yml", ".pre-commit-config.yaml", ".gitlab-ci.yml",
               ".gitmodules")
_MAX_LINK_HOPS = 40  # as the kernel's limit on symlinks followed in one lookup


def _key(path: str) -> str:
    """A repository path in the form rules compare: `/`-separated, no `./`, case-folded."""
    return posixpath.normpath(path.replace("\\", "/").strip()).lstrip("/").casefold()


@dataclass(frozen=True)
class PolicyFinding:
    """A change a rule covers: `allowed` when the spec names it as work to do."""

    path: str
    kind: str
    allowed: bool
    detail: str = ""  # why a path_denied path is denied

    def reason(self) -> str:
        if self.kind == PATH_DENIED:
            return f"path_denied: {self.path} ({self.detail}): a worker may not write it"
        if self.allowed:
            return (f"changed {self.path} ({self.kind}), which the spec names under Files to "
                    "Create/Modify: merged, review it")
        return (f"changed {self.path} ({self.kind}): a worker may not change it unless the "
                "spec names it under Files to Create/Modify")


class MergePolicy:
    """The change rules of one repository and one spec (see the module doc)."""

    def __init__(self, *, spec_path: str, hooks_dir: str | None = None,
                 named: Iterable[str] = (), plan_files: Iterable[str] = ()) -> None:
        self.spec_path = _key(spec_path)
        self.plan_files = {_key(p) for p in plan_files}
        self.code_dirs = _CODE_DIRS + ((_key(hooks_dir) + "/",) if hooks_dir else ())
        self.named = {_key(p) for p in named}

    @classmethod
    def for_run(cls, root: Path, project: Project, spec: Spec) -> MergePolicy:
        """The rules for merging work on `spec` into the repository at `root`."""
        root_real = root.resolve()
        return cls(spec_path=_inside(root_real, spec.path) or spec.path.name,
                   hooks_dir=_hooks_dir(root_real),
                   named=[*spec.files_to_create, *spec.files_to_modify],
                   plan_files=_plan_files(root_real, spec))

    def denied(self, path: str) -> str | None:
        """Why a worker may never write `path` (a repository path), or None."""
        key = _key(path)
        parts = key.split("/")
        if ".git" in parts:
            return "inside a .git folder: git's own files"
        if ".specflow" in parts:
            return "under .specflow/, which only agentrun writes"
        if key == self.spec_path:
            return "the spec being run, which only agentrun writes"
        if key in self.plan_files:
            return "the plan being run, which only agentrun marks"
        return None

    def kind(self, path: str) -> str | None:
        """Which rule covers `path` by its name alone, or None when it is ordinary work."""
        if self.denied(path) is not None:
            return PATH_DENIED
        key = _key(path)
        name_at_root = "/" not in key
        if key.startswith(self.code_dirs) or (name_at_root and key in _CODE_FILES):
            return RUNS_CODE
        return None

    def check(self, paths: Iterable[str]) -> list[PolicyFinding]:
        """The changed paths that a rule covers by name, in the order given."""
        found = []
        for path in paths:
            why = self.denied(path)
            if why is not None:
                found.append(PolicyFinding(path, PATH_DENIED, False, why))
            elif self.kind(path) == RUNS_CODE:
                found.append(PolicyFinding(path, RUNS_CODE, _key(path) in self.named))
        return found

    def check_changes(self, changes: Iterable[TreeChange],
                      symlinks: Callable[[], dict[str, str]]) -> list[PolicyFinding]:
        """The changes between two trees that a rule covers: by name (`check`), plus every
        gitlink added, changed or removed and every symlink added or changed whose target is
        out of bounds. `symlinks` lists the branch's symlinks and their targets (read only when
        the branch touches one)."""
        changes = list(changes)
        by_name = {f.path: f for f in self.check(c.path for c in changes)}
        links: dict[str, str] | None = None
        found = []
        for change in changes:
            finding = by_name.get(change.path)
            if finding is None and GITLINK in (change.old_mode, change.new_mode):
                finding = PolicyFinding(change.path, PATH_DENIED, False,
                                  "a gitlink: a nested repository or submodule")
            if finding is None and change.new_mode == SYMLINK:
                links = symlinks() if links is None else links
                why = symlink_out_of_bounds(change.path, links)
                if why is not None:
                    finding = PolicyFinding(change.path, PATH_DENIED, False,
                                      f"a symlink to {links.get(change.path, '?')!r}, {why}")
            if finding is not None:
                found.append(finding)
        return found


def symlink_out_of_bounds(path: str, links: dict[str, str]) -> str | None:
    """Why the symlink at `path` points where no symlink of a worker may, or None.

    Resolved within the tree (`links` holds its symlinks): an absolute target, a `..` above
    the root or a loop leaves the repository; the root itself, or a place in a `.git` or
    `.specflow` folder, opens agentrun's own files.
    """
    pending = path.split("/")
    done: list[str] = []
    hops = 0
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not done:
                return "outside the repository"
            done.pop()
            continue
        done.append(part)
        target = links.get("/".join(done))
        if target is None:
            continue
        hops += 1
        if hops > _MAX_LINK_HOPS:
            return "a loop of symlinks"
        if target.startswith("/"):
            return "outside the repository"
        done.pop()
        pending = target.split("/") + pending
    if not done:
        return "the repository's root"
    if any(part.casefold() in _OWN_FOLDERS for part in done):
        return "into a .git or .specflow folder"
    return None


def _plan_files(root: Path, spec: Spec) -> list[str]:
    """A plan read from another tool's format: every file it was read from and the file a run
    marks its progress in (GSD's ROADMAP.md), as repository paths."""
    if spec.source is None:
        return []
    from agentrun.formats import gsd  # only for plans from other tools

    paths = [root / f for f in spec.source.files]
    roadmaps = {gsd.roadmap_path(p) for p in paths if gsd.PLAN_FILE.match(p.name)}
    return [rel for p in [*paths, *roadmaps] if p is not None
            and (rel := _inside(root, p)) is not None]


def _inside(root: Path, path: Path) -> str | None:
    """`path` relative to `root` (`/`-separated), or None when it lies outside."""
    try:
        return Path(path).resolve().relative_to(root).as_posix()
    except ValueError:
        return None


def _hooks_dir(root: Path) -> str | None:
    """The repository's own `core.hooksPath` (the last one the user's config files set,
    ignoring the override agentrun's git calls pass) as a path inside it, if it points
    inside."""
    proc = gitcli.run_git("config", "--show-scope", "--get-all", "core.hooksPath",
                             cwd=root, user_config=True)
    values = [line.split("\t", 1)[1] for line in proc.stdout.splitlines()
              if "\t" in line and not line.startswith("command\t")]
    value = values[-1].strip() if values else ""
    if not value or value.startswith("~"):
        return None
    target = _inside(root, root / value)
    return None if target in (None, ".") else target
