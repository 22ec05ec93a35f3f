"""Real git repositories for tests, built with the plain git CLI.

These helpers deliberately do not use agentrun.workspace, so tests of that module check it
against git itself rather than against its own code. Import them as `from gitutil import ...`
(pytest puts tests/ on sys.path).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

IDENTITY = {"user.name": "Test Author", "user.email": "test@example.invalid"}
Content = str | bytes


def run_git(cwd: Path, *args: str, env: Mapping[str, str] | None = None) -> str:
    """Run git, fail the test with git's stderr if it fails, return stdout without the last
    newline."""
    full_env = {**os.environ, "GIT_EDITOR": "true", "GIT_TERMINAL_PROMPT": "0", **(env or {})}
    proc = subprocess.run(["git", "-c", "core.quotepath=off", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed in {cwd}: {proc.stderr.strip()}")
    return proc.stdout.rstrip("\n")


def isolate_git_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Point git at an empty global config and no system config for the rest of the test.

    Returns the global config file, so a test can assert it was left untouched.
    """
    gitconfig = tmp_path / "global.gitconfig"
    gitconfig.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_AUTHOR_NAME",
                "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"):
        monkeypatch.delenv(var, raising=False)
    return gitconfig


def write_files(root: Path, files: Mapping[str, Content]) -> None:
    """Write files relative to `root`, creating directories; bytes are written as-is."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8", newline="")


def init_repo(path: Path, files: Mapping[str, Content] | None = None, *,
              branch: str = "main", identity: bool = True) -> Path:
    """Create a repository at `path` with one commit holding `files` (a README by default).

    With identity=False no user.name/email is configured in the repository.
    """
    path.mkdir(parents=True, exist_ok=True)
    run_git(path, "init", "-q", "-b", branch)
    run_git(path, "config", "commit.gpgsign", "false")
    if identity:
        for key, value in IDENTITY.items():
            run_git(path, "config", key, value)
    write_files(path, files if files is not None else {"README.md": "# test\n"})
    run_git(path, "add", "-A")
    env = None if identity else {"GIT_AUTHOR_NAME": "Init", "GIT_AUTHOR_EMAIL": "init@x.invalid",
                                 "GIT_COMMITTER_NAME": "Init",
                                 "GIT_COMMITTER_EMAIL": "init@x.invalid"}
    run_git(path, "commit", "-q", "-m", "initial", env=env)
    return path


def commit_files(root: Path, files: Mapping[str, Content], message: str = "change",
                 delete: tuple[str, ...] = ()) -> str:
    """Write `files`, delete `delete`, commit everything, and return the new HEAD sha."""
    write_files(root, files)
    for rel in delete:
        (root / rel).unlink()
    run_git(root, "add", "-A")
    run_git(root, "commit", "-q", "-m", message)
    return head(root)


def head(root: Path) -> str:
    return run_git(root, "rev-parse", "HEAD")


def branch_of(root: Path) -> str:
    return run_git(root, "rev-parse", "--abbrev-ref", "HEAD")


def status(root: Path) -> str:
    """`git status --porcelain` including untracked files: empty means clean."""
    return run_git(root, "status", "--porcelain", "--untracked-files=all")


def tree_files(root: Path, *, skip: tuple[str, ...] = (".git",)) -> dict[str, bytes]:
    """Every file under `root` (symlinks as their target text) mapped to its bytes, for exact
    before/after comparisons. Top-level names in `skip` are left out."""
    found: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root)
        if rel_dir == Path("."):
            dirnames[:] = [d for d in dirnames if d not in skip]
            filenames = [f for f in filenames if f not in skip]
        for name in filenames + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]:
            full = Path(dirpath) / name
            rel = (rel_dir / name).as_posix()
            found[rel] = (b"-> " + os.readlink(full).encode() if full.is_symlink()
                          else full.read_bytes())
    return found


def commit_all(tree: Path, message: str) -> str | None:
    """agentrun's commit of everything in `tree` (`worktrees.commit_changes`): the new sha, or
    None when there was nothing to commit."""
    from agentrun.worktrees import commit_changes

    return head(tree) if commit_changes(tree, message) else None
