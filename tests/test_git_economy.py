"""The shortcuts that spare git processes and CPU in a wave's tail keep every guarantee of the
long way: a fresh checkout's index is trusted and still sees a change made in its first second;
a worker's checkout yields the CPU; the target check, the merge's look at what a branch writes
and the repository's settings each ask git less, and answer the same, also where the short way
cannot (a tag named like the branch, several merge bases, a settings file rewritten unchanged);
and the merge takes the verified commit, not whatever its branch holds by then.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from gitutil import commit_files, head, init_repo, run_git
from test_run_target import Repo

from agentrun import gitconfig, merging, workspace
from agentrun.worktrees import create_worktree, index_path, populate_worktree

FILES = {f"pkg/mod{i % 5}/file{i}.txt": f"content {i}\n" for i in range(60)}


def _racy(worktree: Path) -> list[str]:
    """Index entries git cannot trust by their stat: modified in the second the index was
    written, or later (git then reads the file again on every command)."""
    index_second = int(os.stat(index_path(worktree)).st_mtime)
    listing = run_git(worktree, "ls-files", "--debug")
    racy, path = [], ""
    for line in listing.splitlines():
        if not line.startswith(" "):
            path = line
            continue
        found = re.match(r"\s+mtime: (\d+):", line)
        if found and int(found.group(1)) >= index_second:
            racy.append(path)
    return racy


def test_a_fresh_checkout_is_trusted_by_git_and_sees_a_change_in_its_first_second(tmp_path):
    repo = init_repo(tmp_path / "r", FILES)
    # the control: a plain checkout leaves entries git cannot trust (unless the checkout
    # happened to straddle a second: try again)
    for attempt in range(3):
        plain = create_worktree(repo, tmp_path / f"plain{attempt}", f"plain{attempt}", "HEAD",
                                checkout=False).path
        run_git(plain, "read-tree", "-u", "--reset", "HEAD")
        if _racy(plain):
            break
    else:
        pytest.fail("a plain checkout never left a racy entry")

    wt = create_worktree(repo, tmp_path / "wt", "wt", "HEAD", checkout=False).path
    assert populate_worktree(wt)
    assert _racy(wt) == []
    assert run_git(wt, "status", "--porcelain") == ""
    # a change that keeps the size, made at once: git must see it all the same
    target = wt / "pkg/mod1/file1.txt"
    target.write_text(target.read_text().upper())
    assert run_git(wt, "diff-files", "--name-only") == "pkg/mod1/file1.txt"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a per-thread nice is Linux's")
def test_the_background_checkout_and_its_git_yield_the_cpu():
    from agentrun.worker import _CHECKOUT_NICENESS, _yield_cpu

    def niceness_of_a_child(lower: bool) -> int:
        seen: list[int] = []

        def run() -> None:
            if lower:
                _yield_cpu()
            seen.append(int(subprocess.run(["nice"], capture_output=True, text=True,
                                           check=True).stdout))

        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
        return seen[0]

    base = os.getpriority(os.PRIO_PROCESS, 0)
    assert niceness_of_a_child(False) == base  # the control: a thread as it comes
    assert niceness_of_a_child(True) == min(19, base + _CHECKOUT_NICENESS)
    assert os.getpriority(os.PRIO_PROCESS, 0) == base  # the worker's own threads keep theirs


def test_checked_out_names_the_branch_and_head_as_the_two_calls_do(tmp_path):
    repo = init_repo(tmp_path / "r")
    sha = head(repo)
    assert workspace.checked_out(repo) == ("main", sha) == (
        workspace.current_branch(repo), workspace.resolve_ref(repo, "HEAD"))
    run_git(repo, "checkout", "-q", "--detach")
    assert workspace.checked_out(repo) == (None, sha)
    empty = tmp_path / "empty"
    empty.mkdir()
    run_git(empty, "init", "-q", "-b", "fresh")
    assert workspace.checked_out(empty) == ("fresh", None)


@pytest.mark.parametrize("tag_first", [False, True])
def test_a_tag_named_like_the_branch_is_not_a_moved_target(tmp_path, tag_first):
    t = Repo(tmp_path)
    if tag_first:  # the run recorded the branch as git spells it then: heads/main
        run_git(t.root, "tag", "main")
        t.state.target_branch = workspace.current_branch(t.root) or ""
        assert t.state.target_branch == "heads/main"
    g1 = t.work("G1")
    run_git(t.root, "tag", "-f", "main", t.base)
    assert workspace.current_branch(t.root) == "heads/main"  # the control: the long spelling
    assert t.target.problem() is None
    assert t.lander.merge("G1", g1)
    run_git(t.root, "checkout", "-q", "--detach")
    assert "HEAD is detached" in (t.target.problem() or "")


def _criss_cross(tmp_path: Path) -> tuple[Path, str]:
    """`main` and `work` each merged the other's first commit: they have two merge bases."""
    repo = init_repo(tmp_path / "r")
    run_git(repo, "branch", "work")
    commit_files(repo, {"a.txt": "a\n"}, "main a")
    a = head(repo)
    run_git(repo, "checkout", "-q", "work")
    commit_files(repo, {"b.txt": "b\n"}, "work b")
    b = head(repo)
    run_git(repo, "merge", "-q", "--no-ff", "--no-edit", a)
    commit_files(repo, {"x.txt": "the branch's\n"}, "work writes x")
    run_git(repo, "checkout", "-q", "main")
    run_git(repo, "merge", "-q", "--no-ff", "--no-edit", b)
    return repo, "work"


