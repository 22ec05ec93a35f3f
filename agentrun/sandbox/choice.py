"""Which sandbox commands run in: the mode asked for, what this machine can do, and the words
that tell the user.

`auto` confines commands with bubblewrap where it works and otherwise runs them unconfined,
saying so; `on` refuses to start without it; `off` is the user's explicit choice. The same
words ("on (bubblewrap)", "off (bwrap not found: ...)") go to the summary, the run record and
the JSON result, so nobody has to guess whether a run was confined.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from agentrun.core.errors import BadInput, CannotStart
from agentrun.core.limits import SandboxLimits
from agentrun.gitcli import git
from agentrun.protocol import SandboxSettings
from agentrun.sandbox.base import Sandbox, SpawnListener
from agentrun.sandbox.bubblewrap import BwrapSandbox
from agentrun.sandbox.jail import (
    INSTALL_HINT,
    Jail,
    JailLimits,
    bwrap_executable,
    unavailable_reason,
)
from agentrun.sandbox.local import LocalSandbox

if TYPE_CHECKING:
    from agentrun.config import SandboxConfig


class SandboxMode(StrEnum):
    AUTO = "auto"
    ON = "on"
    OFF = "off"


@dataclass(frozen=True)
class SandboxChoice:
    """Whether commands are confined, and if not, why not."""

    confined: bool
    reason: str = ""  # why commands run unconfined
    asked_off: bool = False  # the user chose `off`

    @property
    def fell_back(self) -> bool:
        """`auto` found no usable bubblewrap: worth a warning wherever the run is recorded."""
        return not self.confined and not self.asked_off

    def describe(self) -> str:
        return "on (bubblewrap)" if self.confined else f"off ({self.reason})"


def choose(mode: str) -> SandboxChoice:
    """The sandbox `mode` gives on this machine; `on` where bubblewrap cannot run is
    `CannotStart` (exit 3) with the install hint."""
    if SandboxMode(mode) is SandboxMode.OFF:
        return SandboxChoice(False, "sandbox mode off", asked_off=True)
    reason = unavailable_reason()
    if reason is None:
        return SandboxChoice(True)
    if SandboxMode(mode) is SandboxMode.ON:
        raise CannotStart(f"--sandbox on, but commands cannot be sandboxed here: {reason}",
                          hint=f"{INSTALL_HINT}; or run with --sandbox auto or off")
    return SandboxChoice(False, reason)


def make_sandbox(mode: str, worktree: Path, *, network: bool = False,
                 home_allow: tuple[str, ...] = (), writable: bool = True,
                 writable_paths: tuple[Path, ...] = (), limits: SandboxLimits | None = None,
                 on_spawn: SpawnListener | None = None) -> tuple[Sandbox, SandboxChoice]:
    """The sandbox for the commands run in `worktree` (read-only unless `writable`; plus
    `writable_paths` outside it: a CLI's config, a run's package caches), within `limits`
    (None: the defaults), and the choice it stands for."""
    choice = choose(mode)
    if not choice.confined:  # confined means bwrap was found and works
        return LocalSandbox(on_spawn=on_spawn), choice
    exe = bwrap_executable() or "bwrap"
    jail = Jail(worktree=worktree, git_dir=shared_git_dir(worktree), writable=writable,
                network=network, home_allow=tuple(Path(p).expanduser() for p in home_allow),
                path_env=os.environ.get("PATH", ""), writable_paths=writable_paths,
                limits=resource_limits(limits or SandboxLimits()))
    return BwrapSandbox(jail, exe, on_spawn=on_spawn), choice


def resource_limits(limits: SandboxLimits) -> JailLimits:
    """The `sandbox: limits:` setting in bytes and processes (memory by default half the
    machine's, at least 2 GiB)."""
    mb = 1024 * 1024
    memory = limits.memory_mb
    if memory is None:
        try:
            memory = max(2048, os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // mb // 2)
        except (ValueError, OSError):
            memory = 0
    return JailLimits(file_size=limits.file_size_mb * mb, processes=limits.processes,
                  memory=memory * mb)


def shared_git_dir(worktree: Path) -> Path | None:
    """The repository's shared git dir (hooks, config, objects, other worktrees' admin
    dirs), kept read-only inside the jail; None outside a repository."""
    out = git("rev-parse", "--path-format=absolute", "--git-common-dir", cwd=worktree,
              check=False)
    return Path(out) if out and Path(out).is_dir() else None


def resolve(flag_mode: str | None, allow_network: bool,
            config: SandboxConfig) -> tuple[SandboxSettings, SandboxChoice]:
    """The sandbox of a run, a CI worker or an audit: flags, then `sandbox:` in the config,
    then `auto`. The settings carry the resolved mode, so that the workers run exactly as
    confined as the summary says."""
    mode = flag_mode or config.mode
    if mode not in tuple(SandboxMode):
        raise BadInput(f"invalid --sandbox {mode!r}", hint="use --sandbox auto, on or off")
    choice = choose(mode)
    settings = SandboxSettings(mode="on" if choice.confined else "off",
                               network=allow_network or config.network,
                               home_allow=list(config.home_allow), limits=config.limits)
    return settings, choice
