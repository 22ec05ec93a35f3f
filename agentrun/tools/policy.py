"""The command deny list for `run_command`: a guardrail against destructive or outward-reaching
commands that a model may type by accident (push, hard reset, sudo, writes outside the
worktree or into `.git` and `.specflow`). It is not a sandbox: `run_command` executes arbitrary
shell code by design, and what a worker writes is judged again before it merges
(`run.policy`).

(Path confinement for the file tools is `tools.paths`; the command environment is
`tools.environment`.)
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from agentrun.core.errors import BadInput
from agentrun.tools.paths import is_control_name, is_git_name, within


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
_OWN_HINT = ("git's files and agentrun's (specs, run records, configuration) are the "
             "orchestrator's to write; a change there would not be merged")
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
        if _into_own(target, root_real):
            return Refusal(f"redirection writes into .git or .specflow ({target})", _OWN_HINT)
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
        if _into_own(target, root_real):
            return Refusal(f"{name} into .git or .specflow ({target})", _OWN_HINT)
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
        if _into_own(target, root_real):
            return Refusal(f"rm in .git or .specflow ({target})", _OWN_HINT)
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
        return not within(os.path.realpath(os.path.join(root_real, norm)), root_real)
    if within(real, root_real):
        return False
    if within(root_real, real):
        return True  # an ancestor of the worktree
    return not any(within(real, tmp) and real != tmp for tmp in _temp_roots())


def _into_own(target: str, root_real: str) -> bool:
    """Whether a write/delete target inside the worktree lies in a `.git` or `.specflow`
    folder (in any case), by its name or, through symlinks, by its real path."""
    if target.startswith("$") or target.isdigit() or target == "-":
        return False
    full = os.path.realpath(os.path.join(root_real, target))
    if not within(full, root_real):
        return False
    parts = [*posixpath.normpath(target).split("/"),
             *os.path.relpath(full, root_real).split(os.sep)]
    return any(is_git_name(p) or is_control_name(p) for p in parts)


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
