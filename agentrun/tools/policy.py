"""Safety rules for worker tools: path confinement, the command deny list, secret scrubbing.

Paths: every path a tool touches must resolve inside the worktree root. `resolve_path` checks a
path once; `open_beneath` then opens it component by component with `O_NOFOLLOW` relative to a
directory fd held open from the root, so a symlink swapped in after the check cannot redirect
the open outside the root.

Commands: the deny list is a guardrail against destructive or outward-reaching commands that a
model may type by accident (push, hard reset, sudo, writes outside the worktree). It is not a
sandbox: `run_command` executes arbitrary shell code by design.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import re
import shlex
import stat
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from agentrun.errors import BadInput
from agentrun.tools.base import CommandPolicy
from agentrun.tools.environment import command_env
from agentrun.tools.environment import secret_values as environment_secrets
from agentrun.tools.redaction import REDACTED as REDACTED  # re-exported for callers
from agentrun.tools.redaction import redact as redact


class PathDenied(Exception):
    """A path leaves the worktree (by `..`, an absolute path or a symlink)."""


# --------------------------------------------------------------------------------------- paths

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_HINT = "paths must stay inside the worktree (use a path relative to its root)"


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def resolve_path(root: Path | str, path: str, *, must_exist: bool = False) -> Path:
    """The real absolute path of `path` (relative to `root`, or absolute inside it).

    Raises `PathDenied` when the path escapes the root lexically (`..`), is absolute outside
    it, or reaches outside through a symlink at any component; `FileNotFoundError` when
    `must_exist` and nothing is there.
    """
    if "\0" in path:
        raise PathDenied(f"{path!r}: a path cannot contain a NUL byte")
    if path.startswith("~"):
        raise PathDenied(f"{path!r} points into a home directory, outside the worktree; {_HINT}")
    root_real = os.path.realpath(root)
    if os.path.isabs(path):
        candidate = path
    else:
        norm = posixpath.normpath(path) if path else "."
        if norm == ".." or norm.startswith("../"):
            raise PathDenied(f"{path!r} uses '..' to leave the worktree; {_HINT}")
        candidate = os.path.join(root_real, norm)
    real = os.path.realpath(candidate)
    if not _within(real, root_real):
        how = "is outside the worktree" if os.path.isabs(path) else "resolves outside the worktree"
        via = " through a symlink" if not os.path.isabs(path) else ""
        raise PathDenied(f"{path!r} {how}{via}; {_HINT}")
    if must_exist and not os.path.lexists(real):
        raise FileNotFoundError(f"{path!r} does not exist")
    return Path(real)


def display_path(root: Path | str, real: Path | str) -> str:
    """`real` relative to the root with `/` separators (`.` for the root itself)."""
    rel = os.path.relpath(real, os.path.realpath(root))
    return rel.replace(os.sep, "/")


def _parts_beneath(root_real: str, target: Path | str) -> list[str]:
    target = os.fspath(target)
    if not os.path.isabs(target):
        target = os.path.join(root_real, target)
    rel = os.path.relpath(os.path.normpath(target), root_real)
    if rel == ".." or rel.startswith(".." + os.sep) or os.path.isabs(rel):
        raise PathDenied(f"{target!r} is outside the worktree; {_HINT}")
    return [] if rel == "." else rel.split(os.sep)


def _denied_symlink(name: str) -> PathDenied:
    return PathDenied(f"{name!r} is a symlink that appeared while the path was in use; "
                      "refusing to follow it")


def _step(dir_fd: int, name: str, make_parents: bool) -> int:
    """Open the sub-directory `name` of `dir_fd` without following a symlink."""
    for _ in range(2):
        try:
            return os.open(name, DIR_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            if not make_parents:
                raise
            with contextlib.suppress(FileExistsError):  # created concurrently: open it next pass
                os.mkdir(name, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_symlink(dir_fd, name):
                raise _denied_symlink(name) from exc
            raise
    return os.open(name, DIR_FLAGS, dir_fd=dir_fd)


def _is_symlink(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def open_parent_beneath(root: Path | str, target: Path | str, *,
                        make_parents: bool = False) -> tuple[int, str]:
    """Open the directory that holds `target` by walking down from the root without following
    symlinks; return `(dir_fd, final_name)`. The caller closes the fd."""
    root_real = os.path.realpath(root)
    parts = _parts_beneath(root_real, target)
    if not parts:
        raise PathDenied("the worktree root itself has no parent inside the worktree")
    dir_fd = os.open(root_real, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            child = _step(dir_fd, part, make_parents)
            os.close(dir_fd)
            dir_fd = child
    except BaseException:
        os.close(dir_fd)
        raise
    return dir_fd, parts[-1]


def open_beneath(root: Path | str, target: Path | str, flags: int = os.O_RDONLY,
                 mode: int = 0o666, *, make_parents: bool = False) -> int:
    """Open `target` (inside `root`) with `O_NOFOLLOW` on every component; return the fd.

    Sound against a symlink swapped in after `resolve_path` checked the path: the open fails
    with `PathDenied` instead of following it.
    """
    root_real = os.path.realpath(root)
    if not _parts_beneath(root_real, target):
        return os.open(root_real, flags | os.O_CLOEXEC)
    dir_fd, name = open_parent_beneath(root, target, make_parents=make_parents)
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_symlink(dir_fd, name):
            raise _denied_symlink(name) from exc
        raise
    finally:
        os.close(dir_fd)


def open_dir_beneath(root: Path | str, target: Path | str) -> int:
    """A directory fd for `target` inside `root`, opened without following symlinks."""
    return open_beneath(root, target, os.O_RDONLY | os.O_DIRECTORY)


# ------------------------------------------------------------------------------ command policy

@dataclass(frozen=True)
class Refusal:
    """Why a command was refused: the rule it hit and what to do instead."""

    rule: str
    hint: str

    def message(self) -> str:
        return f"command refused by policy: {self.rule}; {self.hint}"


Rule = tuple[re.Pattern[str], str, str]  # (regex, rule shown to the model, hint)


def _rules(*specs: tuple[str, str, str]) -> list[Rule]:
    return [(re.compile(pattern), rule, hint) for pattern, rule, hint in specs]


# Matched against each simple command after normalisation (see `_canonical`).
_SEGMENT_RULES = _rules(
    (r"^git push(?:\s|$)", "git push",
     "commit locally; the orchestrator merges and pushes the work"),
    (r"^git reset\s(?:.*\s)?--hard(?:\s|$)", "git reset --hard",
     "undo specific changes with `git restore <path>` or `git revert`"),
    (r"^git clean\s(?:.*\s)?-[a-zA-Z]*[xX]", "git clean -x",
     "it deletes ignored files such as .env and caches; remove specific paths instead"),
    (r"^git config\s(?:.*\s)?--(?:global|system)(?:\s|=|$)", "git config --global/--system",
     "configure this repository only (`git config <key> <value>`)"),
    (r"^(?:sudo|doas|su|pkexec|runuser)(?:\s|$)", "privilege escalation (sudo, su)",
     "run the command without elevated privileges"),
    (r"^(?:shutdown|reboot|halt|poweroff)(?:\s|$)|^init [06](?:\s|$)"
     r"|^systemctl (?:poweroff|reboot|halt)(?:\s|$)",
     "shutdown or reboot", "never stop the machine"),
    (r"^(?:mkfs|fdisk|sfdisk|parted|wipefs)(?:\s|\.|$)", "disk formatting (mkfs, fdisk)",
     "never touch disks or partitions"),
    (r"^dd\s(?:.*\s)?of=/dev/(?!null\b|stdout\b|stderr\b)", "dd onto a device",
     "write to a file inside the worktree instead"),
)

# Matched against the whole command line (whitespace collapsed): they span pipes.
_WHOLE_RULES = _rules(
    (r"\b(?:curl|wget)\b[^;&]*\|\s*(?:sudo\s+)?(?:\S*/)?"
     r"(?:sh|bash|zsh|dash|ksh|python[0-9.]*|perl|ruby|node)\b",
     "piping a download into a shell (curl | sh)",
     "download to a file inside the worktree and read it first"),
    (r"\b(?:sh|bash|zsh|dash|ksh|eval|source)\b[^;&|]*(?:<\(|\$\()\s*(?:curl|wget)\b",
     "running a downloaded script (sh <(curl ...))",
     "download to a file inside the worktree and read it first"),
    (r":\s*\(\s*\)\s*\{[^}]*:\s*\|\s*:", "fork bomb", "never do this"),
)

_OUTSIDE_HINT = "keep file changes inside the worktree (temporary files may go under /tmp)"
_SHELLS = {"sh", "bash", "zsh", "dash", "ksh"}
_KEYWORDS = {"then", "do", "else", "elif", "if", "while", "until", "!", "{", "}"}
_WRAPPER_VALUE_OPTS = {
    "command": set(), "builtin": set(), "exec": {"-a"}, "nohup": set(),
    "time": {"-f", "-o", "--format", "--output"},
    "env": {"-u", "--unset", "-C", "--chdir", "-S", "--split-string"},
    "nice": {"-n", "--adjustment"}, "ionice": {"-c", "-n", "-p", "--class", "--classdata"},
    "timeout": {"-s", "--signal", "-k", "--kill-after"},
    "stdbuf": {"-i", "-o", "-e"},
    "xargs": {"-n", "-I", "-L", "-P", "-d", "-E", "-s", "-a", "--max-args", "--max-procs",
              "--delimiter", "--arg-file", "--replace", "--max-lines"},
}
_GIT_VALUE_OPTS = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env",
                   "--exec-path"}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\+?=")
_REDIRECTS = {">", ">>", ">|", "&>", "&>>", ">&", "<>"}
_INPUTS = {"<", "<<", "<<<", "<<-"}
_SAFE_DEVICES = {"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/zero"}
_MAX_DEPTH = 4


def compile_deny(patterns: Iterable[str]) -> list[re.Pattern[str]]:
    """Compile extra deny regexes from configuration; a bad one is the user's to fix."""
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern))
        except re.error as exc:
            raise BadInput(f"invalid deny pattern {pattern!r} in the command policy: {exc}",
                           "fix or remove the pattern under the command policy's `deny` list") \
                from exc
    return compiled


