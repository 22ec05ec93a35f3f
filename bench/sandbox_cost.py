"""What the command sandbox costs: the time one command takes in bubblewrap against the same
command unconfined, through the same `Sandbox.run` a worker uses.

Builds a throwaway repository with a linked worktree (as a worker's), then runs each command
`--runs` times in a `LocalSandbox` and in a `BwrapSandbox`, alternating, and prints the medians
and the added cost per command (the goal: at most 20 ms).

    .venv/bin/python bench/sandbox_cost.py [--runs 30] [--dir /dev/shm]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agentrun.sandbox.choice import make_sandbox
from agentrun.sandbox.local import LocalSandbox

COMMANDS = ("true", "echo hi > out.txt", "git status --porcelain", "python3 -c pass")
GOAL_MS = 20.0


def worktree(base: Path) -> Path:
    repo = base / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "i"],
                 ["worktree", "add", "-q", "-b", "w", str(base / "wt")]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True)
    return base / "wt"


def timed(sandbox, command: str, wt: Path) -> float:
    started = time.perf_counter()
    result = sandbox.run(command, cwd=wt, timeout_s=30, env=dict(os.environ))
    elapsed = time.perf_counter() - started
    if result.exit_code != 0:
        sys.exit(f"`{command}` failed ({result.exit_code}): {result.output}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--dir", default=None, help="where the throwaway repository goes")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        wt = worktree(Path(tmp))
        jailed, choice = make_sandbox("on", wt)
        plain = LocalSandbox()
        print(f"sandbox: {choice.describe()} · {args.runs} runs per command, medians")
        print(f"{'command':<26} {'plain ms':>9} {'sandboxed ms':>13} {'added ms':>9}")
        added = []
        for command in COMMANDS:
            times: dict[str, list[float]] = {"plain": [], "jailed": []}
            for _ in range(args.runs):
                times["plain"].append(timed(plain, command, wt))
                times["jailed"].append(timed(jailed, command, wt))
            p, j = (statistics.median(times[k]) * 1000 for k in ("plain", "jailed"))
            added.append(j - p)
            print(f"{command:<26} {p:>9.1f} {j:>13.1f} {j - p:>9.1f}")
        worst = max(added)
        verdict = "met" if worst <= GOAL_MS else "NOT met"
        print(f"added per command: median {statistics.median(added):.1f} ms, worst "
              f"{worst:.1f} ms (goal <= {GOAL_MS:g} ms: {verdict})")


if __name__ == "__main__":
    main()
