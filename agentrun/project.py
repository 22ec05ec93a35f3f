"""The project a command works on: its root, `.specflow/` layout, config and active spec.

The root is the git top-level of the checkout the command runs in, never a folder found by
walking up from a spec (a `.specflow/` nested anywhere below the root is data, not a project).
A run fixes its settings when it starts: the config it read and the commit it started from
(agents and prompt templates come from that commit) are recorded in its execution state, and
`run --resume`, `review`, `fix` and later CI waves use them again (`Project.pinned`), so nothing
written into the working tree after the start (a worker's merged change included) changes them.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agentrun.config import (
    CONFIG_FILE,
    ProjectConfig,
    parse_config,
    read_config,
    user_config_path,
)
from agentrun.core.errors import BadInput
from agentrun.core.secrets import secret_values
from agentrun.gitcli import git, run_git, split_z
from agentrun.gitlock import git_common_dir
from agentrun.providers.catalog import CATALOG
from agentrun.report.state_md import read_state_md
from agentrun.yamlload import safe_load

SPECFLOW = ".specflow"
OVERRIDE_KINDS = ("agents", "prompts")  # the `.specflow/` folders that override packaged files
_ACTIVE = re.compile(r"\*{0,2}Active\s+Spec(?:ification)?:?\*{0,2}:?\s*(?P<value>.+)", re.I)


@dataclass
class Project:
    root: Path
    config: ProjectConfig = field(default_factory=ProjectConfig)
    # the commit a run started from: its agents and prompts apply (None: HEAD when first asked)
    start_commit: str | None = None
    _pinned: tuple[str, Path | None] | tuple[None, None] | None = field(
        default=None, repr=False, compare=False)
    _pin_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def specflow(self) -> Path:
        return self.root / SPECFLOW

    @property
    def specs_dir(self) -> Path:
        return self.specflow / "specs"

    @property
    def state_md(self) -> Path:
        return self.specflow / "STATE.md"

    @property
    def project_md(self) -> Path:
        return self.specflow / "PROJECT.md"

    @property
    def runs_dir(self) -> Path:
        return self.specflow / "runs"

    @property
    def execution_dir(self) -> Path:
        return self.specflow / "execution"

    def pinned_overrides(self) -> tuple[str, Path | None] | tuple[None, None]:
        """The commit, and a directory holding its `.specflow/agents` and `.specflow/prompts`:
        the run's start commit, else HEAD the first time a command asks (at a run's start, HEAD
        is the user's commit).

        Workers, the reviewer and the fix worker read agent and prompt overrides from there,
        never from a working tree: files a worker writes (and that may be merged) must not
        change what later agents are told. Outside a git repository (no run happens there)
        only the packaged files apply.
        """
        with self._pin_lock:
            if self._pinned is None:
                self._pinned = snapshot_overrides(self.root, self.start_commit or "HEAD")
            return self._pinned

    @property
    def overrides_root(self) -> Path | None:
        """Where agent definitions and prompt templates are looked up (`project_root` of
        `load_agent` and `render`): the pinned commit's copy; None means the packaged only."""
        return self.pinned_overrides()[1]

    def start_at(self, commit: str) -> None:
        """Fix the run's start commit (after agentrun committed its own files)."""
        with self._pin_lock:
            self.start_commit = commit
            if self._pinned is not None and self._pinned[0] != commit:
                self._pinned = None

    def pinned(self, start_commit: str, recorded: Mapping[str, Any] | None) -> Project:
        """This project as the run that started at `start_commit` sees it: the config it
        recorded (older records: that commit's `.specflow/config.yaml`), and the agents and
        prompts of that commit. The working tree's files play no part."""
        config = (parse_config(recorded, f"the settings recorded for the run from "
                                         f"{start_commit[:12]}")
                  if recorded is not None else config_at(self.root, start_commit))
        return Project(self.root, config, start_commit=start_commit)

    def project_text(self) -> str:
        return self.project_md.read_text(encoding="utf-8") if self.project_md.is_file() else ""

    def spec_paths(self) -> list[Path]:
        if not self.specs_dir.is_dir():
            return []
        return sorted(p for p in self.specs_dir.glob("*.md") if p.is_file())

    def active_spec(self) -> Path:
        """The spec named as active in STATE.md's Current Position."""
        if not self.state_md.is_file():
            raise BadInput(f"no specification given and {self.state_md} does not exist",
                           hint="pass a spec path, e.g. `agentrun plan .specflow/specs/SPEC-1.md`")
        value = active_spec_name(read_state_md(self.state_md))
        if not value:
            raise BadInput(f"no specification given and {self.state_md} names no active "
                           "specification",
                           hint="pass a spec path, or set `- **Active Specification:** SPEC-1` "
                                "under `## Current Position` in STATE.md")
        return self.resolve_spec(value)

    def resolve_spec(self, value: str) -> Path:
        """A spec argument as a path, or as an id/name inside `.specflow/specs/`."""
        names = [value] if value.endswith(".md") else [value, value + ".md"]
        for cand in [*(Path(n) for n in names), *(self.specs_dir / n for n in names)]:
            if cand.exists():
                return cand
        return Path(value)


def active_spec_name(state_text: str) -> str | None:
    """Read `- **Active Specification:** SPEC-021` (or similar) from STATE.md text."""
    for line in state_text.splitlines():
        match = _ACTIVE.search(line.strip().lstrip("-* ").strip())
        if not match:
            continue
        value = match.group("value").strip().strip("*` ")
        value = re.sub(r"\s+[—(-].*$", "", value).strip("`[] ")
        if not value or value.lower() in {"none", "n/a", "-", "—"}:
            return None
        link = re.match(r"\[?([^\]]+)\]?\(([^)]+)\)", match.group("value").strip())
        return link.group(2) if link else value.split()[0]
    return None


