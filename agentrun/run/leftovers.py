"""What a run leaves behind that nobody needs, and its removal.

A run's record (`.specflow/runs/<run-id>/`: events, transcripts, result) and the worktrees and
branches that hold work for a human or `--resume` are kept, as the README says. Everything
else a run makes is scaffolding that its own end removes — unless the process is killed
first (SIGKILL, a cancelled CI job, a power cut):

- the space reserve `.specflow/runs/<run-id>/space-reserve` (run/record.py);
- integration checks' throwaway worktrees `.specflow/runs/<run-id>/integration/check-N` and
  their branches `agentrun/<spec>/<run-id>/check-N` (run/integration.py);
- a worktree's folder renamed aside to be deleted, `.<name>.removing-<pid>` (worktrees.py);
- a process's private HOME for commands, `<tmp>/agentrun-home-<pid>-*` (tools/environment.py),
  a worker's scratch index while it snapshots its worktree, `<tmp>/agentrun-snapshot-<pid>-*`
  (agent/snapshots.py), and the worker pool's handoff, `<tmp>/agentrun-pool-<pid>-*`
  (pool_handoff.py).

`sweep` removes these for every run but the one in progress. It runs where no other run can
be alive — under the run lock, at the start and end of a run and in `agentrun clean` — and
it only ever touches names agentrun gives, in folders agentrun made.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

from agentrun import gitcli, worktrees
from agentrun.processes import discard_stale_temp_dirs
from agentrun.removal import remove_tree
from agentrun.run.record import RESERVE_NAME

CHECK = re.compile(r"check-\d+")  # an integration check's worktree and branch (batch part)
BRANCH = re.compile(r"agentrun/[^/]+/(?P<run>[^/]+)/(?P<batch>[^/]+)")


def is_check_branch(branch: str | None) -> bool:
    match = BRANCH.fullmatch(branch or "")
    return match is not None and CHECK.fullmatch(match["batch"]) is not None


def sweep(root: Path, runs_dir: Path, current: str | None = None) -> list[str]:
    """Remove what runs other than `current` left behind and no one needs (see the module
    doc); returns what was removed of this repository's, one path or branch each (private
    HOMEs of processes that are gone are removed too, whichever repository they worked in,
    and not listed)."""
    removed: list[str] = []
    runs = [d for d in sorted(runs_dir.iterdir()) if d.is_dir() and d.name != current] \
        if runs_dir.is_dir() else []
    for run in runs:
        reserve = run / RESERVE_NAME
        if reserve.is_file():
            reserve.unlink(missing_ok=True)
            removed.append(str(reserve))
        for folder in (run / "worktrees", run / "integration"):
            for aside in sorted(folder.glob(f".*{worktrees.REMOVING}*")) \
                    if folder.is_dir() else []:
                with contextlib.suppress(OSError):  # a worker's tree: any depth (removal.py)
                    remove_tree(aside)
                removed.append(str(aside))
    removed += _checks(root, runs_dir, current)
    discard_stale_temp_dirs()
    return removed


def _checks(root: Path, runs_dir: Path, current: str | None) -> list[str]:
    """Integration-check worktrees and branches of runs other than `current`."""
    removed: list[str] = []
    seen: set[str] = set()
    out = gitcli.git("worktree", "list", "--porcelain", cwd=root)
    for block in out.split("\n\n")[1:]:  # the first is the main worktree
        lines = block.splitlines()
        path = next((ln[len("worktree "):] for ln in lines if ln.startswith("worktree ")), "")
        branch = next((ln[len("branch refs/heads/"):] for ln in lines
                       if ln.startswith("branch refs/heads/")), None)
        run = _check_run(path, branch, runs_dir)
        if run is None or run == current:
            continue
        with contextlib.suppress(gitcli.GitError):
            worktrees.remove_worktree(root, worktrees.Worktree(Path(path), branch or "", ""),
                                      delete_branch=branch is not None)
            removed.append(path)
            seen.add(branch or "")
    branches = gitcli.git("for-each-ref", "--format=%(refname:short)",
                          "refs/heads/agentrun/", cwd=root).split()
    for branch in branches:
        match = BRANCH.fullmatch(branch)
        if branch in seen or not is_check_branch(branch) or match is None \
                or match["run"] == current:
            continue
        if gitcli.run_git("branch", "-D", branch, cwd=root).returncode == 0:
            removed.append(branch)
    return removed


def _check_run(path: str, branch: str | None, runs_dir: Path) -> str | None:
    """The run an integration check's worktree belongs to (by branch, or by folder)."""
    if is_check_branch(branch):
        match = BRANCH.fullmatch(branch or "")
        return match["run"] if match else None
    try:
        parts = Path(path).resolve().relative_to(runs_dir.resolve()).parts
    except ValueError:
        return None
    if len(parts) == 3 and parts[1] == "integration" and CHECK.fullmatch(parts[2]):
        return parts[0]
    return None
