"""What one worker is given: its assignment, and the names of its branch and worktree."""

from __future__ import annotations

from pathlib import Path

from agentrun.plan import Plan
from agentrun.project import Project
from agentrun.protocol import SHARED_SECTIONS, Assignment, GroupAssignment
from agentrun.run.options import RunOptions
from agentrun.spec.model import Spec


def ref_safe(text: str) -> str:
    """`text` usable as one component of a git ref or a directory name."""
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text)


def batch_branch(spec_id: str, run_id: str, batch_id: str) -> str:
    """A local worker's branch: the run id keeps runs of one spec apart."""
    return f"agentrun/{ref_safe(spec_id)}/{run_id}/{ref_safe(batch_id)}"


def ci_branch(spec_id: str, batch_id: str) -> str:
    """The branch a CI worker commits on: `agentrun/<spec>/<batch>` (no run id: jobs of one
    workflow run must agree on it without talking to each other)."""
    return f"agentrun/{ref_safe(spec_id)}/{ref_safe(batch_id)}"


def make_assignment(project: Project, spec: Spec, plan: Plan, options: RunOptions, *,
                    run_id: str, spec_path: str, batch_id: str, groups: list[str],
                    worktree: Path, branch: str, base: str, result_path: Path,
                    record_dir: Path, control_dir: Path | None = None) -> Assignment:
    """The assignment for one batch: its groups and only the spec sections a worker needs.

    Shared by local workers (a worktree per batch) and `agentrun worker --spec` in a CI job
    (the job's checkout); `record_dir` receives the transcript, and the progress stream the
    orchestrator reads back unless `control_dir` (out of every worker's reach) is given. Agent and
    prompt overrides come from the commit the run started at (`Project.pinned_overrides`).
    """
    sections = {}
    for title in SHARED_SECTIONS:
        sec = spec.section(title)
        if sec is not None:
            sections[title.lower().replace(" ", "_")] = sec.body.strip()
    spec_groups = [spec.group(g) for g in groups]
    agent = "spec-executor" if plan.mode == "single" else "spec-executor-worker"
    overrides_commit, overrides_root = project.pinned_overrides()
    return Assignment(
        run_id=run_id, spec_id=spec.id, spec_path=spec_path,
        spec_title=spec.title, complexity=spec.complexity, batch=batch_id,
        groups=[GroupAssignment(id=g.id, title=g.title, tasks=g.tasks,
                                dependencies=g.dependencies, files=g.files,
                                context=g.context, checks=g.checks)
                for g in spec_groups if g is not None],
        sections=sections,
        acceptance_criteria=[c.text for c in spec.acceptance_criteria],
        project_md=project.project_text(),
        project_root=str(overrides_root) if overrides_root else None,
        overrides_commit=overrides_commit, command_env=list(project.config.command_env),
        max_write_bytes=project.config.max_write_bytes,
        worktree=str(worktree), branch=branch, base_commit=base, agent=agent,
        provider=options.provider, limits=options.limits,
        validation_command=options.validation_command,
        pricing=options.pricing, result_path=str(result_path),
        transcript_path=str(record_dir / "transcript.jsonl"),
        progress_path=str((control_dir or record_dir) / "progress.ndjson"),
        interactive=options.interactive, sandbox=options.sandbox, executor=options.executor)
