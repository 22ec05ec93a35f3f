"""The bubblewrap jail: the argv that runs one command in a fresh Linux sandbox (the sandbox
that runs commands through it is `bubblewrap.py`).

What a command sees: the system's own folders (`/usr`, `/etc`, `/opt`, ...) read-only, and of
the rest only what it needs — its worktree read-write (read-only for the auditor and the
reviewer), the tool directories on its `PATH` and the running Python's installation, paths the
user allows, all read-only; an empty home directory; a private `/tmp`, `/var/tmp`, `/run` and
temporary directory (TMPDIR, wherever it is), so that no socket, pipe or file of the
orchestrator's or the machine's (the worker pool's forkserver, a Docker or D-Bus socket) can be
reached; the repository's git directory read-only, so `git status`, `diff` and `log` work but
nothing can plant a hook, a config or a ref (the worker framework commits, not the command); no
network unless allowed; its own PID namespace, so nothing it starts outlives it
(`--die-with-parent`), `setsid` included.
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

INSTALL_HINT = "install bubblewrap: apt-get install bubblewrap (or dnf install bubblewrap)"
# the system's folders, shown read-only as they are (a symlink stays a symlink)
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
               "/nix", "/snap", "/sys")
# a fresh tmpfs each inside the jail, with the temporary directory wherever TMPDIR puts it
PRIVATE_DIRS = ("/tmp", "/var/tmp", "/run")
# home folders that mix tools with secrets: only the tool parts of them are exposed
_MIXED_HOME_DIRS = {".local": ("bin", "lib", "share/uv", "pipx")}
_NEVER_EXPOSED = {".ssh", ".aws", ".gnupg", ".config", ".netrc", ".docker", ".kube", ".azure"}
_TOOL_BINS = ("bin", "sbin", ".bin")  # a tool directory whose parent is its installation


@dataclass(frozen=True)
class JailLimits:
    """What one command may take inside the jail (0: no limit): the largest file it may write
    (bytes), the processes and threads at once (RLIMIT_NPROC: the kernel counts the user's,
    those of the sandbox's user namespace, and exempts root), the memory each process may
    allocate (bytes of data, not of reserved address space, which runtimes such as V8 and Go
    reserve by the gigabyte)."""

    file_size: int = 0
    processes: int = 0
    memory: int = 0


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
    limits: JailLimits = JailLimits()


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
    """`argv` wrapped so that it runs inside `jail`, in `cwd` (default: the worktree). `argv`
    comes last, after `--`, so `confine([], ...)` is a prefix for any command.

    Mounts apply in order, so they are sorted by depth: a private directory hides what lies
    under it, and then what the command needs there is bound back (a virtualenv under /tmp, a
    worktree inside TMPDIR); a read-only `.git` inside the worktree comes after the worktree."""
    home = (jail.home or Path.home()).resolve()
    worktree = jail.worktree.resolve()
    args = [exe]
    for top in SYSTEM_DIRS:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    args += ["--dev", "/dev", "--proc", "/proc"]
    if os.path.islink("/var/run"):
        args += ["--symlink", os.readlink("/var/run"), "/var/run"]
    mounts: list[tuple[Path, list[str]]] = []  # (where, its bwrap options)
    private = private_dirs()
    mounts += [(path, ["--tmpfs", str(path)]) for path in private]
    if _can_hide(home, worktree):
        mounts.append((home, ["--tmpfs", str(home)]))
    for path in _exposed(home, jail, private):
        mounts.append((path, ["--ro-bind-try", str(path), str(path)]))
    for path in jail.writable_paths:
        mounts.append((path.resolve(), ["--bind", str(path.resolve()), str(path.resolve())]))
    mounts.append((worktree, ["--bind" if jail.writable else "--ro-bind", str(worktree),
                              str(worktree)]))
    # a checkout's own `.git` (a directory, or a linked worktree's pointer file) and the shared
    # git dir stay read-only even where they lie inside the worktree
    protected = [worktree / ".git"]
    if jail.git_dir is not None:
        protected.append(jail.git_dir.resolve())
    mounts += [(path, ["--ro-bind", str(path), str(path)]) for path in protected
               if path.exists()]
    for _where, options in sorted(mounts, key=lambda m: len(m[0].parts)):  # stable: in order
        args += options
    # no capabilities even for root: with them a command could remount a read-only folder
    # read-write (the git dir, the system) or lift its limits
    args += ["--unshare-all", "--cap-drop", "ALL"]
    if jail.network:
        args += ["--share-net"]
    args += ["--die-with-parent", "--new-session", "--setenv", "HOME", str(home),
             "--setenv", "TMPDIR", "/tmp", "--chdir", str(cwd.resolve() if cwd else worktree),
             "--", *limited(jail.limits), *argv]
    return args


def limited(limits: JailLimits) -> list[str]:
    """A prefix that runs a command (the argv after it) under `limits`, soft and hard (so the
    command cannot raise them), each at most what this process may grant."""
    settings = [(flag, value // unit, resource_id) for flag, value, unit, resource_id in (
        ("-f", limits.file_size, 1024, resource.RLIMIT_FSIZE),  # bash counts KiB
        ("-u", limits.processes, 1, resource.RLIMIT_NPROC),
        ("-d", limits.memory, 1024, resource.RLIMIT_DATA)) if value > 0]
    if not settings:
        return []
    parts = []
    for flag, value, resource_id in settings:
        hard = resource.getrlimit(resource_id)[1]
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard // (1024 if flag != "-u" else 1))
        parts.append(f"ulimit {flag} {max(value, 1)}")
    return ["/bin/bash", "-c", " && ".join(parts) + ' && exec "$@"', "agentrun-limits"]


def private_dirs() -> list[Path]:
    """The folders that are a fresh tmpfs inside the jail: /tmp, /var/tmp, /run and wherever
    TMPDIR (or TEMP, TMP) puts temporary files — where the worker pool's forkserver, the key
    proxies' homes and any other process keep their sockets and scratch files. Never `/` nor
    a folder holding a system folder (that would hide the system)."""
    found = [Path(p) for p in PRIVATE_DIRS]
    for name in (tempfile.gettempdir(), *(os.environ.get(v, "") for v in
                                           ("TMPDIR", "TEMP", "TMP"))):
        if not name or not os.path.isabs(name):
            continue
        path = Path(os.path.realpath(name))
        if path not in found and not any(Path(s).is_relative_to(path) for s in SYSTEM_DIRS):
            found.append(path)
    return found


def _can_hide(home: Path, worktree: Path) -> bool:
    """Hiding home is pointless for `/` and impossible when the worktree contains it."""
    return home != Path("/") and not home.is_relative_to(worktree)


def _exposed(home: Path, jail: Jail, private: list[Path]) -> list[Path]:
    """What a command needs outside the system folders to run its tools, read-only: the
    installations of the tools on PATH and of the running Python, and what the user allowed
    under home — never a secrets folder, never a folder holding a private directory (its
    sockets stay hidden), never `/`."""
    found: list[Path] = []
    for cand in _tool_candidates(jail):
        found += _home_tool(home, cand) if cand.is_relative_to(home) else _installation(cand)
    found += [p if p.is_absolute() else home / p for p in jail.home_allow]
    out: list[Path] = []
    for path in found:
        if path in out or path == Path("/") or path == home or _in_system(path):
            continue
        if any(d.is_relative_to(path) for d in private):
            continue
        if path.is_relative_to(home) and not any(path.is_relative_to(p) for p in private) \
                and not _can_hide(home, jail.worktree.resolve()):
            continue  # home is not hidden: nothing to bring back
        out.append(path)
    return out


def _in_system(path: Path) -> bool:
    return any(path.is_relative_to(s) for s in SYSTEM_DIRS if os.path.isdir(s))


def _tool_candidates(jail: Jail) -> list[Path]:
    """The directories a command's tools come from: PATH (as written and resolved), the
    running Python, and the base interpreter of a virtualenv among them."""
    path_env = jail.path_env if jail.path_env is not None else os.environ.get("PATH", "")
    found: list[Path] = []
    for entry in [p for p in path_env.split(os.pathsep) if os.path.isabs(p)]:
        found += [Path(entry), Path(os.path.realpath(entry))]
    for prefix in _python_prefixes():
        found += [Path(prefix), Path(os.path.realpath(prefix))]
    for cand in list(found):
        home = _venv_home(cand)
        if home is not None:
            found += [home, Path(os.path.realpath(home))]
    return found


def _venv_home(path: Path) -> Path | None:
    """The base interpreter's folder of the virtualenv at `path` (or its `bin`), if it is one."""
    for root in (path, path.parent):
        try:
            text = (root / "pyvenv.cfg").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines()[:50]:
            key, _, value = line.partition("=")
            if key.strip() == "home" and os.path.isabs(value.strip()):
                return Path(value.strip())
    return None


def _installation(path: Path) -> list[Path]:
    """The folder that holds the tool directory `path`: its parent for a `bin` (a
    virtualenv's `lib/` beside it; `node_modules` for its `.bin`), else the folder itself."""
    return [path.parent if path.name in _TOOL_BINS else path]


def _home_tool(home: Path, path: Path) -> list[Path]:
    """What to show of a tool directory under home: a virtualenv's or a `node_modules`'
    installation alone (not the project folder around it, `.env` and all), else its top
    folder (`_tool_root`)."""
    own = path.name == ".bin" or (path.name == "bin" and (path.parent / "pyvenv.cfg").is_file())
    if own and _tool_root(home, path):  # not inside a folder that holds secrets
        return _installation(path)
    return _tool_root(home, path)


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
