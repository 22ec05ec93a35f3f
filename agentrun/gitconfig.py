"""The configuration and environment every git that agentrun runs is started with.

A worker's branch and worktree are untrusted: files, attributes, nested repositories and
symlinks in them are data, and git must never run a command they select. So every call runs
with a fixed, minimal configuration instead of whatever configuration files happen to say:

- No system or global config file is read (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL`).
  Of the user's own settings only data is carried over — `safe.directory`,
  `core.excludesFile` and the author's identity (`identity_env`).
- Command-scope settings, which no config file overrides and which git passes on to every
  git it starts, switch off hooks, the fsmonitor command, submodule recursion, signing and
  automatic housekeeping (`FIXED_CONFIG`).
- Every filter and merge driver that the repository's own config defines is neutralised: a
  worker writes the `.gitattributes` that would select it (`_repo_settings`).

git's environment also carries no secrets, so even a command that some other path lets run
finds no API key. Reading the user's and the repository's settings runs git itself, so the
one place a git process starts (`spawn_git`) is here too; the runner that adds each
subcommand's guards is `agentrun/gitcli.py` (docs/security.md).
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, overload

from agentrun.core.errors import CannotStart
from agentrun.core.secrets import without_secrets

# Variables that point git at a particular repository or index. They leak in when agentrun runs
# inside a git hook (e.g. tests in a pre-push hook) and would silently redirect our commands.
_REPO_LOCAL_ENV = (
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_CONFIG", "GIT_DIR",
    "GIT_GRAFT_FILE", "GIT_IMPLICIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_NO_REPLACE_OBJECTS",
    "GIT_OBJECT_DIRECTORY", "GIT_PREFIX", "GIT_REPLACE_REF_BASE", "GIT_SHALLOW_FILE",
    "GIT_WORK_TREE",
)
# Configuration passed in the environment (ours replaces it) and the external diff command.
_CONFIG_ENV = ("GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_EXTERNAL_DIFF")
_CONFIG_ENV_PREFIXES = ("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_")
# The user's config files: read only where a call asks for the user's configuration.
_USER_FILES_ENV = ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM")

_QUIET_ENV = {
    "GIT_EDITOR": "true",  # never open an editor (merge messages, commit templates)
    "GIT_SEQUENCE_EDITOR": "true",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "GIT_TERMINAL_PROMPT": "0",  # never ask for credentials
    "GIT_ASKPASS": "true",
    "SSH_ASKPASS": "true",
    "LC_ALL": "C",  # stable English messages in errors we show and parse
}
_NO_USER_FILES = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
                  "GIT_ATTR_NOSYSTEM": "1"}

# Settings every call runs with, at command scope (above every config file).
FIXED_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.quotepath", "off"),
    ("core.hooksPath", os.devnull),  # no hooks: husky, lefthook, .git/hooks alike
    ("core.fsmonitor", "false"),  # no fsmonitor command
    ("submodule.recurse", "false"),  # checkouts and merges never enter a nested repository
    ("status.submoduleSummary", "false"),
    ("diff.ignoreSubmodules", "dirty"),  # never `git status` inside a nested repository
    ("commit.gpgSign", "false"),  # never sign a worker's code with the user's key
    ("log.showSignature", "false"),
    ("merge.stat", "false"),
    # No automatic housekeeping during a run: a commit or merge would otherwise start a
    # background `git maintenance`/`gc --auto` that repacks and prunes while other workers
    # write to the same object store. The user's own next git command does it as usual.
    ("maintenance.auto", "false"),
    ("gc.auto", "0"),
)
# What a neutralised merge driver runs: git's own three-way text merge of the file.
TEXT_MERGE = "git merge-file --quiet --marker-size=%L -L ours -L base -L theirs %A %O %B"

# Subcommands that neither read the working tree through attributes nor write files, so the
# repository's drivers cannot matter: no need to look them up.
_NO_DRIVERS = frozenset({
    "rev-parse", "rev-list", "symbolic-ref", "show-ref", "update-ref", "for-each-ref",
    "branch", "merge-base", "config", "ls-tree", "diff-tree", "write-tree", "check-ignore",
    "init", "log", "show"})

FALLBACK_NAME = "agentrun"
FALLBACK_EMAIL = "agentrun@localhost"
_IDENTITY = (("user.name", ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"), FALLBACK_NAME),
             ("user.email", ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"), FALLBACK_EMAIL))


def git_env(extra: dict[str, str] | None = None, *, user_config: bool = False,
            config: tuple[tuple[str, str], ...] = FIXED_CONFIG) -> dict[str, str]:
    """The environment for a git child: ours minus repository pointers, secrets and outside
    configuration, plus no-prompt settings and `config` at command scope. Without
    `user_config` no system or global config file is read."""
    env = {k: v for k, v in without_secrets(os.environ).items()
           if k not in _REPO_LOCAL_ENV and k not in _CONFIG_ENV
           and not k.startswith(_CONFIG_ENV_PREFIXES)}
    env.update(_QUIET_ENV)
    if not user_config:
        env.update(_NO_USER_FILES)
    env["GIT_CONFIG_COUNT"] = str(len(config))
    for i, (key, value) in enumerate(config):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    if extra:
        env.update(extra)
    return env


def spawn_git(argv: list[str], cwd: Path | str, env: dict[str, str],
              stdin: str | None) -> subprocess.CompletedProcess[str]:
    """Start `git ARGV` in `cwd` with exactly `env`, capturing its output (the guards of a
    call are the runner's: agentrun/gitcli.py)."""
    try:
        return subprocess.run(
            ["git", *argv], cwd=cwd, env=env, input=stdin, capture_output=True, text=True,
            encoding="utf-8", errors="surrogateescape", check=False,
        )
    except FileNotFoundError as exc:
        if not Path(cwd).is_dir():
            raise CannotStart(f"directory does not exist: {cwd}",
                              hint="pass the path of an existing project directory") from exc
        raise CannotStart("git is not installed or not on PATH",
                          hint="install git (2.31 or newer) and try again") from exc


# --- the user's and the repository's settings --------------------------------------------------

@dataclass(frozen=True)
class _Settings:
    """What one configuration read found: command-scope overrides, identity, files read."""

    overrides: tuple[tuple[str, str], ...] = ()
    identity: tuple[tuple[str, str], ...] = ()  # user.name / user.email, if set
    excludes_file: bool = False  # the config sets core.excludesFile
    files: tuple[str, ...] = ()  # config files whose change invalidates this read


_USER_KEYS = r"^(safe\.directory|core\.excludesfile|user\.name|user\.email)$"
_REPO_KEYS = (r"^(filter|merge)\..+\.[^.]+$|^core\.excludesfile$|^user\.(name|email)$"
              r"|^include(if\..+)?\.path$")
_cache: dict[str, tuple[tuple[tuple[str, object, int], ...], _Settings]] = {}
_cache_lock = threading.Lock()


def extra_config(subcommand: str, cwd: Path | str) -> tuple[tuple[str, str], ...]:
    """The whole command-scope configuration of a call of `subcommand` ("" for none): fixed
    settings, the user's carried data settings, and the neutralised drivers of the repository
    at `cwd`."""
    user = _user_settings()
    carried = list(user.overrides)
    if subcommand in _NO_DRIVERS:
        return (*FIXED_CONFIG, *carried)
    repo = _repo_settings(Path(cwd), carried)
    if repo.excludes_file:  # the repository's own setting wins over the user's, as in git
        carried = [kv for kv in carried if kv[0] != "core.excludesFile"]
    return (*FIXED_CONFIG, *carried, *repo.overrides)


def identity_env(cwd: Path | str) -> dict[str, str]:
    """Environment that gives commits an author: the user's global identity (the fixed
    configuration reads no global file) or, when none is configured, agentrun's. Only the
    variables git would lack: empty when the repository's config names the author, and never
    one the environment already sets. The user's config is never modified."""
    user = dict(_user_settings().identity)
    repo = dict(_repo_settings(Path(cwd), list(_user_settings().overrides)).identity)
    env: dict[str, str] = {}
    for key, variables, fallback in _IDENTITY:
        if key in repo:
            continue
        for var in variables:
            if os.environ.get(var):
                continue
            if key in user:
                env[var] = user[key]
            elif not (var.endswith("EMAIL") and os.environ.get("EMAIL")):
                env[var] = fallback
    return env


def read_user_settings() -> None:
    """Read the user's settings now, ahead of the first git command: the worker pool's server
    does (agentrun/preload.py), and every worker it starts inherits them, checked against
    their files' content and the environment as any remembered read is."""
    _user_settings()


def _user_settings() -> _Settings:
    """The user's settings that agentrun's git keeps, from the system and global config files
    and the environment (`GIT_CONFIG_COUNT`, `-c` of an enclosing git): `safe.directory`
    (without it git refuses a repository owned by someone else, as in CI containers),
    `core.excludesFile` (what the user ignores everywhere) and the identity."""
    files = _user_config_files()
    given = sorted((k, v) for k, v in os.environ.items() if k in _USER_FILES_ENV
                   or k in _CONFIG_ENV or k.startswith(_CONFIG_ENV_PREFIXES))
    stamp = (*_stamp(files), *((k, v, 0) for k, v in given))
    with _cache_lock:
        hit = _cache.get("")
    if hit is not None and hit[0] == stamp:
        return hit[1]
    env = {**without_secrets(os.environ), **_QUIET_ENV}
    for name in _REPO_LOCAL_ENV:
        env.pop(name, None)
    proc = spawn_git(["config", "-z", "--show-scope", "--get-regexp", _USER_KEYS], "/", env, None)
    overrides: list[tuple[str, str]] = []
    identity: dict[str, str] = {}
    excludes: str | None = None
    for scope, key, value in _entries(proc.stdout, origin=False):
        if scope not in ("system", "global", "command"):
            continue
        if key == "safe.directory":
            overrides.append((key, value))
        elif key == "core.excludesfile":
            excludes = value
        elif value.strip():
            identity[key] = value
    if excludes is not None:
        overrides.append(("core.excludesFile", excludes))
    found = _Settings(tuple(overrides), tuple(identity.items()), excludes is not None, files)
    with _cache_lock:
        _cache[""] = (stamp, found)
    return found


def _repo_settings(cwd: Path, carried: list[tuple[str, str]]) -> _Settings:
    """What the repository's own config (the one git reads at `cwd` under the fixed
    configuration) adds: each filter and merge driver it defines, neutralised; whether it
    sets `core.excludesFile`; its identity. Remembered until a config file it read (or an
    include target) changes."""
    key = str(cwd)
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None and hit[0] == _stamp(hit[1].files) and hit[1].files:
        return hit[1]
    proc = spawn_git(["config", "-z", "--show-scope", "--show-origin", "--get-regexp",
                   _REPO_KEYS], cwd, git_env(config=(*FIXED_CONFIG, *carried)), None)
    filters: list[str] = []
    merges: list[str] = []
    identity: dict[str, str] = {}
    excludes = False
    files = set(_local_config_files(cwd))
    for (scope, origin), name, value in _entries(proc.stdout, origin=True):
        if scope == "command":
            continue
        source = cwd / origin[len("file:"):] if origin.startswith("file:") else None
        if source is not None:  # git names the repository's own files relative to `cwd`
            files.add(str(source))
        section, _, rest = name.partition(".")
        driver = rest.rpartition(".")[0]
        if section == "filter" and driver not in filters:
            filters.append(driver)
        elif section == "merge" and driver not in merges:
            merges.append(driver)
        elif name == "core.excludesfile":
            excludes = True
        elif name.startswith("user.") and value.strip():
            identity[name] = value
        elif name.endswith(".path") and source is not None:
            files.add(str(source.parent / Path(value).expanduser()))
    overrides: list[tuple[str, str]] = []
    for name in filters:
        overrides += [(f"filter.{name}.clean", ""), (f"filter.{name}.smudge", ""),
                      (f"filter.{name}.process", ""), (f"filter.{name}.required", "false")]
    overrides += [(f"merge.{name}.driver", TEXT_MERGE) for name in merges]
    found = _Settings(tuple(overrides), tuple(identity.items()), excludes, tuple(sorted(files)))
    if found.files:
        with _cache_lock:
            _cache[key] = (_stamp(found.files), found)
    return found


@overload
def _entries(output: str, *, origin: Literal[False]) -> Iterator[tuple[str, str, str]]: ...
@overload
def _entries(output: str, *, origin: Literal[True]
             ) -> Iterator[tuple[tuple[str, str], str, str]]: ...
def _entries(output: str, *, origin: bool
             ) -> Iterator[tuple[str | tuple[str, str], str, str]]:
    """(scope, key, value) — or ((scope, origin), key, value) — of `git config -z
    --show-scope [--show-origin] --get-regexp` output."""
    items = output.split("\0")
    step = 3 if origin else 2
    for i in range(0, len(items) - step + 1, step):
        head = (items[i], items[i + 1]) if origin else items[i]
        key, _, value = items[i + step - 1].partition("\n")
        yield head, key, value


def _local_config_files(cwd: Path) -> list[str]:
    """The config files of the repository whose top is `cwd`, found without running git:
    its (common) `config` and a linked worktree's `config.worktree`. Empty when `cwd` holds
    no `.git`."""
    dot_git = cwd / ".git"
    try:
        if dot_git.is_dir():
            return [str(dot_git / "config"), str(dot_git / "config.worktree")]
        text = dot_git.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    if not text.startswith("gitdir:"):
        return []
    git_dir = cwd / text[len("gitdir:"):].strip()
    try:
        common = git_dir / (git_dir / "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        common = git_dir
    return [str(common / "config"), str(git_dir / "config.worktree")]


def _user_config_files() -> tuple[str, ...]:
    home = Path(os.environ.get("HOME") or "~").expanduser()
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    return (os.environ.get("GIT_CONFIG_GLOBAL") or str(home / ".gitconfig"),
            str(xdg / "git" / "config"), os.environ.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig")


def _stamp(files: tuple[str, ...] | list[str]) -> tuple[tuple[str, object, int], ...]:
    """What `files` hold now (a missing file counts too: it may appear). Their content, not
    their time: git rewrites a repository's config unchanged on every `git branch -D`, and a
    run deletes a branch per merge."""
    stamp: list[tuple[str, object, int]] = []
    for name in files:
        try:
            data = Path(name).read_bytes()
        except (OSError, ValueError):
            stamp.append((name, None, -1))
            continue
        stamp.append((name, data, len(data)))  # config files are small
    return tuple(stamp)
