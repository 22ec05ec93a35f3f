"""What worktree set-up costs per worktree: the first one of a run, and the later ones.

Builds a throwaway repository with an ignored dependency folder (`deps/`, many small files,
like `node_modules`), then sets up several worktrees the way a run does: `deps/` copied in
(`worktree_copy`, reflinked where the file system allows) and a set-up command that creates a
virtualenv, in the sandbox, with the run's shared cache directory exported to it.

    .venv/bin/python bench/setup_cost.py [--worktrees 4] [--dep-files 3000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from agentrun.gitcli import git
from agentrun.protocol import SandboxSettings, SetupSettings
from agentrun.tools.base import CommandPolicy
from agentrun.worktree_setup import prepare_worktree
from agentrun.worktrees import create_worktree, stage_all


def build_repo(root: Path, dep_files: int) -> None:
    root.mkdir()
    git("init", "-q", "-b", "main", cwd=root)
    (root / ".gitignore").write_text("deps/\n.venv/\n")
    (root / "app.py").write_text("print('app')\n")
    for i in range(dep_files):
        path = root / "deps" / f"pkg{i % 50}" / f"mod{i}.js"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"module.exports = {i};\n" * 20)
    stage_all(root)
    git("-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "init", cwd=root)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worktrees", type=int, default=4)
    parser.add_argument("--dep-files", type=int, default=3000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        build_repo(root, args.dep_files)
        command = f"{sys.executable} -m venv --without-pip .venv"
        setup = SetupSettings(command=command, copies=["deps"], source=str(root),
                              cache_dir=str(Path(tmp) / "cache"), timeout_s=300)
        times = []
        for n in range(args.worktrees):
            wt = create_worktree(root, Path(tmp) / f"wt{n}", f"b{n}", "HEAD").path
            started = time.monotonic()
            prepare_worktree(setup, wt, SandboxSettings(mode="auto"), CommandPolicy(),
                             Path(tmp) / f"setup{n}.log")
            times.append(time.monotonic() - started)
        print(f"set-up of {args.worktrees} worktrees ({args.dep_files} files of deps/ copied "
              "in, a virtualenv created, in the sandbox):")
        print(f"  first worktree:  {times[0]:.2f} s")
        later = times[1:]
        if later:
            print(f"  later worktrees: {sum(later) / len(later):.2f} s on average "
                  f"(min {min(later):.2f} s, max {max(later):.2f} s)")


if __name__ == "__main__":
    main()
