"""What the reviewer is shown: the spec's contract, and the run's result as git and the run's
record have it (never the workers' own account of what they did)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from agentrun.agent.prompts import render
from agentrun.core.errors import BadInput
from agentrun.core.fsutil import relpath
from agentrun.gitcli import run_git
from agentrun.project import Project
from agentrun.report.escape import inline
from agentrun.report.execution_state import RunState, load_state, state_path
from agentrun.review.diff import PART_CHARS, ReviewDiff, review_diff
from agentrun.spec.model import Spec

OUTPUT_LIMIT = 4_000  # characters of the integration check's output


@dataclass
class ReviewInput:
    """The run under review and its change."""

    state: RunState
    base: str  # where the run's change starts: the commit it started from
    head: str
    diff: ReviewDiff
    deviations: list[str] = field(default_factory=list)


def _git(root: Path, *args: str) -> str | None:
    proc = run_git(*args, cwd=root)
    return proc.stdout if proc.returncode == 0 else None


def gather(spec: Spec, project: Project, state: RunState | None = None) -> ReviewInput:
    """The last run of `spec` (`state`, else its execution state) and its change, from the
    commit the run started from to HEAD. BadInput when there is no run to review, or that
    commit is gone."""
    path = state_path(project.execution_dir, spec.id)
    state = state or load_state(path)
    if state is None:
        raise BadInput(f"{spec.id}: no run to review: {relpath(path, project.root)} is missing "
                       "or unreadable",
                       hint=f"run the spec first (`agentrun run {spec.id}`), then review it")
    root = project.root
    head = (_git(root, "rev-parse", "--verify", "HEAD^{commit}") or "").strip()
    if not head:
        raise BadInput(f"{root} has no commit to review", hint="run the spec first")
    base = state.start_commit or state.base_commit
    if _git(root, "cat-file", "-e", f"{base}^{{commit}}") is None:
        raise BadInput(f"{spec.id}: the run's base commit {base[:12]} is not in "
                       "this repository", hint="run the spec again, then review it")
    diff = review_diff(root, base, head, _records(root, spec, project))
    deviations = [f"{gid}: {inline(d)}" for gid, g in state.groups.items() for d in g.deviations]
    return ReviewInput(state, base, head, diff, deviations)


def _records(root: Path, spec: Spec, project: Project) -> list[str]:
    """agentrun's own files of the run, as repository paths: the spec, STATE.md (a symlink:
    the link and its target) and the folder of execution records (`.specflow/execution/`)."""
    found = []
    for path in (spec.path, project.state_md, project.execution_dir):
        for candidate in (Path(os.path.abspath(path)), Path(path).resolve()):
            try:
                rel = candidate.relative_to(root).as_posix()
            except ValueError:
                continue
            found.append(rel + "/" if path == project.execution_dir else rel)
    return sorted(set(found))


def _body(spec: Spec, title: str) -> str:
    section = spec.section(title)
    return section.body.strip() if section else ""


def _fence(*texts: str) -> str:
    """A code fence longer than any run of backticks in the texts, so none can close it."""
    longest = max((len(r) for t in texts for r in re.findall(r"`+", t)), default=0)
    return "`" * max(4, longest + 1)


def _integration(state: RunState) -> tuple[str, str]:
    """The last integration check in words, and its output's tail."""
    if not state.integration:
        if state.integration_command:
            return f"`{state.integration_command}` configured, not run yet", ""
        return "none: the project has no validation command", ""
    check = state.integration[-1]
    outcome = "passed" if check.ok else "FAILED"
    return (f"`{check.command}` on the merged result of wave {check.wave}: {outcome}",
            check.output[-OUTPUT_LIMIT:].strip())


def review_task(spec: Spec, project: Project, given: ReviewInput, part: int = 1) -> str:
    """The reviewer's task text (prompts/review.md) for part `part` of the change."""
    state = given.state
    integration, output = _integration(state)
    spec_path = relpath(spec.path, project.root)
    parts = given.diff.parts
    diff = parts[part - 1] if parts else ""
    return render("review", {
        "spec_id": spec.id, "spec_path": spec_path, "task": _body(spec, "Task"),
        "requirements": _body(spec, "Requirements"),
        "criteria": [inline(c.text) for c in spec.acceptance_criteria],
        "constraints": _body(spec, "Constraints"), "run_id": state.run_id,
        "run_status": state.status, "base": given.base, "head": given.head,
        "base_short": given.base[:12], "head_short": given.head[:12],
        "deviations": given.deviations, "integration": integration,
        "integration_output": output, "diff": diff, "diff_stat": given.diff.stat,
        "part": part, "parts": max(1, len(parts)), "left_out": given.diff.left_out,
        # an override of this template written before the diff came in parts may name these
        "diff_cut": False, "diff_limit": f"{PART_CHARS:,}",
        "fence": _fence(diff, output),
    }, project.overrides_root)