def test_a_file_in_the_way_refuses_a_merge_whose_branch_has_several_merge_bases(tmp_path):
    repo, branch = _criss_cross(tmp_path)
    # the control: git finds two merge bases, and the one-call look at the branch cannot
    assert len(run_git(repo, "merge-base", "--all", "HEAD", branch).split()) == 2
    one_call = subprocess.run(["git", "diff-tree", "-r", "--merge-base", "HEAD", branch],
                              cwd=repo, capture_output=True, text=True, check=False)
    assert one_call.returncode != 0
    (repo / "x.txt").write_text("the user's own\n")
    before = head(repo)
    result = merging.merge_branch(repo, branch, "Merge work")
    assert not result.ok and result.in_the_way == ["x.txt"]
    assert head(repo) == before and (repo / "x.txt").read_text() == "the user's own\n"
    (repo / "x.txt").unlink()
    assert merging.merge_branch(repo, branch, "Merge work", head=before).ok
    assert (repo / "x.txt").read_text() == "the branch's\n"


def test_the_repository_settings_are_read_again_only_when_their_content_changes(
        tmp_path, monkeypatch):
    repo = init_repo(tmp_path / "r")
    run_git(repo, "branch", "doomed")
    reads: list[list[str]] = []
    spawn = gitconfig.spawn_git

    def counting(argv, cwd, env, stdin):
        if argv[:1] == ["config"] and Path(cwd) == repo:
            reads.append(argv)
        return spawn(argv, cwd, env, stdin)

    monkeypatch.setattr(gitconfig, "spawn_git", counting)
    first = gitconfig.extra_config("merge", repo)
    config = repo / ".git" / "config"
    stamp = os.stat(config).st_mtime_ns
    run_git(repo, "branch", "-D", "doomed")  # git writes its config again, unchanged
    assert os.stat(config).st_mtime_ns != stamp  # the control: the file was rewritten
    assert gitconfig.extra_config("merge", repo) == first
    assert len(reads) == 1
    run_git(repo, "config", "filter.lfs.clean", "git-lfs clean -- %f")  # a real change
    assert ("filter.lfs.clean", "") in gitconfig.extra_config("merge", repo)
    assert len(reads) == 2


def test_the_pool_server_builds_the_validators_of_every_workers_event():
    check = ("import {module}\n"
             "from pydantic._internal._mock_val_ser import MockValSer\n"
             "from agentrun.core.events import progress\n"
             "from agentrun.core.events.base import BaseEvent\n"
             "print(sum(isinstance(c.__dict__.get('__pydantic_validator__'), MockValSer)\n"
             "          for c in vars(progress).values() if isinstance(c, type)\n"
             "          and issubclass(c, BaseEvent) and 'type' in c.model_fields))\n")

    def unbuilt(module: str) -> int:
        return int(subprocess.run([sys.executable, "-c", check.format(module=module)],
                                  capture_output=True, text=True, check=True).stdout)

    assert unbuilt("agentrun.worker") > 0  # the control: built on first use by default
    assert unbuilt("agentrun.preload") == 0


def test_what_merges_is_the_commit_that_was_verified(tmp_path):
    t = Repo(tmp_path)
    g1 = t.work("G1")  # verified: its one commit
    late = commit_files(tmp_path / "G1", {"late.txt": "written after the check\n"}, "late")
    assert t.lander.merge("G1", g1)
    assert run_git(t.root, "rev-parse", "HEAD^2") == g1.commits[-1]
    assert (t.root / "G1.txt").exists() and not (t.root / "late.txt").exists()
    # the control: the branch itself holds the later commit, which a merge by name would take
    assert run_git(t.root, "rev-parse", g1.branch or "") == late
    assert merging.merge_branch(t.root, g1.branch or "", "by name").ok
    assert (t.root / "late.txt").exists()


def test_workers_inherit_the_users_git_settings_from_the_pool_server(tmp_path):
    """The server's preload reads them; a worker (a fork of it) then starts no git for them,
    unless the user's config changed since, which it sees."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Before\n")
    check = ("import os, sys\n"
             "import {module}\n"
             "from agentrun import gitconfig\n"
             "spawn, reads = gitconfig.spawn_git, []\n"
             "gitconfig.spawn_git = lambda *a: (reads.append(a[0]), spawn(*a))[1]\n"
             "if os.fork() == 0:\n"
             "    if sys.argv[1]:\n"
             "        open(os.path.expanduser('~/.gitconfig'), 'a').write(sys.argv[1])\n"
             "    names = dict(gitconfig.identity_env('/')).get('GIT_AUTHOR_NAME')\n"
             "    print(len([r for r in reads if '--show-origin' not in r]), names)\n"
             "    sys.stdout.flush()\n"
             "    os._exit(0)\n"
             "os.wait()\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "XDG_"))}
    env.update(HOME=str(home), GIT_CONFIG_NOSYSTEM="1")

    def worker_reads(module: str, change: str = "") -> str:
        return subprocess.run([sys.executable, "-c", check.format(module=module), change],
                              capture_output=True, text=True, check=True, env=env,
                              cwd=tmp_path).stdout.strip()

    assert worker_reads("agentrun.worker") == "1 Before"  # the control: the worker reads them
    assert worker_reads("agentrun.preload") == "0 Before"
    assert worker_reads("agentrun.preload", "\tname = After\n") == "1 After"
