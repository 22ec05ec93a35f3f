"""Bubblewrap confinement: the argv that runs one command in a fresh Linux sandbox.

What a command sees: the root filesystem read-only; its worktree read-write (read-only for the
auditor and the reviewer); a private `/tmp`; an empty home directory, except the tool
directories on `PATH` that live there (pyenv, nvm, cargo, `~/.local/bin`) and paths the user
allows, all read-only; the repository's git directory read-only, so `git status`, `diff` and
`log` work but nothing can plant a hook, a config or a ref (the worker framework commits, not
the command); no network unless allowed; its own PID namespace, so nothing it starts outlives
it (`--die-with-parent`), `setsid` included.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

INSTALL_HINT = "install bubblewrap: apt-get install bubblewrap (or dnf install bubblewrap)"
# home folders that mix tools with secrets: only the tool parts of them are exposed
_MIXED_HOME_DIRS = {".local": ("bin", "lib", "share/uv", "pipx")}
_PRIVATE_DIRS = ("/tmp", "/var/tmp")  # a fresh tmpfs each inside the jail
_NEVER_EXPOSED = {".ssh", ".aws", ".gnupg", ".config", ".netrc", ".docker", ".kube", ".azure"}


@dataclass(frozen=True)
class Jail:
    """Where one command may write, what it may read, and whether it may reach the network."""

    worktree: Path
    git_dir: Path | None = None  # the repository's common git dir (read-only inside)
    writable: bool = True
    network: bool = False
    home: Path | None = None  # hidden behind an empty directory; None: the user's home
    home_allow: tuple[Path, ...] = ()  # paths under home to expose read-only
    path_env: str | None = None  # PATH of the command (its tool directories stay visible)
    writable_paths: tuple[Path, ...] = ()  # outside the worktree: a CLI's config, run caches


def bwrap_executable() -> str | None:
    return shutil.which("bwrap")


@functools.cache
def unavailable_reason() -> str | None:
    """None when bubblewrap can sandbox a command here; otherwise why not, for the user."""
    if not Path("/proc/self/ns").is_dir():
        return "bubblewrap sandboxing needs Linux"
    exe = bwrap_executable()
    if exe is None:
        return "bwrap not found: apt-get install bubblewrap"
    try:
        proc = subprocess.run([exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                               "--unshare-all", "--die-with-parent", "/bin/true"],
                              capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap cannot run: {exc}"
    if proc.returncode != 0:
        detail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return f"bwrap cannot create a sandbox here: {detail}"
    return None


def confine(argv: Sequence[str], jail: Jail, exe: str = "bwrap",
            cwd: Path | None = None) -> list[str]:
    """`argv` wrapped so that it runs inside `jail` (mounts are applied in order), in `cwd`
    (default: the worktree). `argv` comes last, after `--`, so `confine([], ...)` is a prefix
    for any command."""
    home = (jail.home or Path.home()).resolve()
    worktree = jail.worktree.resolve()
    args = [exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", "/tmp", "--tmpfs", "/var/tmp"]
    for path in _tmp_exposed(jail):  # a virtualenv or tool under /tmp stays usable
        args += ["--ro-bind-try", str(path), str(path)]
    if _can_hide(home, worktree):
        args += ["--tmpfs", str(home)]
        for path in _home_exposed(home, jail):
            args += ["--ro-bind-try", str(path), str(path)]
    for path in jail.writable_paths:
        args += ["--bind", str(path.resolve()), str(path.resolve())]
    args += ["--bind" if jail.writable else "--ro-bind", str(worktree), str(worktree)]
    # after the worktree: a checkout's own `.git` (a directory, or a linked worktree's pointer
    # file) and the shared git dir stay read-only even where they lie inside the worktree
    protected = [worktree / ".git"]
    if jail.git_dir is not None:
        protected.append(jail.git_dir.resolve())
    for path in protected:
        if path.exists():
            args += ["--ro-bind", str(path), str(path)]
    args += ["--unshare-all"]
    if jail.network:
        args += ["--share-net"]
    args += ["--die-with-parent", "--new-session", "--setenv", "HOME", str(home),
             "--setenv", "TMPDIR", "/tmp", "--chdir", str(cwd.resolve() if cwd else worktree),
             "--", *argv]
    return args


def _can_hide(home: Path, worktree: Path) -> bool:
    """Hiding home is pointless for `/` and impossible when the worktree contains it."""
    return home != Path("/") and not home.is_relative_to(worktree)


def _home_exposed(home: Path, jail: Jail) -> list[Path]:
    """Home paths a command needs to run its tools: the tool directories on PATH and the
    running Python's installation, plus what the user allowed — never a secrets folder."""
    found: list[Path] = []
    for cand in _tool_candidates(jail):
        found += _tool_root(home, cand)
    found += [p if p.is_absolute() else home / p for p in jail.home_allow]
    out: list[Path] = []
    for path in found:
        if path not in out and path.is_relative_to(home) and path != home:
            out.append(path)
    return out


def _tool_candidates(jail: Jail) -> list[Path]:
    """The directories a command's tools come from: PATH and the running Python."""
    path_env = jail.path_env if jail.path_env is not None else os.environ.get("PATH", "")
    found = [Path(p) for p in path_env.split(os.pathsep) if p]
    for prefix in _python_prefixes():
        found += [Path(prefix), Path(os.path.realpath(prefix))]
    return found


def _tmp_exposed(jail: Jail) -> list[Path]:
    """Tool directories under the private /tmp and /var/tmp, read-only: a `bin/` directory
    brings its installation (a virtualenv's `lib/` beside it)."""
    out: list[Path] = []
    for cand in _tool_candidates(jail):
        if not cand.is_absolute() or not any(cand.is_relative_to(t) and cand != Path(t)
                                             for t in _PRIVATE_DIRS):
            continue
        root = cand.parent if cand.name == "bin" else cand
        if root not in out and root not in (Path(t) for t in _PRIVATE_DIRS):
            out.append(root)
    return out


def _tool_root(home: Path, path: Path) -> list[Path]:
    """The folder under home that holds the tool at `path` (`~/.pyenv` for
    `~/.pyenv/shims`), or only its tool parts for folders that also hold secrets."""
    try:
        rel = path.resolve().relative_to(home)
    except (ValueError, OSError):
        return []
    if not rel.parts or rel.parts[0] in _NEVER_EXPOSED:
        return []
    top = home / rel.parts[0]
    if rel.parts[0] in _MIXED_HOME_DIRS:
        return [top / part for part in _MIXED_HOME_DIRS[rel.parts[0]]]
    return [top]


def _python_prefixes() -> Iterable[str]:
    return {sys.prefix, sys.base_prefix, sys.exec_prefix}
