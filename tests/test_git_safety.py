"""agentrun's own git commands never run what a worker planted, and never carry secrets.

Each test first shows that plain git *does* run the planted command in the same repository, so
the test fails if agentrun's git calls stop disabling it.
"""

from __future__ import annotations

import stat
from pathlib import Path

from gitutil import commit_all, commit_files, init_repo, run_git

from agentrun import gitcli, merging, workspace
from agentrun.gitconfig import git_env


def _plant(path: Path, marker: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho ran >> {marker}\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def test_hooks_in_the_git_dir_do_not_run_on_our_commits(tmp_path):
    repo = init_repo(tmp_path / "r", {"a.txt": "a\n"})
    marker = tmp_path / "hook-ran"
    for name in ("pre-commit", "post-commit", "commit-msg"):
        _plant(repo / ".git" / "hooks" / name, marker)
    commit_files(repo, {"b.txt": "b\n"}, "plain git runs hooks")
    assert marker.exists()
    marker.unlink()

    (repo / "c.txt").write_text("c\n")
    assert commit_all(repo, "ours does not")
    assert not marker.exists()


def test_tracked_hooks_path_does_not_run_on_our_merge(tmp_path):
    repo = init_repo(tmp_path / "r", {"a.txt": "a\n"})
    marker = tmp_path / "hook-ran"
    _plant(repo / ".husky" / "post-merge", marker)
    _plant(repo / ".husky" / "pre-merge-commit", marker)
    commit_files(repo, {".husky/post-merge": (repo / ".husky/post-merge").read_text()}, "husky")
    run_git(repo, "config", "core.hooksPath", ".husky")
    base = run_git(repo, "rev-parse", "HEAD")
    main = run_git(repo, "branch", "--show-current")
    run_git(repo, "switch", "-q", "-c", "feature")
    commit_files(repo, {"f.txt": "f\n"}, "feature")
    run_git(repo, "switch", "-q", main)
    run_git(repo, "merge", "-q", "--no-ff", "-m", "plain merge", "feature")
    assert marker.exists()
    marker.unlink()
    run_git(repo, "reset", "-q", "--hard", base)

    merged = merging.merge_branch(repo, "feature", "our merge")
    assert merged.ok
    assert not marker.exists()


def test_fsmonitor_command_does_not_run_on_our_status(tmp_path):
    repo = init_repo(tmp_path / "r", {"a.txt": "a\n"})
    marker = tmp_path / "fsmonitor-ran"
    _plant(tmp_path / "monitor.sh", marker)
    run_git(repo, "config", "core.fsmonitor", str(tmp_path / "monitor.sh"))
    run_git(repo, "status", "--porcelain")
    assert marker.exists()
    marker.unlink()

    (repo / "a.txt").write_text("changed\n")
    assert workspace.dirty_paths(repo) == ["a.txt"]
    assert not marker.exists()


def test_git_gets_no_secrets(monkeypatch, tmp_path):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-value")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secret_value")
    monkeypatch.setenv("MY_SERVICE_SECRET", "hush-hush")
    monkeypatch.setenv("HARMLESS", "keep-me")
    env = git_env()
    assert not {"ANTHROPIC_API_KEY", "GITHUB_TOKEN", "MY_SERVICE_SECRET"} & set(env)
    assert env["HARMLESS"] == "keep-me"

    # what any command git starts (a hook, a filter) would see: git's own child environment
    repo = init_repo(tmp_path / "r", {"a.txt": "a\n"})
    seen = gitcli.git("-c", "alias.envdump=!env", "envdump", cwd=repo)
    assert "HARMLESS=keep-me" in seen
    for value in ("sk-ant-secret-value", "ghp_secret_value", "hush-hush"):
        assert value not in seen



def test_our_commits_start_no_housekeeping(monkeypatch, tmp_path):
    """After a commit git starts `git maintenance run --auto` (or `gc --auto`), which may
    repack and prune; agentrun's commits, made while other workers write to the same object
    store, leave that to the user's own next git command."""
    repo = init_repo(tmp_path / "r", {"a.txt": "a\n"})
    trace = tmp_path / "trace"
    monkeypatch.setenv("GIT_TRACE", str(trace))
    commit_files(repo, {"b.txt": "b\n"}, "plain git")
    assert "maintenance" in trace.read_text() or "'gc'" in trace.read_text()
    trace.unlink()

    (repo / "c.txt").write_text("c\n")
    assert commit_all(repo, "ours")
    assert "built-in: git commit" in trace.read_text()  # traced, and
    assert "maintenance" not in trace.read_text() and "'gc'" not in trace.read_text()