def check_command(command: str, root: Path | str,
                  extra: Iterable[str | re.Pattern[str]] = ()) -> Refusal | None:
    """The first policy rule `command` breaks, or None when it may run.

    Each simple command is normalised first (env assignments, `command`/`env`/`nohup`/...
    wrappers, git global options and quoting removed; `sh -c`, `eval`, `$(...)` and
    backticks checked recursively), so `FOO=1 command git -C . push` still reads `git push`.
    """
    patterns = [p if isinstance(p, re.Pattern) else compile_deny([p])[0] for p in extra]
    return _check(command, os.path.realpath(root), patterns, 0)


def _check(command: str, root_real: str, extra: list[re.Pattern[str]],
           depth: int) -> Refusal | None:
    if depth > _MAX_DEPTH:
        return Refusal("command nested too deeply to check", "simplify the command")
    flat = " ".join(command.split())
    for regex, rule, hint in _WHOLE_RULES:
        if regex.search(flat):
            return Refusal(rule, hint)
    for regex in extra:
        if regex.search(flat):
            return Refusal(f"matches deny pattern {regex.pattern!r}", "do this another way")
    for inner in re.findall(r"\$\(([^()]*)\)", command) + re.findall(r"`([^`]*)`", command):
        found = _check(inner, root_real, extra, depth + 1)
        if found:
            return found
    segments, targets = _split(command)
    for target in targets:
        if _escapes(target, root_real):
            return Refusal(f"redirection writes outside the worktree ({target})", _OUTSIDE_HINT)
    for words in segments:
        found = _check_segment(_canonical(words), root_real, extra, depth)
        if found:
            return found
    return None


