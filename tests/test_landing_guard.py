"""Landing never overwrites or deletes what the user's checkout holds untracked or ignored
(`merging.merge_branch`, `merging.in_the_way`).

Each case is built twice from scratch: plain `git merge --no-ff` (git 2.39) shows the loss
happens, then agentrun's merge refuses with the path named and changes nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from gitutil import commit_files, init_repo, run_git, tree_files, write_files

from agentrun import merging

# name -> (files committed at the start, the branch's files, the user's files, what is lost)
CASES = {
    "ignored .env": ({".gitignore": ".env\n"}, {".gitignore": "", ".env": "EVIL=1\n"},
                     {".env": "SECRET=mine\n"}, ".env"),
    "ignored folder where a file goes": (
        {".gitignore": "build/\n"}, {".gitignore": "", "build": "evil\n"},
        {"build/out.o": "my build\n"}, "build"),
    "nested .gitignore negation": (
        {".gitignore": "secrets/*\n"}, {"secrets/.gitignore": "!key.pem\n",
                                         "secrets/key.pem": "EVIL\n"},
        {"secrets/key.pem": "MY KEY\n"}, "secrets/key.pem"),
    "ignored file where a folder goes": (
        {".gitignore": "cache\n"}, {".gitignore": "", "cache/x": "evil\n"},
        {"cache": "my cache file\n"}, "cache"),
    "run records": ({".gitignore": ".specflow/runs/\n"}, {".specflow/runs": "->elsewhere"},
                    {".specflow/runs/r1/events.ndjson": "{}\n"}, ".specflow/runs"),
    "ignored symlink where a folder goes": (
        {".gitignore": "data\n"}, {".gitignore": "", "data/x.csv": "evil\n"},
        {"data": "->/nonexistent/mount"}, "data"),
}


def scenario(tmp_path: Path, name: str) -> Path:
    """The user's repository with a branch `w` (started before the user's last commit, so the
    merge is not a fast-forward) and the user's untracked files in place."""
    start, branch, user, _lost = CASES[name]
    root = init_repo(tmp_path / name.replace(" ", "-"), {"README.md": "r\n", **start})
    run_git(root, "switch", "-q", "-c", "w")
    _write(root, branch)
    run_git(root, "add", "-A", "-f")
    run_git(root, "commit", "-q", "-m", "worker")
    run_git(root, "switch", "-q", "main")
    commit_files(root, {"user.txt": "u\n"}, "the user's own work")
    _write(root, user)
    return root


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if content.startswith("->"):
            os.symlink(content[2:], path)
        elif path.name == ".gitignore" and not content:
            path.unlink()
        else:
            write_files(root, {rel: content})


@pytest.mark.parametrize("name", list(CASES))
def test_a_merge_that_would_clobber_an_untracked_or_ignored_path_is_refused(tmp_path, name):
    lost = CASES[name][3]
    plain = scenario(tmp_path / "plain", name)
    before = tree_files(plain)
    run_git(plain, "merge", "--no-ff", "--no-edit", "-q", "w")  # git 2.39 merges...
    assert tree_files(plain) != before  # ...and the user's file is gone or overwritten
    assert {k: v for k, v in before.items() if k == lost or k.startswith(lost + "/")} != \
        {k: v for k, v in tree_files(plain).items() if k == lost or k.startswith(lost + "/")}

    root = scenario(tmp_path / "ours", name)
    before, head = tree_files(root), run_git(root, "rev-parse", "HEAD")
    merged = merging.merge_branch(root, "w", "merge")
    assert not merged.ok
    assert merged.in_the_way == [lost]
    assert f"writes {lost}, which the checkout holds untracked or ignored" in merged.message
    assert tree_files(root) == before and run_git(root, "rev-parse", "HEAD") == head


def test_tracked_files_and_new_paths_merge_as_before(tmp_path):
    """The check stands aside where nothing is lost: files the user tracks (git's own merge
    protects their changes), new paths, a new file in an existing or ignored folder."""
    root = init_repo(tmp_path / "r", {"README.md": "r\n", "src/a.py": "A\n",
                                      ".gitignore": "logs/\n"})
    run_git(root, "switch", "-q", "-c", "w")
    write_files(root, {"src/a.py": "A2\n", "src/new/b.py": "B\n", "logs/keep.txt": "k\n"})
    run_git(root, "add", "-A", "-f")
    run_git(root, "commit", "-q", "-m", "worker")
    run_git(root, "switch", "-q", "main")
    commit_files(root, {"user.txt": "u\n"})
    write_files(root, {"logs/today.log": "mine\n"})
    assert merging.in_the_way(root, ["src/a.py", "src/new/b.py", "logs/keep.txt"]) == []
    merged = merging.merge_branch(root, "w", "merge")
    assert merged.ok, merged.message
    assert (root / "logs/today.log").read_text() == "mine\n"
