"""agentrun's git runs nothing a worker's tree selects: nested repositories, attributes naming
the repository's drivers, the user's global config (see agentrun/gitconfig.py and
agentrun/gitcli.py).

Every test first runs plain git on the same planted tree and shows the payload *does* run,
then runs agentrun's own calls and shows it does not.
"""

from __future__ import annotations

import itertools
import os
import stat
import time
from pathlib import Path

import pytest
from gitutil import commit_all, commit_files, init_repo, isolate_git_config, run_git, write_files

from agentrun import merging, workspace, worktrees
from agentrun.agent.snapshots import restore_snapshot, take_snapshot
from agentrun.gitcli import git
from agentrun.run.policy import PATH_DENIED, MergePolicy


def payload(tmp_path: Path) -> tuple[str, Path]:
    """A command that records that it ran (and passes its input through, as a filter)."""
    marker = tmp_path / "payload-ran"
    script = tmp_path / "payload.sh"
    script.write_text(f"#!/bin/sh\necho \"$0 $*\" >> {marker}\ncat\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script), marker


_STIRS = itertools.count(1)


def stir(repo: Path) -> None:
    """Rewrite the nested repository's tracked file with other bytes of the same size and a
    new time stamp: a `git status` in it can then only tell by hashing the file (through the
    clean filter), whatever it cached."""
    f = repo / "data.txt"
    f.write_text("even\n" if f.read_text() == "odd!\n" else "odd!\n")
    later = time.time() + 10 * next(_STIRS)
    os.utime(f, (later, later))


def ran(marker: Path) -> bool:
    """Whether the payload ran since the last look (and forget it)."""
    if marker.exists():
        marker.unlink()
        return True
    return False


@pytest.fixture
def worktree(tmp_path: Path) -> tuple[Path, Path]:
    """A user's repository with a submodule at vendor/lib (a gitlink, not checked out) and a
    worker's worktree of it."""
    root = init_repo(tmp_path / "repo", {"README.md": "r\n", "data.txt": "odd!\n"})
    sha = run_git(root, "rev-parse", "HEAD")
    run_git(root, "update-index", "--add", "--cacheinfo", f"160000,{sha},vendor/lib")
    run_git(root, "commit", "-q", "-m", "submodule")
    wt = worktrees.create_worktree(root, tmp_path / "wt", "agentrun/w", "HEAD")
    return root, wt.path


def plant_nested_repo(path: Path, command: str, *, source: Path | None = None,
                      at: str = "HEAD", gitfile: Path | None = None) -> None:
    """What a worker can do in its sandbox: a repository at `path` — a clone of `source` at
    the commit `at` (the one a gitlink records: git's `add` then looks inside), or a new
    one — whose own config runs `command` as an fsmonitor and as the clean filter its
    `.gitattributes` selects, with a tracked file changed since (so a `git status` in it
    hashes the file)."""
    separate = [f"--separate-git-dir={gitfile}"] if gitfile else []
    if source is None:
        run_git(Path("/"), "init", "-q", *separate, str(path))
        commit_files(path, {"data.txt": "odd!\n"}, "nested")
    else:
        run_git(Path("/"), "clone", "-q", "--no-checkout", *separate, str(source), str(path))
        run_git(path, "checkout", "-q", "--detach", at)
    run_git(path, "config", "core.fsmonitor", f"{command} fsmonitor")
    run_git(path, "config", "filter.evil.clean", f"{command} filter")
    write_files(path, {".gitattributes": "* filter=evil\n"})
    stir(path)


@pytest.mark.parametrize("gitfile", [False, True], ids=["git-folder", "git-file"])
def test_a_nested_repository_at_a_gitlink_path_runs_nothing(worktree, tmp_path, gitfile):
    """A worker checks out a repository at the commit the user's submodule records, where the
    submodule goes (with a `.git` folder, or a `.git` file pointing at a git dir elsewhere in
    its tree), and makes the submodule's status matter (`.gitmodules`, ignore=none): plain
    git's status and add run that repository's configured commands; agentrun's status, add,
    commit, snapshot, diff and merge do not."""
    root, wt = worktree
    command, marker = payload(tmp_path)
    plant_nested_repo(wt / "vendor/lib", command, source=root, at="HEAD~1",
                      gitfile=wt / "evil.git" if gitfile else None)
    write_files(wt, {".gitmodules": '[submodule "lib"]\n\tpath = vendor/lib\n\tignore = none\n',
                     "src/a.py": "A = 1\n"})
    run_git(wt, "status", "--porcelain")
    seen = marker.read_text()  # the positive control: plain git runs both of its commands
    assert "payload.sh fsmonitor" in seen and "payload.sh filter" in seen
    assert ran(marker)
    stir(wt / "vendor/lib")
    run_git(wt, "add", "-A")
    assert ran(marker)
    run_git(wt, "reset", "-q")
    ran(marker)

    snap = take_snapshot(wt)
    steps = {
        "status": lambda: workspace.dirty_paths(wt),
        "snapshot": lambda: take_snapshot(wt),
        "restore": lambda: restore_snapshot(wt, snap),
        "diff": lambda: git("diff", "--stat", cwd=wt),
        "commit": lambda: commit_all(wt, "work"),
        "log": lambda: git("log", "-p", "-1", cwd=wt),
        "merge": lambda: merging.merge_branch(root, "agentrun/w", "merge"),
    }
    for name, step in steps.items():
        stir(wt / "vendor/lib")
        step()
        assert not ran(marker), f"agentrun's {name} ran the nested repository's command"
    for whole in (["-A"], ["--", "."], ["--", "vendor"], ["--", ":/"]):  # never visits one
        with pytest.raises(ValueError, match="stage|gitlink"):
            git("add", *whole, cwd=wt)
    # the submodule is left as the user had it: only the worker's files were committed
    assert run_git(wt, "ls-tree", "HEAD", "vendor/lib") == run_git(root, "ls-tree", "HEAD~1",
                                                                   "vendor/lib")
    assert run_git(root, "show", "HEAD:src/a.py") == "A = 1"


def test_a_new_nested_repository_is_committed_as_a_gitlink_and_refused(worktree, tmp_path):
    """A worker's fresh nested repository becomes a gitlink in its commit, which the merge
    policy refuses by name (path_denied) — read from the branch's tree."""
    root, wt = worktree
    command, marker = payload(tmp_path)
    plant_nested_repo(wt / "tools/x", command)
    base = run_git(wt, "rev-parse", "HEAD")
    commit_all(wt, "work")
    assert not ran(marker)
    assert run_git(wt, "ls-tree", "HEAD", "tools/x").startswith("160000 ")
    rules = MergePolicy(spec_path=".specflow/specs/SPEC-1.md")
    found = rules.check_changes(workspace.tree_changes(root, base, "agentrun/w"),
                                lambda: workspace.symlinks_of(root, "agentrun/w"))
    assert [(f.path, f.kind) for f in found] == [("tools/x", PATH_DENIED)]
    assert "gitlink" in found[0].reason()
    stir(wt / "tools/x")
    run_git(wt, "status", "--porcelain")  # and the planted commands were live all along
    assert ran(marker)


def test_drivers_of_the_repository_a_worker_selects_do_not_run(tmp_path):
    """The user's repository defines a clean filter, a merge driver, a textconv and an
    external diff (commands that may well name scripts in the work tree); a worker's
    `.gitattributes` selects them for its files. Plain git runs them; agentrun's add, commit,
    diff and merge do not (the merge falls back to git's three-way text merge)."""
    command, marker = payload(tmp_path)
    root = init_repo(tmp_path / "repo", {"a.dat": "1\n2\n3\n4\n5\n", "README.md": "r\n"})
    for key in ("filter.lfsish.clean", "diff.conv.textconv", "diff.external"):
        run_git(root, "config", key, command)
    run_git(root, "config", "merge.custom.driver", f"{command} %A; false")
    wt = worktrees.create_worktree(root, tmp_path / "wt", "agentrun/w", "HEAD").path
    write_files(wt, {".gitattributes": "*.dat filter=lfsish merge=custom diff=conv\n",
                     "a.dat": "1\n2\n3\n4\nfive\n"})
    run_git(wt, "add", "-A")  # the positive control: plain git hashes through the filter
    assert ran(marker)
    run_git(wt, "reset", "-q")
    ran(marker)

    commit_all(wt, "attributes")  # wave 1: the attributes reach the user's branch
    git("diff", "HEAD~1", "HEAD", cwd=wt)
    git("show", "HEAD", cwd=wt)
    git("log", "-p", "-1", cwd=wt)
    assert merging.merge_branch(root, "agentrun/w", "wave 1").ok
    assert not ran(marker)
    run_git(wt, "diff", "HEAD~1", "HEAD")
    assert ran(marker)  # the same diff through plain git: textconv and external diff run

    commit_files(root, {"a.dat": "one\n2\n3\n4\nfive\n"}, "the user's change")
    write_files(wt, {"a.dat": "1\n2\nthree\n4\nfive\n"})
    commit_all(wt, "wave 2")
    before = run_git(root, "rev-parse", "HEAD")
    ran(marker)
    merged = merging.merge_branch(root, "agentrun/w", "wave 2")
    assert merged.ok, merged.message
    assert not ran(marker)
    assert (root / "a.dat").read_text() == "one\n2\nthree\n4\nfive\n"  # a real 3-way merge
    run_git(root, "reset", "-q", "--hard", before)
    ran(marker)
    with pytest.raises(AssertionError):  # plain git's merge runs the driver, which fails it
        run_git(root, "merge", "--no-ff", "-m", "plain", "agentrun/w")
    assert ran(marker)


def test_the_users_global_config_is_not_read_but_its_data_is_kept(monkeypatch, tmp_path):
    """A filter in the user's global config, selected by a worker's attributes, runs in
    plain git and not in agentrun's; the global ignore file, identity and `safe.directory`
    still count."""
    command, marker = payload(tmp_path)
    gitconfig = isolate_git_config(monkeypatch, tmp_path)
    ignores = tmp_path / "global-ignore"
    ignores.write_text("*.swp\n")
    gitconfig.write_text(f"[filter \"g\"]\n\tclean = {command}\n[core]\n\texcludesFile = "
                         f"{ignores}\n[user]\n\tname = Global Person\n\temail = g@x.invalid\n"
                         "[safe]\n\tdirectory = /srv/shared-checkout\n")
    root = init_repo(tmp_path / "repo", {"README.md": "r\n"}, identity=False)
    write_files(root, {".gitattributes": "*.txt filter=g\n", "a.txt": "a\n", "b.swp": "x\n"})
    run_git(root, "add", "--", "a.txt")
    assert ran(marker)
    run_git(root, "reset", "-q")
    ran(marker)

    sha = commit_all(root, "work")
    assert not ran(marker)
    assert run_git(root, "log", "-1", "--format=%an <%ae>", sha) == "Global Person <g@x.invalid>"
    assert run_git(root, "ls-tree", "--name-only", "HEAD", "b.swp") == ""  # still ignored
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")  # as a CI image may give it
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "safe.directory")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "/srv/image-checkout")
    scopes = git("config", "--show-scope", "--get-all", "safe.directory", cwd=root)
    assert scopes == "command\t/srv/shared-checkout\ncommand\t/srv/image-checkout"
    assert workspace.ensure_identity(root) == {
        "GIT_AUTHOR_NAME": "Global Person", "GIT_COMMITTER_NAME": "Global Person",
        "GIT_AUTHOR_EMAIL": "g@x.invalid", "GIT_COMMITTER_EMAIL": "g@x.invalid"}


def test_a_driver_the_repository_gains_mid_run_is_neutralised_too(tmp_path):
    """What agentrun learns of the repository's config is re-read when a config file (or
    one it includes) changes: a tracked file that the user's config includes, changed by an
    earlier merge, is taken into account by the next call in the same process."""
    command, marker = payload(tmp_path)
    root = init_repo(tmp_path / "repo", {"README.md": "r\n"})
    run_git(root, "config", "include.path", "../shared.gitconfig")
    write_files(root, {"a.txt": "a\n"})
    commit_all(root, "before")  # agentrun has read the config now
    write_files(root, {"shared.gitconfig": f"[filter \"late\"]\n\tclean = {command}\n",
                       ".gitattributes": "*.txt filter=late\n", "a.txt": "b\n"})
    run_git(root, "hash-object", "--path", "a.txt", "a.txt")
    assert ran(marker)
    commit_all(root, "after")
    assert not ran(marker)
