"""What the reviewer is shown: the spec's contract, and the run's result as git and the run's
record have it (never the workers' own account of what they did)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from agentrun.agent.prompts import render
from agentrun.errors import BadInput
from agentrun.fsutil import relpath
from agentrun.gitcli import run_git
from agentrun.project import Project
from agentrun.report.escape import inline
from agentrun.report.execution_state import RunState, load_state, state_path
from agentrun.spec.model import Spec

DIFF_LIMIT = 60_000  # characters of `git diff` in the task; the reviewer reads files for more
OUTPUT_LIMIT = 4_000  # characters of the integration check's output
EXCLUDE = ":(exclude).specflow"  # the run's own records are not the change under review


@dataclass
class ReviewInput:
    """The run under review and its change."""

    state: RunState
    head: str
    diff: str
    diff_stat: str
    diff_cut: bool
    deviations: list[str] = field(default_factory=list)


def _git(root: Path, *args: str) -> str | None:
    proc = run_git(*args, cwd=root)
    return proc.stdout if proc.returncode == 0 else None


def gather(spec: Spec, project: Project) -> ReviewInput:
    """The last run of `spec` and its diff from the run's base commit to HEAD. BadInput when
    there is no run to review, or its base commit is gone."""
    path = state_path(project.execution_dir, spec.id)
    state = load_state(path)
    if state is None:
        raise BadInput(f"{spec.id}: no run to review: {relpath(path, project.root)} is missing "
                       "or unreadable",
                       hint=f"run the spec first (`agentrun run {spec.id}`), then review it")
    root = project.root
    head = (_git(root, "rev-parse", "--verify", "HEAD^{commit}") or "").strip()
    if not head:
        raise BadInput(f"{root} has no commit to review", hint="run the spec first")
    if _git(root, "cat-file", "-e", f"{state.base_commit}^{{commit}}") is None:
        raise BadInput(f"{spec.id}: the run's base commit {state.base_commit[:12]} is not in "
                       "this repository", hint="run the spec again, then review it")
    diff = _git(root, "diff", "--no-color", "--no-ext-diff", state.base_commit, head,
                "--", ".", EXCLUDE) or ""
    stat = _git(root, "diff", "--stat", "--no-color", state.base_commit, head,
                "--", ".", EXCLUDE) or ""
    cut = len(diff) > DIFF_LIMIT
    deviations = [f"{gid}: {inline(d)}" for gid, g in state.groups.items() for d in g.deviations]
    return ReviewInput(state, head, diff[:DIFF_LIMIT] if cut else diff, stat.rstrip(), cut,
                       deviations)


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


def review_task(spec: Spec, project: Project, given: ReviewInput) -> str:
    """The reviewer's task text (prompts/review.md)."""
    state = given.state
    integration, output = _integration(state)
    spec_path = relpath(spec.path, project.root)
    return render("review", {
        "spec_id": spec.id, "spec_path": spec_path, "task": _body(spec, "Task"),
        "requirements": _body(spec, "Requirements"),
        "criteria": [inline(c.text) for c in spec.acceptance_criteria],
        "constraints": _body(spec, "Constraints"), "run_id": state.run_id,
        "run_status": state.status, "base": state.base_commit, "head": given.head,
        "base_short": state.base_commit[:12], "head_short": given.head[:12],
        "deviations": given.deviations, "integration": integration,
        "integration_output": output, "diff": given.diff, "diff_stat": given.diff_stat,
        "diff_cut": given.diff_cut, "diff_limit": f"{DIFF_LIMIT:,}",
        "fence": _fence(given.diff, output),
    }, project.overrides_root)
