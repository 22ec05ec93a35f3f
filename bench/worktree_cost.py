"""What a worker's git workspace costs: worktree add/remove, a merge, a snapshot round trip.

Builds a throwaway repository of ~2,000 files (about the size of a mid-sized project) in a
temporary directory and times the operations the orchestrator and agent loop perform per
worker. Prints the median and the range over several repetitions.

    .venv/bin/python bench/worktree_cost.py [--files 2000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from agentrun.agent.snapshots import restore_snapshot, take_snapshot
from agentrun.gitcli import git
from agentrun.merging import merge_branch
from agentrun.worktrees import commit_all, create_worktree, remove_worktree


def source_path(root: Path, i: int) -> Path:
    return root / f"pkg{i % 20}" / f"mod{i % 7}" / f"file{i}.py"


def build_repo(root: Path, files: int) -> None:
    """A repository with `files` small source files spread over nested directories."""
    root.mkdir()
    for i in range(files):
        path = source_path(root, i)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# module {i}\n" + "".join(f"value_{n} = {i * n}\n" for n in range(30)))
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    for key, value in (("user.name", "bench"), ("user.email", "bench@example.invalid"),
                       ("commit.gpgsign", "false")):
        subprocess.run(["git", "config", key, value], cwd=root, check=True)
    commit_all(root, "initial")


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def report(label: str, samples: list[float]) -> None:
    ms = [s * 1000 for s in samples]
    print(f"{label:<44} median {statistics.median(ms):7.1f} ms   "
          f"(min {min(ms):6.1f}, max {max(ms):6.1f}, n={len(ms)})")


def bench(root: Path, work: Path, repeat: int) -> None:
    add, remove, both, raw_add, raw_remove, merge, snap, restore = ([] for _ in range(8))
    for i in range(repeat):
        path, branch = work / f"wt{i}", f"bench/wt{i}"
        raw_add.append(timed(lambda p=path, b=branch: git(
            "worktree", "add", "--quiet", "-b", b, str(p), "HEAD", cwd=root)))
        raw_remove.append(timed(lambda p=path: git("worktree", "remove", "--force", str(p),
                                                   cwd=root)))
        git("branch", "-D", branch, cwd=root)

        start = time.perf_counter()
        wt = create_worktree(root, path, branch, "main")
        add.append(time.perf_counter() - start)
        for n in range(10):  # a worker's typical change: a handful of files
            target = source_path(wt.path, n * 37)
            target.write_text(target.read_text() + f"added_by_worker_{i} = True\n")
        (wt.path / f"new_{i}.py").write_text("x = 1\n")
        snapshot = take_snapshot(wt.path)
        snap.append(timed(lambda w=wt.path: take_snapshot(w)))
        commit_all(wt.path, f"worker {i}")
        restore.append(timed(lambda w=wt.path, s=snapshot: restore_snapshot(w, s)))
        commit_all(wt.path, f"worker {i}")
        merge.append(timed(lambda b=branch: merge_branch(root, b, f"merge {b}")))
        remove.append(timed(lambda w=wt: remove_worktree(root, w)))
        both.append(add[-1] + remove[-1])

    report("git worktree add (raw CLI)", raw_add)
    report("git worktree remove --force (raw CLI)", raw_remove)
    report("create_worktree (lock + add)", add)
    report("remove_worktree (lock + remove + prune + -D)", remove)
    report("create + remove", both)
    report("merge_branch (--no-ff, 11 files changed)", merge)
    report("take_snapshot (11 files dirty)", snap)
    report("restore_snapshot (undo a commit of 11 files)", restore)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agentrun-bench-") as tmp:
        root, work = Path(tmp) / "repo", Path(tmp) / "worktrees"
        start = time.perf_counter()
        build_repo(root, args.files)
        print(f"repository: {args.files} files, built in {time.perf_counter() - start:.1f} s "
              f"(git {git('--version', cwd=root).split()[-1]})")
        bench(root, work, args.repeat)


if __name__ == "__main__":
    main()
