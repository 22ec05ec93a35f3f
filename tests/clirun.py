"""Run the `agentrun` CLI as a user does: a fresh process, real arguments, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def agentrun(*args: str, cwd: Path | None = None, env: dict | None = None,
             timeout: float = 120) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "CI": "1", **(env or {})}
    full_env.pop("AGENTRUN_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "agentrun", *args], capture_output=True,
                          text=True, cwd=cwd, env=full_env, timeout=timeout)


def json_of(proc: subprocess.CompletedProcess) -> dict:
    return json.loads(proc.stdout)
