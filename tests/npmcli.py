"""The coding-agent CLIs the executor tests drive for real: installed with npm into a cache
folder on first use (`.ci/run` does it up front), once across test workers."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest


def installed(cache: Path, name: str, package: str, product: str) -> Path:
    """The folder holding the `name` executable of npm `package`, installed into `cache`;
    skips (saying why) only where npm is missing."""
    exe = cache / "node_modules" / ".bin" / name
    if not exe.exists():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip(f"node/npm are not installed here, so the {product} CLI cannot be")
        cache.mkdir(parents=True, exist_ok=True)
        with open(cache / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not exe.exists():
                subprocess.run([npm, "install", "--prefix", str(cache), "--no-audit",
                                "--no-fund", package], check=True, capture_output=True,
                               timeout=600)
    return exe.parent


def path_for(server_env: dict[str, str], name: str, cli_dir: Path | None) -> dict[str, str]:
    """`server_env` with a PATH that finds the CLI in `cli_dir` first, or (None) not at all."""
    path = os.environ.get("PATH", "")
    if cli_dir is None:
        path = os.pathsep.join(p for p in path.split(os.pathsep)
                               if not (Path(p) / name).exists())
    return {**server_env, "PATH": f"{cli_dir}{os.pathsep}{path}" if cli_dir else path}
