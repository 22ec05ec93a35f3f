"""agentrun.workspace, agentrun.worktrees and agentrun.merging against real repositories under
tmp_path."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from gitutil import (
    branch_of,
    commit_all,
    commit_files,
    head,
    init_repo,
    isolate_git_config,
    run_git,
    status,
    tree_files,
    write_files,
)

from agentrun.core.errors import EXIT_CANNOT_START, CannotStart
from agentrun.gitcli import GitError, git
from agentrun.gitlock import WORKTREE_LOCK_NAME, RunLock, git_common_dir, worktree_lock
from agentrun.merging import merge_branch
from agentrun.workspace import (
    branch_exists,
    changed_files,
    commits_on,
    commits_since,
    current_branch,
    dirty_paths,
    ensure_identity,
    head_commit,
    is_ancestor,
    ref_exists,
    repo_root,
    resolve_ref,
    verify_commits,
)
from agentrun.worktrees import (
    Worktree,
    create_worktree,
    populate_worktree,
    remove_worktree,
)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_git_config(monkeypatch, tmp_path)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "repo", {"README.md": "# demo\n", "src/app.py": "x = 1\n"})


# --- runner and queries ----------------------------------------------------------------------

def test_git_error_names_command_and_stderr(repo: Path) -> None:
    with pytest.raises(GitError) as info:
        git("rev-parse", "--verify", "no-such-ref", cwd=repo)
    message = str(info.value)
    assert "git rev-parse --verify no-such-ref" in message
    assert "fatal" in message and str(repo) in message
    assert info.value.returncode != 0 and info.value.hint


def test_git_unchecked_returns_output(repo: Path) -> None:
    assert git("rev-parse", "--verify", "no-such-ref", cwd=repo, check=False) == ""


def test_repository_pointers_from_the_environment_are_ignored(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = init_repo(tmp_path / "other", {"other.txt": "o\n"})
    expected = head(repo)
    assert head(other) != expected
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(other / ".git" / "index"))
    assert head_commit(repo) == expected
    assert repo_root(repo / "src") == repo.resolve()


def test_paths_are_not_quoted(repo: Path) -> None:
    write_files(repo, {"données/été.txt": "x\n"})
    assert dirty_paths(repo) == ["données/été.txt"]


def test_repo_root_from_a_subdirectory_and_a_file(repo: Path) -> None:
    assert repo_root(repo / "src") == repo.resolve()
    assert repo_root(repo / "src" / "app.py") == repo.resolve()


@pytest.mark.parametrize("where", ["plain", "missing"])
def test_repo_root_outside_a_repository_cannot_start(tmp_path: Path, where: str) -> None:
    target = tmp_path / "plain"
    if where == "plain":
        target.mkdir()
    else:
        target = tmp_path / "missing" / "deeper"
    with pytest.raises(CannotStart) as info:
        repo_root(target)
    assert info.value.message == f"not a git repository: {target}"
    assert "git init" in (info.value.hint or "")
    assert info.value.exit_code == EXIT_CANNOT_START


def test_head_commit_of_an_empty_repository_cannot_start(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    run_git(empty, "init", "-q")
    with pytest.raises(CannotStart, match="no commits yet"):
        head_commit(empty)


def test_current_branch_and_detached_head(repo: Path) -> None:
    assert current_branch(repo) == "main"
    run_git(repo, "checkout", "-q", "--detach")
    assert current_branch(repo) is None


def test_refs(repo: Path) -> None:
    first = head(repo)
    second = commit_files(repo, {"a.txt": "a\n"})
    run_git(repo, "tag", "-a", "-m", "annotated", "v1", first)
    assert resolve_ref(repo, "main") == second
    assert resolve_ref(repo, "v1") == first  # an annotated tag is peeled to its commit
    assert resolve_ref(repo, first[:8]) == first
    assert resolve_ref(repo, "HEAD~1") == first
    assert resolve_ref(repo, "nope") is None
    assert resolve_ref(repo, "--all") is None  # never taken as an option
    assert ref_exists(repo, "main") and not ref_exists(repo, "nope")
    assert branch_exists(repo, "main") and not branch_exists(repo, "v1")
    assert is_ancestor(repo, first, second) and is_ancestor(repo, second, second)
    assert not is_ancestor(repo, second, first)
    with pytest.raises(GitError):
        is_ancestor(repo, "nope", second)


def test_dirty_paths(repo: Path) -> None:
    assert dirty_paths(repo) == []
    write_files(repo, {"README.md": "changed\n", "new/deep/file.txt": "n\n",
                       ".specflow/runs/r1/events.ndjson": "{}\n", ".specflow/STATE.md": "s\n"})
    (repo / "src" / "app.py").unlink()
    write_files(repo, {"staged.txt": "s\n"})
    run_git(repo, "add", "staged.txt")
    assert dirty_paths(repo) == [".specflow/STATE.md", "README.md", "new/deep/file.txt",
                                 "src/app.py", "staged.txt"]
    assert dirty_paths(repo, ignore=(".specflow", "new/")) == ["README.md", "src/app.py",
                                                               "staged.txt"]
    assert ".specflow/runs/r1/events.ndjson" in dirty_paths(repo, ignore=())


def test_dirty_paths_does_not_list_gitignored_files(repo: Path) -> None:
    commit_files(repo, {".gitignore": "*.log\n"})
    write_files(repo, {"debug.log": "x\n"})
    assert dirty_paths(repo) == []


# --- identity --------------------------------------------------------------------------------

def test_fallback_identity_when_none_is_configured(tmp_path: Path) -> None:
    bare = init_repo(tmp_path / "noid", identity=False)
    global_config = Path(os.environ["GIT_CONFIG_GLOBAL"])
    assert ensure_identity(bare) == {
        "GIT_AUTHOR_NAME": "agentrun", "GIT_COMMITTER_NAME": "agentrun",
        "GIT_AUTHOR_EMAIL": "agentrun@localhost", "GIT_COMMITTER_EMAIL": "agentrun@localhost"}
    write_files(bare, {"x.txt": "x\n"})
    sha = commit_all(bare, "work")
    assert run_git(bare, "log", "-1", "--format=%an <%ae>|%cn", sha) == (
        "agentrun <agentrun@localhost>|agentrun")
    assert global_config.read_text() == ""
    assert run_git(bare, "config", "--list", "--local").count("user.") == 0


def test_configured_identity_is_used_as_is(repo: Path) -> None:
    assert ensure_identity(repo) == {}
    write_files(repo, {"x.txt": "x\n"})
    sha = commit_all(repo, "work")
    assert run_git(repo, "log", "-1", "--format=%an", sha) == "Test Author"


# --- run lock --------------------------------------------------------------------------------

def test_run_lock_is_exclusive_and_names_the_holder(repo: Path) -> None:
    first = RunLock(repo, "run-1")
    first.acquire()
    try:
        content = (git_common_dir(repo) / "agentrun-run.lock").read_text()
        assert f'"pid": {os.getpid()}' in content and '"run_id": "run-1"' in content
        with pytest.raises(CannotStart) as info:
            RunLock(repo, "run-2").acquire()
        assert f"another agentrun run is in progress (pid {os.getpid()}, run run-1, started" \
            in info.value.message
        assert info.value.hint and info.value.exit_code == EXIT_CANNOT_START
    finally:
        first.release()
    assert (git_common_dir(repo) / "agentrun-run.lock").read_text() == ""  # no stale holder
    with RunLock(repo, "run-2") as second:
        assert second.held
    assert not second.held


def test_run_lock_is_shared_by_all_worktrees(repo: Path, tmp_path: Path) -> None:
    wt = create_worktree(repo, tmp_path / "wt", "agentrun/g1", "HEAD")
    with RunLock(repo, "main-run"), pytest.raises(CannotStart):
        RunLock(wt.path, "from-worktree").acquire()


_HOLDER = """
import sys, time
from pathlib import Path
from agentrun.gitlock import RunLock
lock = RunLock(Path(sys.argv[1]), "held-elsewhere")
lock.acquire()
print("locked", flush=True)
time.sleep(60)
"""


def test_run_lock_of_a_killed_process_is_taken_over(repo: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(repo)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(CannotStart, match=f"pid {holder.pid}, run held-elsewhere"):
            RunLock(repo, "mine").acquire()
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        with RunLock(repo, "mine") as lock:
            assert lock.held
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()



def test_run_lock_outside_a_repository_cannot_start(tmp_path: Path) -> None:
    with pytest.raises(CannotStart, match="not a git repository"):
        RunLock(tmp_path, "run-1")

# --- worktrees -------------------------------------------------------------------------------

def test_create_and_remove_worktree(repo: Path, tmp_path: Path) -> None:
    base = head(repo)
    wt = create_worktree(repo, tmp_path / "wts" / "g1", "agentrun/run1/g1", "main")
    assert wt == Worktree(tmp_path / "wts" / "g1", "agentrun/run1/g1", base)
    assert (wt.path / "src" / "app.py").read_text() == "x = 1\n"
    assert branch_of(wt.path) == "agentrun/run1/g1" and head(wt.path) == base
    assert branch_of(repo) == "main" and status(repo) == ""
    write_files(wt.path, {"scratch.txt": "uncommitted\n"})
    remove_worktree(repo, wt)
    assert not wt.path.exists()
    assert not branch_exists(repo, wt.branch)
    assert str(wt.path) not in run_git(repo, "worktree", "list")


def test_worktree_without_checkout_is_populated_once(repo: Path, tmp_path: Path) -> None:
    base = head(repo)
    wt = create_worktree(repo, tmp_path / "g1", "agentrun/g1", "main", checkout=False)
    assert head(wt.path) == base and branch_of(wt.path) == "agentrun/g1"
    assert not (wt.path / "README.md").exists()  # only git's bookkeeping so far
    assert populate_worktree(wt.path) is True
    assert (wt.path / "src" / "app.py").read_text() == "x = 1\n"
    assert status(wt.path) == ""
    write_files(wt.path, {"src/app.py": "x = 2\n"})
    assert populate_worktree(wt.path) is False  # checked out already: the edit is kept
    assert (wt.path / "src" / "app.py").read_text() == "x = 2\n"


def test_a_checked_out_worktree_is_not_populated_again(repo: Path, tmp_path: Path) -> None:
    wt = create_worktree(repo, tmp_path / "g1", "agentrun/g1", "main")
    (wt.path / "README.md").unlink()
    assert populate_worktree(wt.path) is False
    assert not (wt.path / "README.md").exists()
    assert populate_worktree(repo) is False


def test_resume_reuses_an_existing_branch(repo: Path, tmp_path: Path) -> None:
    wt = create_worktree(repo, tmp_path / "g1", "agentrun/g1", "main")
    write_files(wt.path, {"done.txt": "first attempt\n"})
    sha = commit_all(wt.path, "G1: part one")
    again = create_worktree(repo, tmp_path / "g1", "agentrun/g1", "main")  # still there
    assert again.path == wt.path and head(again.path) == sha
    remove_worktree(repo, wt, delete_branch=False)
    assert branch_exists(repo, "agentrun/g1")
    resumed = create_worktree(repo, tmp_path / "g1-resumed", "agentrun/g1", "main")
    assert head(resumed.path) == sha
    assert (resumed.path / "done.txt").read_text() == "first attempt\n"


def test_resume_after_the_directory_was_deleted(repo: Path, tmp_path: Path) -> None:
    wt = create_worktree(repo, tmp_path / "g1", "agentrun/g1", "main")
    sha = commit_files(wt.path, {"a.txt": "a\n"})
    subprocess.run(["rm", "-rf", str(wt.path)], check=True)
    resumed = create_worktree(repo, tmp_path / "g1", "agentrun/g1", "main")
    assert head(resumed.path) == sha


def test_branch_checked_out_elsewhere_is_a_clear_error(repo: Path, tmp_path: Path) -> None:
    create_worktree(repo, tmp_path / "one", "agentrun/g1", "main")
    with pytest.raises(CannotStart) as info:
        create_worktree(repo, tmp_path / "two", "agentrun/g1", "main")
    assert info.value.message == f"branch agentrun/g1 is already checked out in {tmp_path / 'one'}"
    assert "git worktree remove" in (info.value.hint or "")
    with pytest.raises(CannotStart, match="already checked out"):
        create_worktree(repo, tmp_path / "three", "main", "main")


def test_unknown_base_cannot_start(repo: Path, tmp_path: Path) -> None:
    with pytest.raises(CannotStart, match="'nope' is not a commit"):
        create_worktree(repo, tmp_path / "g1", "agentrun/g1", "nope")
    assert not branch_exists(repo, "agentrun/g1")


def test_worktree_creation_waits_for_the_lock(repo: Path, tmp_path: Path) -> None:
    target = tmp_path / "locked"
    done = threading.Event()
    errors: list[BaseException] = []

    def create() -> None:
        try:
            create_worktree(repo, target, "agentrun/locked", "main")
        except BaseException as exc:  # reported below
            errors.append(exc)
        done.set()

    with worktree_lock(repo):
        thread = threading.Thread(target=create)
        thread.start()
        assert not done.wait(0.5)
        assert not target.exists()
    assert done.wait(30)
    thread.join()
    assert errors == [] and (target / "README.md").exists()


def _in_threads(count: int, work) -> list:
    """Run work(i) in `count` threads released at the same instant; re-raise any failure."""
    barrier = threading.Barrier(count)
    results: list = [None] * count
    errors: list[BaseException] = []

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = work(i)
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    return results


def _log_branch_changes(monkeypatch: pytest.MonkeyPatch, repo: Path, log: Path) -> None:
    """Log each branch agentrun's git creates or deletes, with whether the worktree lock was
    held then.

    agentrun runs git with hooks disabled, so a `git` wrapper first on PATH does the logging:
    it runs as a child process, so `flock -n` on the lock file fails exactly when some agentrun
    thread or process holds the lock (a shared probe, so that two wrappers running at once do
    not see each other).
    """
    lock = git_common_dir(repo) / WORKTREE_LOCK_NAME
    real = shutil.which("git")
    shim = log.parent / "git-shim"
    shim.mkdir()
    (shim / "git").write_text(
        "#!/bin/sh\n"
        f'if flock -n -s "{lock}" true; then held=no; else held=yes; fi\n'
        'for a in "$@"; do case "$a" in\n'
        '  add) kind=created ;; -D) kind=deleted ;;\n'
        "esac; done\n"
        f'[ -n "$kind" ] && echo "$kind $held $*" >> "{log}"\n'
        f'exec "{real}" "$@"\n')
    (shim / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim}{os.pathsep}{os.environ['PATH']}")


def _lock_held_when(log: Path, branch: str) -> dict[str, str]:
    """'created'/'deleted' -> 'yes'/'no': whether the lock was held when agentrun's git
    created `branch` (`worktree add -b`) or deleted it (`branch -D`)."""
    seen = {}
    for line in log.read_text().splitlines():
        kind, held, *argv = line.split()
        if branch in argv:
            seen[kind] = held
    return seen


def test_parallel_workers_in_their_own_worktrees_lose_nothing(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = head(repo)
    workers = 6
    log = tmp_path / "branch-changes.log"
    _log_branch_changes(monkeypatch, repo, log)
    trees = _in_threads(workers, lambda i: create_worktree(
        repo, tmp_path / "wts" / f"w{i}", f"agentrun/w{i}", base))
    assert len({str(wt.path) for wt in trees}) == workers
    # concurrent `git worktree add` fails now and then: every one ran under the lock
    assert all(_lock_held_when(log, wt.branch) == {"created": "yes"} for wt in trees), \
        log.read_text()

    def work(i: int) -> list[str]:
        shas = []
        for n in range(4):
            write_files(trees[i].path, {f"w{i}/file{n}.txt": f"worker {i} step {n}\n"})
            shas.append(commit_all(trees[i].path, f"w{i} step {n}"))
        return shas

    made = _in_threads(workers, work)
    for i, wt in enumerate(trees):
        assert commits_since(repo, base, wt.branch) == made[i]
        messages = run_git(repo, "log", "--format=%s", f"{base}..{wt.branch}").splitlines()
        assert messages == [f"w{i} step {n}" for n in reversed(range(4))]
    for wt in trees:
        assert merge_branch(repo, wt.branch, f"merge {wt.branch}").ok
    files = tree_files(repo)
    assert all(f"w{i}/file{n}.txt" in files for i in range(workers) for n in range(4))
    _in_threads(workers, lambda i: remove_worktree(repo, trees[i]))
    assert run_git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert all(_lock_held_when(log, wt.branch) == {"created": "yes", "deleted": "yes"}
               for wt in trees), log.read_text()


# --- commits and what changed ----------------------------------------------------------------

def test_a_commit_stages_everything_and_respects_gitignore(repo: Path, tmp_path: Path) -> None:
    commit_files(repo, {".gitignore": "*.log\n"})
    wt = create_worktree(repo, tmp_path / "g1", "agentrun/g1", "main")
    assert commit_all(wt.path, "nothing yet") is None
    write_files(wt.path, {"new.txt": "n\n", "README.md": "edited\n", "trace.log": "x\n"})
    (wt.path / "src" / "app.py").unlink()
    sha = commit_all(wt.path, "G1: implement\n\nbody line\n# not a comment")
    assert sha == head(wt.path)
    assert run_git(wt.path, "log", "-1", "--format=%B") == (
        "G1: implement\n\nbody line\n# not a comment")
    assert run_git(wt.path, "show", "--name-status", "--format=", sha).splitlines() == [
        "M\tREADME.md", "A\tnew.txt", "D\tsrc/app.py"]
    assert status(wt.path) == "" and (wt.path / "trace.log").exists()
    assert "trace.log" not in run_git(wt.path, "ls-tree", "-r", "--name-only", sha)
    assert head(repo) != sha and branch_of(repo) == "main"
    assert commit_all(wt.path, "again") is None


def test_commits_since_is_oldest_first(repo: Path) -> None:
    base = head(repo)
    shas = [commit_files(repo, {f"{n}.txt": "x"}, f"c{n}") for n in range(3)]
    assert commits_since(repo, base) == shas
    assert commits_since(repo, base, shas[1]) == shas[:2]
    assert commits_since(repo, shas[-1]) == []


def test_commits_on_a_ref_are_commits_since_and_none_without_the_ref(repo: Path) -> None:
    base = head(repo)
    shas = [commit_files(repo, {f"{n}.txt": "x"}, f"c{n}") for n in range(2)]
    assert commits_on(repo, base, "HEAD") == commits_since(repo, base) == shas
    assert commits_on(repo, shas[-1], "HEAD") == []
    assert commits_on(repo, base, "refs/heads/no-such-branch") is None
    tree = run_git(repo, "rev-parse", "HEAD^{tree}")
    assert commits_on(repo, base, tree) is None  # names no commit
    with pytest.raises(GitError):  # the branch exists, the base does not
        commits_on(repo, "no-such-base", "HEAD")


def test_changed_files(repo: Path) -> None:
    commit_files(repo, {"old/name.py": "content that is long enough to be a rename\n" * 5,
                        "link": "plain file\n"})
    base = head(repo)
    write_files(repo, {"README.md": "changed\n", "über.txt": "neu\n"})
    (repo / "old" / "name.py").rename(repo / "new_name.py")
    (repo / "src" / "app.py").unlink()
    (repo / "link").unlink()
    (repo / "link").symlink_to("README.md")
    run_git(repo, "config", "diff.renames", "true")
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-q", "-m", "mixed")
    created, modified, deleted = changed_files(repo, base, "HEAD")
    assert created == ["new_name.py", "über.txt"]
    assert modified == ["README.md", "link"]
    assert deleted == ["old/name.py", "src/app.py"]
    assert changed_files(repo, base, base) == ([], [], [])


def test_verify_commits(repo: Path, tmp_path: Path) -> None:
    before = head(repo)
    wt = create_worktree(repo, tmp_path / "g1", "agentrun/g1", "main")
    one = commit_files(wt.path, {"a.txt": "a\n"}, "one")
    two = commit_files(wt.path, {"b.txt": "b\n"}, "two")
    elsewhere = commit_files(repo, {"c.txt": "c\n"}, "on main")
    verified, rejected = verify_commits(
        repo, [two, one[:7].upper(), one, before, elsewhere, "HEAD", "agentrun/g1",
               "deadbeefdeadbeef", "", "not a sha"],
        "agentrun/g1", before)
    assert verified == [two, one]
    assert rejected == [
        f"{before}: not a commit of agentrun/g1 since {before[:12]}",
        f"{elsewhere}: not a commit of agentrun/g1 since {before[:12]}",
        "'HEAD': not a commit id", "'agentrun/g1': not a commit id",
        "deadbeefdeadbeef: no such commit (unknown or ambiguous id)",
        "'': not a commit id", "'not a sha': not a commit id"]


# --- merging ---------------------------------------------------------------------------------

def test_later_merges_never_lose_what_earlier_waves_merged(repo: Path, tmp_path: Path) -> None:
    commit_files(repo, {"C.txt": "c original\n"})
    original = head(repo)
    stale = create_worktree(repo, tmp_path / "stale", "agentrun/stale", original)
    wave1 = create_worktree(repo, tmp_path / "w1", "agentrun/w1", original)
    commit_files(wave1.path, {"A.txt": "from wave 1\n"}, "add A")
    first = merge_branch(repo, wave1.branch, "merge wave 1")
    assert first.ok and first.commit == head(repo) and first.conflicts == []
    assert run_git(repo, "log", "-1", "--format=%s|%P", first.commit) == (
        f"merge wave 1|{original} {head(wave1.path)}")  # --no-ff: a real merge commit

    wave2 = create_worktree(repo, tmp_path / "w2", "agentrun/w2", first.commit)
    commit_files(wave2.path, {"B.txt": "from wave 2\n"}, "add B")
    commit_files(stale.path, {"C.txt": "c changed by a stale branch\n"}, "modify C")
    assert merge_branch(repo, wave2.branch, "merge wave 2").ok
    third = merge_branch(repo, stale.branch, "merge stale")
    assert third.ok and third.commit == head(repo)
    files = tree_files(repo)
    assert files["A.txt"] == b"from wave 1\n" and files["B.txt"] == b"from wave 2\n"
    assert files["C.txt"] == b"c changed by a stale branch\n"
    assert run_git(repo, "ls-tree", "-r", "--name-only", "HEAD").splitlines() == [
        "A.txt", "B.txt", "C.txt", "README.md", "src/app.py"]
    assert status(repo) == ""


def test_conflict_is_reported_and_nothing_changes(repo: Path, tmp_path: Path) -> None:
    base = head(repo)
    one = create_worktree(repo, tmp_path / "one", "agentrun/one", base)
    two = create_worktree(repo, tmp_path / "two", "agentrun/two", base)
    commit_files(one.path, {"src/app.py": "x = 'one'\n"})
    commit_files(two.path, {"src/app.py": "x = 'two'\n", "other.txt": "o\n"})
    write_files(repo, {"README.md": "unstaged edit in the main worktree\n",
                       "notes.txt": "untracked\n"})
    assert merge_branch(repo, one.branch, "merge one").ok
    target = head(repo)
    before_files = tree_files(repo)
    before_index = run_git(repo, "ls-files", "--stage")
    result = merge_branch(repo, two.branch, "merge two")
    assert not result.ok and result.commit is None
    assert result.conflicts == ["src/app.py"]
    assert "src/app.py" in result.message
    assert head(repo) == target and branch_of(repo) == "main"
    assert tree_files(repo) == before_files
    assert run_git(repo, "ls-files", "--stage") == before_index
    assert status(repo) == " M README.md\n?? notes.txt"
    assert resolve_ref(repo, "MERGE_HEAD") is None
    assert branch_exists(repo, two.branch)


def test_merge_blocked_by_an_untracked_file_changes_nothing(repo: Path, tmp_path: Path) -> None:
    wt = create_worktree(repo, tmp_path / "g1", "agentrun/g1", "main")
    commit_files(wt.path, {"report.txt": "from the branch\n"})
    write_files(repo, {"report.txt": "a user's own untracked file\n"})
    before = head(repo)
    result = merge_branch(repo, wt.branch, "merge g1")
    assert not result.ok and result.conflicts == [] and "report.txt" in result.message
    assert head(repo) == before
    assert (repo / "report.txt").read_text() == "a user's own untracked file\n"
    assert status(repo) == "?? report.txt"


def test_merge_of_a_branch_without_new_commits(repo: Path, tmp_path: Path) -> None:
    wt = create_worktree(repo, tmp_path / "g1", "agentrun/g1", "main")
    before = head(repo)
    result = merge_branch(repo, wt.branch, "merge g1")
    assert result.ok and result.commit is None and head(repo) == before
    missing = merge_branch(repo, "agentrun/nope", "merge nope")
    assert not missing.ok and "does not exist" in missing.message


def test_merge_messages_stay_with_their_worktree(repo: Path, tmp_path: Path) -> None:
    """The CLI keeps COMMIT_EDITMSG per worktree; merge commits carry exactly our message."""
    wt = create_worktree(repo, tmp_path / "g1", "agentrun/g1", "main")
    commit_files(wt.path, {"g1.txt": "g\n"}, "worker message")
    result = merge_branch(repo, wt.branch, "orchestrator: merge G1")
    assert run_git(repo, "log", "-1", "--format=%B", result.commit or "") == (
        "orchestrator: merge G1")
    assert run_git(wt.path, "log", "-1", "--format=%s") == "worker message"


def _hook(repo: Path, name: str, body: str) -> None:
    hook = Path(run_git(repo, "rev-parse", "--git-path", f"hooks/{name}"))
    hook = hook if hook.is_absolute() else repo / hook
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text(f"#!/bin/sh\n{body}\n")
    hook.chmod(0o755)


def test_a_refusing_commit_hook_does_not_run(repo: Path) -> None:
    """Hooks are code a worker could have planted: agentrun's own commits never run them."""
    _hook(repo, "pre-commit", "echo 'lint failed: tabs' >&2; exit 1")
    write_files(repo, {"x.txt": "x\n"})
    before = head(repo)
    assert commit_all(repo, "work")
    assert head(repo) != before


def test_a_refusing_merge_hook_does_not_run(repo: Path, tmp_path: Path) -> None:
    wt = create_worktree(repo, tmp_path / "g1", "agentrun/g1", "main")
    commit_files(wt.path, {"g1.txt": "g\n"})
    _hook(repo, "pre-merge-commit", "echo 'merges frozen' >&2; exit 1")
    result = merge_branch(repo, wt.branch, "merge g1")
    assert result.ok and (repo / "g1.txt").exists()
