"""Running the git command line: one runner, one error type, one guard per subcommand.

agentrun drives git through its CLI rather than a library because the library we tried mixes
commit messages across worktrees (it writes COMMIT_EDITMSG in the shared git dir). Every call
goes through `run_git()` so that the same guarantees hold everywhere: paths are printed
unquoted, no editor, pager or credential prompt can stall a headless run, and a failure
carries the command and git's own stderr.

A worker's branch and worktree are untrusted, so every call runs with the fixed configuration
and environment of `agentrun/gitconfig.py`, and each subcommand gets the guards that no
configuration can give it:

- `status` and `diff` never look inside a nested repository (git would run `git status`
  inside it, under *its* config: an fsmonitor or a clean filter of the worker's choosing);
  `diff`, `log` and `show` run no external diff and no textconv; `add` stages only named
  paths that hold no gitlink (it always runs `git status` in a repository checked out at a
  gitlink path it visits), a whole tree is staged with plumbing (`worktrees.stage_all`).
- A commit gets an author when the repository names none (`gitconfig.identity_env`).
"""

from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path

from agentrun.core.errors import AgentrunError
from agentrun.gitconfig import extra_config, git_env, identity_env, spawn_git

# Options added right after these subcommands (see the module doc).
_NO_NESTED = "--ignore-submodules=dirty"
_NO_DIFF_PROGRAMS = ("--no-ext-diff", "--no-textconv")
_SUBCOMMAND_OPTIONS: dict[str, tuple[str, ...]] = {
    "status": (_NO_NESTED,),
    "diff": (*_NO_DIFF_PROGRAMS, _NO_NESTED),
    "diff-files": (_NO_NESTED,),
    "diff-index": (_NO_NESTED,),
    "log": _NO_DIFF_PROGRAMS,
    "show": _NO_DIFF_PROGRAMS,
}
# Subcommands that make commits: they get an identity when the repository has none.
_COMMITTING = frozenset({"commit", "merge", "commit-tree", "cherry-pick", "revert"})
_GLOBAL_OPTIONS_WITH_VALUE = frozenset({"-c", "-C", "--git-dir", "--work-tree", "--namespace",
                                        "--config-env", "--exec-path"})


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



def run_git(*args: str, cwd: Path, env: dict[str, str] | None = None,
            stdin: str | None = None,
            user_config: bool = False) -> subprocess.CompletedProcess[str]:
    """Run git and return the completed process whatever its exit code.

    `user_config` reads the user's system and global config files too (for a question about
    the user's own settings; still no hook or fsmonitor runs). Output is decoded as UTF-8
    with surrogateescape so that odd bytes in file names survive a round trip instead of
    raising.
    """
    if user_config:
        return spawn_git(list(args), cwd, git_env(env, user_config=True), stdin)
    argv, full_env = git_command(*args, cwd=cwd, env=env)
    return spawn_git(argv[1:], cwd, full_env, stdin)


def git_command(*args: str, cwd: Path | str,
                env: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The command line and environment `run_git` runs `git ARGS` in `cwd` with, every guard
    included (for a caller that streams git's output instead of capturing it)."""
    argv, extra = _guarded(list(args), Path(cwd), env)
    at = subcommand_at(argv)
    config = extra_config(argv[at] if at < len(argv) else "", cwd)
    return ["git", *argv], git_env({**extra, **(env or {})}, config=config)


def git(*args: str, cwd: Path, check: bool = True, env: dict[str, str] | None = None,
        stdin: str | None = None, user_config: bool = False) -> str:
    """Run git in `cwd` and return its stdout without trailing newlines.

    `env` adds to (never replaces) the environment. With check=False a failure returns
    whatever stdout git printed instead of raising.
    """
    proc = run_git(*args, cwd=cwd, env=env, stdin=stdin, user_config=user_config)
    if check and proc.returncode != 0:
        raise GitError(list(args), proc.returncode, proc.stderr, Path(cwd))
    return proc.stdout.rstrip("\n")


@functools.cache
def version() -> tuple[int, ...]:
    """The installed git's version, major and minor, such as (2, 39); () when it does not
    say."""
    found = re.search(r"(\d+)\.(\d+)", git("--version", cwd=Path("/")))
    return (int(found.group(1)), int(found.group(2))) if found else ()


def split_z(output: str) -> list[str]:
    """Split NUL-separated git output (`-z`), dropping the empty tail."""
    return [item for item in output.split("\0") if item]


# --- the guards of one call ------------------------------------------------------------------

def subcommand_at(args: list[str]) -> int:
    """Index of the subcommand in `args` (after git's global options); len(args) if none."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in _GLOBAL_OPTIONS_WITH_VALUE else 1
    return i


def _guarded(args: list[str], cwd: Path,
             env: dict[str, str] | None) -> tuple[list[str], dict[str, str]]:
    """`args` with the options its subcommand needs (module doc) and the environment
    variables it needs (an identity for a commit)."""
    at = subcommand_at(args)
    if at >= len(args):
        return args, {}
    name = args[at]
    args = [*args[:at + 1], *_SUBCOMMAND_OPTIONS.get(name, ()), *args[at + 1:]]
    if name == "add":
        _check_add(args, cwd, env)
    extra = identity_env(cwd) if name in _COMMITTING else {}
    return args, extra


def _check_add(args: list[str], cwd: Path, env: dict[str, str] | None) -> None:
    """`git add` of the paths named after `--` only, none of them holding a gitlink of the
    index: for each gitlink it visits, `git add` runs `git status` in the repository checked
    out there, whatever the configuration says (stage a whole tree with
    `worktrees.stage_all`, which never does)."""
    paths = args[args.index("--") + 1:] if "--" in args else []
    if not paths:
        raise ValueError("agentrun's `git add` takes the paths to stage after `--`; stage a "
                         "whole tree with worktrees.stage_all")
    folders = [p.rstrip("/") for p in paths
               if p.startswith(":") or any(c in p for c in "*?[") or p in (".", "")
               or ((cwd / p).is_dir() and not (cwd / p).is_symlink())]
    if not folders:
        return
    proc = spawn_git(["ls-files", "-z", "--stage"], cwd, git_env(env), None)
    links = [entry.split("\t", 1)[1] for entry in split_z(proc.stdout)
             if entry.startswith("160000 ") and "\t" in entry]
    for link in links:
        if any(p in ("", ".") or p.startswith(":") or any(c in p for c in "*?[")
               or link == p or link.startswith(p + "/") for p in folders):
            raise ValueError(f"agentrun's `git add` would visit the gitlink {link} (and run "
                             "`git status` in a repository checked out there); name the "
                             "files to stage instead")