def _check_segment(words: list[str], root_real: str, extra: list[re.Pattern[str]],
                   depth: int) -> Refusal | None:
    if not words:
        return None
    text = " ".join(words)
    for regex, rule, hint in _SEGMENT_RULES:
        if regex.search(text):
            return Refusal(rule, hint)
    for regex in extra:
        if regex.search(text):
            return Refusal(f"matches deny pattern {regex.pattern!r}", "do this another way")
    name, args = words[0], words[1:]
    if name == "rm":
        return _check_rm(args, root_real)
    for target in _write_targets(name, args):
        if _escapes(target, root_real):
            return Refusal(f"{name} outside the worktree ({target})", _OUTSIDE_HINT)
    if name in _SHELLS:
        script = _shell_script(args)
        if script is not None:
            return _check(script, root_real, extra, depth + 1)
    if name == "eval" and args:
        return _check(" ".join(args), root_real, extra, depth + 1)
    if name == "find":
        for i, word in enumerate(args):
            if word in ("-exec", "-execdir", "-ok", "-okdir"):
                rest = args[i + 1:]
                end = next((j for j, w in enumerate(rest) if w in (";", "+", "\\;")), len(rest))
                found = _check_segment(_canonical(rest[:end]), root_real, extra, depth + 1)
                if found:
                    return found
    return None


def _check_rm(args: list[str], root_real: str) -> Refusal | None:
    recursive = any(a == "--recursive" or (a.startswith("-") and not a.startswith("--")
                                           and ("r" in a or "R" in a)) for a in args)
    for target in _operands(args):
        if _escapes(target, root_real):
            return Refusal(f"rm outside the worktree ({target})", _OUTSIDE_HINT)
        if recursive and not target.startswith("$") and os.path.realpath(
                os.path.join(root_real, target)) == root_real:
            return Refusal(f"rm -r of the whole worktree ({target})",
                           "remove specific files or directories instead")
    return None


_ALL_OPERANDS = {"chmod", "chown", "chgrp", "tee", "truncate", "shred", "mv", "touch", "mkdir",
                 "rmdir", "unlink"}
_LAST_OPERAND = {"cp", "ln", "install", "rsync"}