def git_top_level(start: Path) -> Path | None:
    """The top-level folder of the git checkout `start` is in, or None outside git."""
    probe = start if start.is_dir() else start.parent
    if not probe.is_dir():
        return None
    proc = run_git("rev-parse", "--show-toplevel", cwd=probe)
    top = proc.stdout.strip() if proc.returncode == 0 else ""
    return Path(top).resolve() if top else None


def find_project(start: Path | None = None) -> Project:
    """The project of the checkout `start` (default: the working directory) is in: its git
    top-level, with the config found there. Outside git (where no run can happen) the nearest
    folder at or above `start` holding `.specflow/`, else `start` itself."""
    start = Path(start or Path.cwd()).resolve()
    if start.is_file():
        start = start.parent
    root = git_top_level(start)
    if root is None:
        root = next((c for c in (start, *start.parents) if (c / SPECFLOW).is_dir()), start)
    return Project(root, read_config(root / CONFIG_FILE))


def project_for_spec(spec_arg: str | None, cwd: Path | None = None) -> tuple[Project, Path]:
    """Resolve the command's project and spec path from an optional SPEC argument.

    The project is the checkout the command runs in; a spec path into another checkout makes
    that checkout's top-level the project. Never the folder above a `.specflow/` found next to
    the spec: a nested one is a file in the project like any other.
    """
    project = find_project(Path(cwd or Path.cwd()))
    if spec_arg is None:
        return project, project.active_spec()
    path = project.resolve_spec(spec_arg)
    if path.exists():
        # a symlinked spec belongs where the link is, not where its target is
        where = Path(os.path.realpath(path.absolute().parent))
        if not where.is_relative_to(project.root):
            other = git_top_level(where)
            if other is not None:
                project = find_project(other)
    return project, path


def config_at(root: Path, commit: str) -> ProjectConfig:
    """`.specflow/config.yaml` as committed in `commit` (the defaults where it has none)."""
    source = f"{commit[:12]}:{CONFIG_FILE}"
    blob = run_git("cat-file", "blob", f"{commit}:{CONFIG_FILE}", cwd=root)
    if blob.returncode != 0:  # no such file in that commit
        return ProjectConfig()
    try:
        data = safe_load(blob.stdout)
    except yaml.YAMLError as exc:
        raise BadInput(f"invalid config {source}: {exc}",
                       hint="fix the YAML syntax in a new commit and start a new run") from None
    return parse_config(data, source)


def known_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """The secret values this process holds, to be redacted from what it writes down: the
    environment's and the user-level config's, which stands in for it."""
    environ = os.environ if environ is None else environ
    return secret_values({**user_settings(), **environ})


def user_settings_names() -> list[str]:
    """What the user-level file may set: the providers' key and server variables."""
    names = {n for spec in CATALOG.values() for n in (spec.key_var, spec.base_url_var) if n}
    return sorted(names)


def user_settings() -> dict[str, str]:
    """The user-level config file's settings (`ANTHROPIC_API_KEY: ...`, `OPENAI_BASE_URL: ...`).

    They stand in for environment variables of the same names (the environment wins), and live
    outside every repository, so no change to a project can point a run at another server.
    """
    path = user_config_path()
    if not path.is_file():
        return {}
    try:
        data = safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError, OSError) as exc:
        raise BadInput(f"invalid user config {path}: {exc}",
                       hint="fix the YAML syntax or remove the file") from None
    if data is None:
        return {}
    allowed = user_settings_names()
    if not isinstance(data, dict):
        raise BadInput(f"invalid user config {path}: expected a mapping of settings",
                       hint=f"write `NAME: value` lines; the names are: {', '.join(allowed)}")
    for key, value in data.items():
        if key not in allowed:
            raise BadInput(f"invalid user config {path}: unknown key `{key}`",
                           hint=f"the keys here are: {', '.join(allowed)}")
        if not isinstance(value, str):
            raise BadInput(f"invalid user config {path}: `{key}` must be a string",
                           hint=f"e.g. `{key}: <value>`")
    return {key: value.strip() for key, value in data.items() if value.strip()}



def snapshot_overrides(root: Path, rev: str) -> tuple[str, Path | None] | tuple[None, None]:
    """Copy the committed override files of `rev` out of git into a directory of their own
    (None when the commit has none: the packaged files apply).

    It lives in the repository's git dir, under the commit's name: outside every working tree
    (no merge writes there) and the same for every run from that commit.
    """
    found = run_git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", cwd=root)
    if found.returncode != 0:
        return None, None
    commit = found.stdout.strip()
    folders = [f"{SPECFLOW}/{kind}" for kind in OVERRIDE_KINDS]
    listed = git("ls-tree", "-z", "--name-only", commit, "--", *(f"{f}/" for f in folders),
                 cwd=root)
    names = [n for n in split_z(listed)
             if Path(n).suffix == ".md" and str(Path(n).parent) in folders]
    if not names:
        return commit, None
    dest = git_common_dir(root) / "agentrun" / "overrides" / commit
    if dest.is_dir():
        return commit, dest
    tmp = dest.with_name(f".{commit}.{os.getpid()}.{threading.get_ident()}")
    shutil.rmtree(tmp, ignore_errors=True)
    for folder in folders:
        (tmp / folder).mkdir(parents=True, exist_ok=True)
    for name in names:
        blob = run_git("cat-file", "blob", f"{commit}:./{name}", cwd=root)
        if blob.returncode == 0:  # a submodule or a tree named *.md is no template
            (tmp / name).write_text(blob.stdout, encoding="utf-8")
    try:
        tmp.rename(dest)
    except OSError:  # another process pinned the same commit first: theirs is identical
        shutil.rmtree(tmp, ignore_errors=True)
    return commit, dest
