"""The project a command works on: its root, `.specflow/` layout, config and active spec."""

from __future__ import annotations

import os
import re
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from agentrun.config import ProjectConfig, read_config, user_config_path
from agentrun.errors import BadInput
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
    _pinned: tuple[str, Path] | tuple[None, None] | None = field(default=None, repr=False,
                                                                compare=False)
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

    def pinned_overrides(self) -> tuple[str, Path] | tuple[None, None]:
        """The commit, and a directory holding its `.specflow/agents` and `.specflow/prompts`,
        fixed the first time a run asks (at its start, HEAD is the user's commit).

        Workers read agent and prompt overrides from there, never from a working tree: files a
        worker writes (and that may be merged) must not change what later workers are told.
        Outside a git repository (no run happens there) only the packaged files apply.
        """
        with self._pin_lock:
            if self._pinned is None:
                self._pinned = snapshot_overrides(self.root, "HEAD")
            return self._pinned

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


def find_project(start: Path | None = None) -> Project:
    """The nearest directory at or above `start` holding `.specflow/` (or `start` itself)."""
    start = Path(start or Path.cwd()).resolve()
    if start.is_file():
        start = start.parent
    for cand in (start, *start.parents):
        if (cand / SPECFLOW).is_dir():
            return Project(cand, read_config(cand / SPECFLOW / "config.yaml"))
    return Project(start)


def project_for_spec(spec_arg: str | None, cwd: Path | None = None) -> tuple[Project, Path]:
    """Resolve the command's project and spec path from an optional SPEC argument."""
    project = find_project(Path(cwd or Path.cwd()))
    if spec_arg is None:
        return project, project.active_spec()
    path = project.resolve_spec(spec_arg)
    if path.exists():  # the spec's own project wins (a spec path into another checkout)
        # a symlinked spec belongs where the link is, not where its target is
        owner = find_project(path.absolute().parent if path.is_symlink()
                             else path.resolve().parent)
        if owner.root != project.root:
            project = owner
    return project, path


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



def snapshot_overrides(root: Path, rev: str) -> tuple[str, Path] | tuple[None, None]:
    """Copy the committed override files of `rev` out of git into a directory of their own.

    It lives in the repository's git dir, under the commit's name: outside every working tree
    (no merge writes there) and the same for every run from that commit.
    """
    found = run_git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", cwd=root)
    if found.returncode != 0:
        return None, None
    commit = found.stdout.strip()
    dest = git_common_dir(root) / "agentrun" / "overrides" / commit
    if dest.is_dir():
        return commit, dest
    tmp = dest.with_name(f".{commit}.{os.getpid()}.{threading.get_ident()}")
    shutil.rmtree(tmp, ignore_errors=True)
    for kind in OVERRIDE_KINDS:
        folder = f"{SPECFLOW}/{kind}"
        (tmp / folder).mkdir(parents=True, exist_ok=True)
        listed = git("ls-tree", "-z", "--name-only", commit, "--", f"{folder}/", cwd=root)
        for name in split_z(listed):
            rel = Path(name)
            if rel.suffix != ".md" or rel.parent != Path(folder):
                continue
            blob = run_git("cat-file", "blob", f"{commit}:./{name}", cwd=root)
            if blob.returncode == 0:  # a submodule or a tree named *.md is no template
                (tmp / folder / rel.name).write_text(blob.stdout, encoding="utf-8")
    try:
        tmp.rename(dest)
    except OSError:  # another process pinned the same commit first: theirs is identical
        shutil.rmtree(tmp, ignore_errors=True)
    return commit, dest
