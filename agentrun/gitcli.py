"""Running the git command line: one runner, one error type, an environment that never prompts.

agentrun drives git through its CLI rather than a library because the library we tried mixes
commit messages across worktrees (it writes COMMIT_EDITMSG in the shared git dir). Every call
goes through `git()` so that the same guarantees hold everywhere: paths are printed unquoted,
no editor, pager or credential prompt can stall a headless run, and a failure carries the
command and git's own stderr.

A worker's branch and worktree are untrusted: git must never run something a worker planted.
Every call disables hooks (`core.hooksPath`, so husky, lefthook and `.git/hooks` alike) and the
`core.fsmonitor` command, and git's environment carries no secrets, so even a hook that some
other path lets run finds no API key.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from agentrun.errors import AgentrunError, CannotStart
from agentrun.secrets import without_secrets

# Variables that point git at a particular repository or index. They leak in when agentrun runs
# inside a git hook (e.g. tests in a pre-push hook) and would silently redirect our commands.
_REPO_LOCAL_ENV = (
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_CONFIG", "GIT_DIR",
    "GIT_GRAFT_FILE", "GIT_IMPLICIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_NO_REPLACE_OBJECTS",
    "GIT_OBJECT_DIRECTORY", "GIT_PREFIX", "GIT_REPLACE_REF_BASE", "GIT_SHALLOW_FILE",
    "GIT_WORK_TREE",
)

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

# Configuration that would make git run a command of a worker's choosing, switched off for
# every call (a later `-c` wins over every config file).
SAFE_CONFIG = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")
# No automatic housekeeping during a run: a commit or merge would otherwise start a background
# `git maintenance`/`gc --auto` that repacks and prunes while other workers write to the same
# object store. The user's own next git command does it as usual.
NO_AUTO_MAINTENANCE = ("-c", "maintenance.auto=false", "-c", "gc.auto=0")


class GitError(AgentrunError):
    """A git command failed; the message names the command and quotes git's stderr."""

    def __init__(self, args: list[str], returncode: int, stderr: str, cwd: Path) -> None:
        command = "git " + " ".join(args)
        detail = stderr.strip() or "(no output)"
        super().__init__(
            f"`{command}` failed in {cwd} (exit {returncode}): {detail}",
            hint="run the command yourself in that directory to see the full state",
        )
        self.command = args
        self.returncode = returncode
        self.stderr = stderr
        self.cwd = cwd


def git_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a git child: ours minus repository pointers and secrets, plus
    no-prompt settings."""
    env = {k: v for k, v in without_secrets(os.environ).items() if k not in _REPO_LOCAL_ENV}
    env.update(_QUIET_ENV)
    if extra:
        env.update(extra)
    return env


def git_argv(*args: str) -> list[str]:
    """The command line of `git ARGS` with every call's fixed settings (for a caller that
    streams git's output instead of capturing it: run it with `git_env()`)."""
    return ["git", "-c", "core.quotepath=off", *SAFE_CONFIG, *NO_AUTO_MAINTENANCE, *args]


def run_git(*args: str, cwd: Path, env: dict[str, str] | None = None,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run git and return the completed process whatever its exit code.

    Output is decoded as UTF-8 with surrogateescape so that odd bytes in file names survive a
    round trip instead of raising.
    """
    argv = git_argv(*args)
    try:
        return subprocess.run(
            argv, cwd=cwd, env=git_env(env), input=stdin, capture_output=True, text=True,
            encoding="utf-8", errors="surrogateescape", check=False,
        )
    except FileNotFoundError as exc:
        if not Path(cwd).is_dir():
            raise CannotStart(f"directory does not exist: {cwd}",
                              hint="pass the path of an existing project directory") from exc
        raise CannotStart("git is not installed or not on PATH",
                          hint="install git (2.31 or newer) and try again") from exc


def git(*args: str, cwd: Path, check: bool = True, env: dict[str, str] | None = None,
        stdin: str | None = None) -> str:
    """Run git in `cwd` and return its stdout without trailing newlines.

    `env` adds to (never replaces) the environment. With check=False a failure returns
    whatever stdout git printed instead of raising.
    """
    proc = run_git(*args, cwd=cwd, env=env, stdin=stdin)
    if check and proc.returncode != 0:
        raise GitError(list(args), proc.returncode, proc.stderr, Path(cwd))
    return proc.stdout.rstrip("\n")


def split_z(output: str) -> list[str]:
    """Split NUL-separated git output (`-z`), dropping the empty tail."""
    return [item for item in output.split("\0") if item]
