"""The environment a model's command runs with: an allow-list, never the user's whole one.

A deny-list of secret-looking names misses what it cannot guess (`DATABASE_URL` with a
password in it, `PGPASSWORD`, `*_DSN`), so commands get only what a build needs: PATH, the
locale, the terminal, the time zone, who the user is, a private HOME and TMPDIR, and the names
the project lists under `command_env:` in `.specflow/config.yaml` (never a CI runner's control
files or tokens). The values of the variables left out that name secrets are returned too, so
output that echoes one is redacted.
"""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from agentrun.core.secrets import SECRET_SUFFIXES, secret_values
from agentrun.layout import import_env
from agentrun.processes import owned_temp_dir
from agentrun.removal import remove_tree
from agentrun.tools.base import CommandPolicy

ALLOWED = frozenset({"PATH", "LANG", "LANGUAGE", "TERM", "TZ", "USER", "LOGNAME", "SHELL"})
ALLOWED_PREFIXES = ("LC_",)
# a CI runner's control files and tokens (GitHub Actions): a command that could write to them
# would set variables, PATH entries or outputs for the job's later steps, or replace its
# artifacts; never passed, whatever `command_env` lists
RUNNER_CONTROL = frozenset({"GITHUB_ENV", "GITHUB_PATH", "GITHUB_OUTPUT", "GITHUB_STATE",
                            "GITHUB_STEP_SUMMARY"})
RUNNER_CONTROL_PREFIXES = ("ACTIONS_",)
# git and pagers never wait for input that will not come
NON_INTERACTIVE = {"GIT_TERMINAL_PROMPT": "0", "PAGER": "cat", "GIT_PAGER": "cat",
                   "GIT_EDITOR": "true"}
# Python leaves no bytecode caches in a worktree: they are not work, and two workers that each
# commit the same `__pycache__/*.pyc` (their tests ran) conflict when their branches merge.
NO_BYTECODE = {"PYTHONDONTWRITEBYTECODE": "1"}


def allowed_name(name: str, extra: Iterable[str] = ()) -> bool:
    """Whether a command may see the variable `name` (`extra`: the project's `command_env`)."""
    if name.upper() in RUNNER_CONTROL or name.upper().startswith(RUNNER_CONTROL_PREFIXES):
        return False
    return name in ALLOWED or name.startswith(ALLOWED_PREFIXES) or name in set(extra)


@functools.cache
def private_home() -> Path:
    """A HOME of this process's own, so a command neither reads the user's dotfiles (tokens in
    `~/.netrc`, `~/.config/gh`, ...) nor writes into them. One a killed process left is removed
    by `processes.discard_stale_temp_dirs`."""
    return owned_temp_dir("home")


def discard_private_home() -> None:
    """Remove this process's private HOME, if one was made (a worker's last act): whatever
    commands left there goes with it, and the next command gets a fresh one."""
    if private_home.cache_info().currsize:
        with contextlib.suppress(OSError):  # what commands left there: any depth
            remove_tree(private_home())
        private_home.cache_clear()


def command_env(extra: Iterable[str] = (), secret_suffixes: Iterable[str] | None = None,
                environ: Mapping[str, str] | None = None, worktree: Path | None = None
                ) -> tuple[dict[str, str], list[str]]:
    """The child environment, and the secret values of `environ` (longest first) to redact.

    A name the project allows explicitly is passed even if it looks secret: the user chose it.
    With `worktree`, the command imports that worktree's Python code first (`layout`).
    """
    source = os.environ if environ is None else environ
    extra = frozenset(extra)
    env = {name: value for name, value in source.items() if allowed_name(name, extra)}
    env["HOME"] = str(private_home())
    env["TMPDIR"] = source.get("TMPDIR") or tempfile.gettempdir()
    env.update(NON_INTERACTIVE)
    for name, value in NO_BYTECODE.items():
        env.setdefault(name, value)  # unless the project passes its own (`command_env`)
    if worktree is not None:
        env.update(import_env(worktree, env))
    return env, secret_values(source, SECRET_SUFFIXES if secret_suffixes is None
                              else secret_suffixes)


def scrubbed_env(policy: CommandPolicy, environ: Mapping[str, str] | None = None,
                 worktree: Path | None = None) -> tuple[dict[str, str], list[str]]:
    """The environment a command runs with under `policy` (in `worktree`: importing its
    code), and the secret values to redact."""
    return command_env(policy.env_allow, policy.secret_suffixes, environ, worktree)
