"""Making a fresh worktree ready to build and test: chosen untracked files copied in from the
user's checkout, then the project's set-up command, in the sandbox.

A new worktree holds tracked files only, so `npm test` or the project's `pytest` would fail in
every worker's worktree, or the model would spend its turns installing things. The worker runs
this before its first model call (a failure fails the batch with the output's tail, and no
model is asked anything), and the integration check runs it on the merged result. It is cheap
after the first worktree of a run: the package managers' caches are one directory per run,
shared by its worktrees, and copied folders are reflinked where the file system allows.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from agentrun.core.errors import AgentrunError, BadInput
from agentrun.core.fsutil import atomic_write_text
from agentrun.core.secrets import redact
from agentrun.gitcli import run_git
from agentrun.protocol import SandboxSettings, SetupSettings
from agentrun.sandbox.base import SpawnListener
from agentrun.sandbox.choice import make_sandbox
from agentrun.tools.base import CommandPolicy
from agentrun.tools.environment import scrubbed_env
from agentrun.validation import tail

LOG_NAME = "setup.log"
MAX_OUTPUT_CHARS = 200_000
# package managers' cache locations, pointed into the run's cache directory for set-up only
CACHE_VARIABLES = {"PIP_CACHE_DIR": "pip", "UV_CACHE_DIR": "uv", "npm_config_cache": "npm",
                   "YARN_CACHE_FOLDER": "yarn", "XDG_CACHE_HOME": "xdg"}


class SetupFailed(AgentrunError):
    """The set-up of a worktree failed; its message ends with the output's tail."""


@dataclass(frozen=True)
class SetupOutcome:
    copied: list[str]
    duration_s: float
    output: str = ""


def check_copies(root: Path, names: Iterable[str]) -> list[str]:
    """`worktree_copy` as given, once each entry is known to name an existing path inside the
    repository that git ignores (a copied file that git tracks, or would add, would end up in
    a worker's commit); otherwise `BadInput` naming the entry."""
    root = Path(root).resolve()
    checked = []
    for name in names:
        where = f"worktree_copy entry {name!r}"
        path = Path(name)
        if not name.strip() or path.is_absolute():
            raise BadInput(f"{where} must be a path relative to the repository root",
                           hint="name each untracked file or folder, e.g. `.env.test`")
        full = (root / path).resolve()
        if full == root or not full.is_relative_to(root) or ".git" in path.parts:
            raise BadInput(f"{where} is not a file or folder inside the repository",
                           hint="remove it from `worktree_copy` in .specflow/config.yaml")
        if not (root / path).exists():
            raise BadInput(f"{where} does not exist in {root}",
                           hint="create it first (e.g. install the dependencies), or remove "
                                "it from `worktree_copy`")
        if run_git("check-ignore", "-q", "--", name, cwd=root).returncode != 0:
            raise BadInput(f"{where} is not ignored by git, so a worker would commit it",
                           hint=f"add `{name}` to .gitignore, or remove it from "
                                "`worktree_copy`")
        checked.append(path.as_posix())
    return checked


def copy_into(source: Path, worktree: Path, names: Iterable[str]) -> list[str]:
    """Copy each named path from `source` into `worktree` (reflinks where the file system
    allows: no data is duplicated, and a worker's change never reaches the user's copy, as it
    would through a hard link). A path the worktree already holds is left alone."""
    copied = []
    for name in names:
        src, dst = Path(source) / name, Path(worktree) / name
        if dst.exists() or dst.is_symlink() or not (src.exists() or src.is_symlink()):
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        _copy(src, dst)
        copied.append(name)
    return copied


def _copy(src: Path, dst: Path) -> None:
    cp = shutil.which("cp")
    if cp is not None:
        proc = subprocess.run([cp, "-a", "--reflink=auto", "--", str(src), str(dst)],
                              capture_output=True, text=True, check=False)
        if proc.returncode == 0:
            return
        shutil.rmtree(dst, ignore_errors=True) if dst.is_dir() else dst.unlink(missing_ok=True)
    if src.is_dir() and not src.is_symlink():
        shutil.copytree(src, dst, symlinks=True)
    else:
        shutil.copy2(src, dst, follow_symlinks=False)


def cache_env(cache_dir: str | None) -> dict[str, str]:
    """The variables that point package managers at the run's shared caches."""
    if not cache_dir:
        return {}
    return {var: str(Path(cache_dir) / sub) for var, sub in CACHE_VARIABLES.items()}


def prepare_worktree(setup: SetupSettings, worktree: Path, sandbox: SandboxSettings,
                     policy: CommandPolicy, log: Path,
                     on_spawn: SpawnListener | None = None) -> SetupOutcome:
    """Copy the chosen files into `worktree` and run the set-up command there, as confined as
    the run's other commands (network only with `sandbox.setup_network`); its output goes to
    `log`. Raises `SetupFailed` with the output's tail when the command fails."""
    started = time.monotonic()
    copied = copy_into(Path(setup.source), worktree, setup.copies)
    if not setup.command:
        return SetupOutcome(copied, round(time.monotonic() - started, 3))
    shared: tuple[Path, ...] = ()
    if setup.cache_dir:
        Path(setup.cache_dir).mkdir(parents=True, exist_ok=True)
        shared = (Path(setup.cache_dir),)
    box, _choice = make_sandbox(sandbox.mode, worktree, network=setup.network,
                                home_allow=tuple(sandbox.home_allow), on_spawn=on_spawn,
                                writable_paths=shared, limits=sandbox.limits)
    env, secrets = scrubbed_env(policy, worktree=worktree)
    env.update(cache_env(setup.cache_dir))
    try:
        result = box.run(setup.command, cwd=worktree, timeout_s=setup.timeout_s, env=env,
                         max_output_chars=MAX_OUTPUT_CHARS,
                         redact=lambda text: redact(text, secrets))
    except OSError as exc:
        atomic_write_text(log, f"$ {setup.command}\n{exc}\n")
        raise SetupFailed(f"set-up command `{setup.command}` could not run: {exc}",
                          hint="fix `setup_command` (or --setup)") from None
    duration = round(time.monotonic() - started, 3)
    atomic_write_text(log, f"$ {setup.command}\n{result.output}\n"
                           f"[exit code {result.exit_code}, {result.duration_s:.2f}s]\n")
    if result.timed_out or result.exit_code != 0:
        how = (f"timed out after {setup.timeout_s:g}s" if result.timed_out
               else f"failed with exit code {result.exit_code}")
        raise SetupFailed(f"set-up command `{setup.command}` {how}; nothing else ran in "
                          f"this worktree:\n{tail(result.output)}",
                          hint=f"full output: {log}; fix `setup_command` (or --setup)")
    return SetupOutcome(copied, duration, result.output)
