"""`BwrapSandbox`: each command in a fresh bubblewrap jail, run and stopped like a local one.

It is a `LocalSandbox` whose argv is wrapped by `confine`: the same output capture, timeout,
kill and spawn events. The process group it kills is bwrap's own; bwrap runs the command in a
PID namespace with `--die-with-parent`, so killing bwrap ends everything inside, `setsid`
children included. Where the machine allows, each command runs in a cgroup of its own whose
`pids.max` is the jail's process limit (`cgroup.py`), which holds for root too.
"""

from __future__ import annotations

import dataclasses
import signal
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from agentrun.sandbox.base import CommandResult, SpawnListener, unchanged
from agentrun.sandbox.cgroup import cgroup_parent, command_cgroup
from agentrun.sandbox.jail import Jail, confine
from agentrun.sandbox.local import LocalSandbox


class BwrapSandbox:
    """One per worker or auditor: its commands confined to `jail`."""

    def __init__(self, jail: Jail, exe: str, on_spawn: SpawnListener | None = None,
                 cgroups: bool = True) -> None:
        self.jail = jail
        self._exe = exe
        self._cgroups = cgroups  # False: the process limit is the rlimit alone
        self._local = LocalSandbox(on_spawn=on_spawn)
        # the jail's mounts by (PATH, cwd): working them out resolves every PATH entry, which
        # costs about a millisecond a command
        self._prefixes: dict[tuple[str, Path], list[str]] = {}

    def run(self, command: str | Sequence[str], *, cwd: Path, timeout_s: float,
            env: Mapping[str, str], max_output_chars: int = 20_000,
            redact: Callable[[str], str] = unchanged,
            on_output: Callable[[bytes], None] | None = None) -> CommandResult:
        argv = ["/bin/bash", "-c", command] if isinstance(command, str) else list(command)
        processes = self.jail.limits.processes
        where = cgroup_parent() if self._cgroups and processes > 0 else None
        with command_cgroup(where, processes) as join:
            return self._local.run([*join, *self._prefix(env.get("PATH", ""), cwd), *argv],
                                   cwd=cwd, timeout_s=timeout_s, env=env,
                                   max_output_chars=max_output_chars, redact=redact,
                                   on_output=on_output)

    def _prefix(self, path_env: str, cwd: Path) -> list[str]:
        """bwrap and its options, up to the `--` before the command."""
        key = (path_env, cwd)
        if key not in self._prefixes:
            # the command's own PATH decides which tool folders in home stay visible
            jail = dataclasses.replace(self.jail, path_env=path_env)
            self._prefixes[key] = confine([], jail, self._exe, cwd=cwd)
        return self._prefixes[key]

    def kill_all(self, sig: int = signal.SIGKILL) -> None:
        self._local.kill_all(sig)
