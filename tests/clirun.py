"""Run the `agentrun` CLI as a user does: the installed entry point, a fresh process, real
arguments. Every end-to-end test goes through here, so they all see the same environment.

The environment is the test's own with `CI=1` (plain output, no prompts), without
`AGENTRUN_DEBUG` (tracebacks would change stderr) and without any model configuration
(API keys, base URLs, `AGENTRUN_PROVIDER`/`AGENTRUN_MODEL`), so no test reaches a real model by
accident; `env` adds or overrides variables.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher import Launcher

ENTRY_POINT = Path(sys.executable).with_name("agentrun")
_DROPPED = ("AGENTRUN_DEBUG", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL",
            "ANTHROPIC_BASE_URL", "AGENTRUN_PROVIDER", "AGENTRUN_MODEL")


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str

    @property
    def json(self) -> Any:
        """stdout as the one JSON document `--json` promises; fails the test when it is not."""
        try:
            return json.loads(self.stdout)
        except ValueError as exc:
            raise AssertionError(f"stdout is not JSON (exit {self.returncode}): "
                                 f"{self.stdout!r}\nstderr: {self.stderr}") from exc


def cli_env(env: dict[str, str] | None = None) -> dict[str, str]:
    full = {k: v for k, v in os.environ.items() if k not in _DROPPED}
    return {**full, "CI": "1", **(env or {})}


def _argv(*args: str) -> list[str]:
    assert ENTRY_POINT.is_file(), f"no {ENTRY_POINT}: install the package (pip install -e .)"
    return [str(ENTRY_POINT), *args]


def agentrun(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
             timeout: float = 180) -> CliResult:
    """Run `agentrun ARGS` to completion in `cwd`, in a process of its own: from the launcher
    when it can start one as this call would start (see launcher.py), else a fresh one."""
    argv, full_env = _argv(*args), cli_env(env)
    launcher = _launcher()
    if launcher and launcher.serves(full_env) and launcher.lock.acquire(blocking=False):
        try:
            proc = launcher.run(argv, cwd, full_env, timeout)
        finally:
            launcher.lock.release()
    else:
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=full_env,
                              timeout=timeout)
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


_LAUNCHER: list[Launcher | None] = []


def _launcher() -> Launcher | None:
    """This test process's launcher, started on first use; none when the suite is asked for
    fresh processes only, or where processes cannot be forked."""
    if not _LAUNCHER:
        use = os.environ.get("AGENTRUN_TEST_FRESH_PROCESSES") != "1" and hasattr(os, "fork")
        _LAUNCHER.append(Launcher(ENTRY_POINT, cli_env()) if use else None)
        if _LAUNCHER[0]:
            atexit.register(_LAUNCHER[0].close)
    return _LAUNCHER[0]


def start(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start `agentrun ARGS` in the background, for tests that act while it runs."""
    return subprocess.Popen(_argv(*args), cwd=cwd, env=cli_env(env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen, timeout: float = 180) -> CliResult:
    """Wait for a process from `start` and collect what it printed."""
    out, err = proc.communicate(timeout=timeout)
    return CliResult(proc.returncode, out, err)


def plain_python_env(folder: Path) -> dict[str, str]:
    """`env` for a run whose project tests itself with `python -m pytest`: PATH starts with a
    `python` that is this interpreter with pytest's plugin autoload off. The project's pytest
    then loads none of this test environment's own plugins (hypothesis, xdist, benchmark: ~2 s
    each time pytest starts; a validation command starts it often), as in a user's
    environment; the project's tests run under pytest as before."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("python", "python3"):
        shim = folder / name
        shim.write_text(f'#!/bin/sh\nPYTEST_DISABLE_PLUGIN_AUTOLOAD=1 exec "{sys.executable}" '
                        '"$@"\n', encoding="utf-8")
        shim.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"}