def _write_targets(name: str, args: list[str]) -> list[str]:
    """The paths a file command changes: every operand of `mv`/`touch`/`chmod`/..., the
    destination of `cp`/`ln`/..., the files of `sed -i`. Sources may be read from anywhere."""
    operands = _operands(args)
    if name in _ALL_OPERANDS:
        return operands
    if name in _LAST_OPERAND:
        return operands[-1:] if len(operands) > 1 else []
    if name == "sed" and any(a.startswith("-i") or a == "--in-place" for a in args):
        return operands
    return []


def _operands(args: list[str]) -> list[str]:
    """Non-option words (everything after `--` counts as an operand)."""
    out, options_done = [], False
    for arg in args:
        if options_done or not arg.startswith("-") or arg == "-":
            out.append(arg)
        elif arg == "--":
            options_done = True
    return out


def _shell_script(args: list[str]) -> str | None:
    """The script of `bash -c SCRIPT` (also `-lc`, `-ec`), if that is how the shell was run."""
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
        elif arg in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            skip = True  # the option's value follows
        elif arg.startswith("-") and not arg.startswith("--") and "c" in arg[1:]:
            rest = [a for a in args[i + 1:] if not a.startswith("-")]
            return rest[0] if rest else None
        elif not arg.startswith(("-", "+")):
            return None
    return None


def _temp_roots() -> set[str]:
    return {os.path.realpath(p) for p in ("/tmp", "/var/tmp", tempfile.gettempdir())}


def _escapes(target: str, root_real: str) -> bool:
    """Whether a write/delete target lies outside the worktree. An absolute path into a temp
    directory is allowed; a relative one must stay inside (even through symlinks)."""
    if target.startswith("~") or re.match(r"\$\{?HOME\b", target):
        return True
    if target.startswith("$") or target.isdigit() or target == "-":
        return False  # an unknown variable or an fd number: nothing to judge
    if os.path.isabs(target):
        if target in _SAFE_DEVICES or target.startswith("/dev/fd/"):
            return False
        real = os.path.realpath(target)
    else:
        norm = posixpath.normpath(target)
        if norm == ".." or norm.startswith("../"):
            return True
        return not _within(os.path.realpath(os.path.join(root_real, norm)), root_real)
    if _within(real, root_real):
        return False
    if _within(root_real, real):
        return True  # an ancestor of the worktree
    return not any(_within(real, tmp) and real != tmp for tmp in _temp_roots())


def _split(command: str) -> tuple[list[list[str]], list[str]]:
    """Simple commands (as word lists) and output-redirection targets of a shell command."""
    text = command.replace("\\\n", " ").replace("\n", " ; ").replace("`", " ; ")
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        tokens = list(lexer)
    except ValueError:  # unbalanced quotes: judge the bare words
        tokens = re.sub(r"[\"']", " ", text).split()
    segments: list[list[str]] = [[]]
    targets: list[str] = []
    expect: str | None = None
    for token in tokens:
        if expect is not None:
            if expect == "out":
                targets.append(token)
            expect = None
            continue
        if token and all(c in "();<>|&" for c in token):
            if token in _REDIRECTS:
                expect = "out"
                continue
            if token in _INPUTS:
                expect = "in"
                continue
            segments.append([])
            if ">" in token:
                expect = "out"
            continue
        segments[-1].append(token)
    return [s for s in segments if s], targets


def _canonical(words: list[str]) -> list[str]:
    """Drop assignments, shell keywords and wrappers; reduce `/usr/bin/git` to `git`;
    drop git's global options so the subcommand comes second."""
    words = list(words)
    while words:
        base = _basename(words[0])
        if _ASSIGNMENT.match(words[0]) or base in _KEYWORDS:
            words.pop(0)
            continue
        if base in _WRAPPER_VALUE_OPTS:
            words.pop(0)
            takes_value = _WRAPPER_VALUE_OPTS[base]
            while words and words[0].startswith("-") and words[0] != "-":
                option = words.pop(0)
                if option in takes_value and words:
                    words.pop(0)
            if base == "timeout" and words:
                words.pop(0)  # the duration
            continue
        break
    if not words:
        return words
    words[0] = _basename(words[0])
    if words[0] == "git":
        rest = words[1:]
        while rest and rest[0].startswith("-"):
            option = rest.pop(0)
            if option in _GIT_VALUE_OPTS and rest:
                rest.pop(0)
        words = ["git", *rest]
    return words


def _basename(word: str) -> str:
    return word.lstrip("\\").rsplit("/", 1)[-1]


# --------------------------------------------------------------------------------- environment

def scrubbed_env(policy: CommandPolicy,
                 environ: Mapping[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    """The child environment (allow-listed: environment.py) and the secret values to redact."""
    return command_env(policy.env_allow, policy.secret_suffixes, environ)


def secret_values(policy: CommandPolicy, environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of the secret variables of this process, longest first, for `redact`."""
    return environment_secrets(environ, policy.secret_suffixes)
