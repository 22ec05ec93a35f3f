"""A wave's CI results read and checked before `agentrun aggregate` changes anything.

The worker jobs of a CI run (run/ci.py, docs/ARCHITECTURE.md "In CI") hand back result files
and branches that aggregate must not take on their word: each file is matched to one batch of
the plan (the branch its work is on derived here, never as the file names it), the results
must be of one wave whose earlier waves are aggregated in the committed execution state and
merged into history, and every branch with work must be in this repository. All of it is
refused (BadInput, exit 2) before the first merge; stepping the wave is run/ci.py's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrun import gitcli, workspace
from agentrun.core.errors import BadInput
from agentrun.core.results import WorkerResult
from agentrun.core.status import RunStatus, Status
from agentrun.plan import Batch, Plan, Wave
from agentrun.project import Project
from agentrun.report.execution_state import RunState, load_state, state_path
from agentrun.run.assignment import ci_branch
from agentrun.spec.model import Spec

RESULT_HINT = ("pass the result JSON files the wave's `agentrun worker --spec ... --out FILE` "
               "jobs wrote (e.g. downloaded artifacts)")
WAVE_DONE, WAVE_SKIPPED = "done", "skipped"  # WaveState.status of an aggregated wave


# --- matching a result to its batch -------------------------------------------------------

def find_batch(plan: Plan, value: str) -> tuple[Wave, Batch] | None:
    """The plan's batch named by `value`: a batch id (`G2_G3`, `single`) or its groups in any
    order (`G2,G3`)."""
    wanted = sorted({v.strip() for v in value.split(",") if v.strip()})
    for wave in plan.waves:
        for batch in wave.batches:
            if wanted == [batch.id] or wanted == sorted(batch.ids):
                return wave, batch
    return None


def describe_batches(plan: Plan) -> str:
    return "; ".join(f"wave {w.label}: " + ", ".join(",".join(b.ids) for b in w.batches)
                     for w in plan.waves)

# --- the execution state between waves -------------------------------------------------------

def landed_refs(state: RunState, gid: str) -> list[str]:
    """Commits that prove a merged group's work: its merge commit, else its own commits."""
    group = state.groups.get(gid)
    if group is None or not group.status.landed_work:
        return []
    return [group.merge_commit] if group.merge_commit else list(group.commits)


def previous_waves_problem(root: Path, plan: Plan, state: RunState | None, wave: Wave,
                           at: str, where: str) -> str | None:
    """Why `wave` cannot run on commit `at` yet, or None when it can.

    Every earlier wave must be aggregated in `state`, and the work it merged must be in the
    history of `at` (`where` names that commit in messages).
    """
    if wave.number == 1:
        return None
    earlier = plan.waves[:wave.number - 1]
    if state is None:
        return (f"wave {wave.label} needs wave {earlier[-1].label} aggregated first, but "
                f"{where} has no execution state for {plan.spec_id}")
    if [w.groups for w in state.waves] != [w.groups for w in plan.waves]:
        return (f"the execution state of {plan.spec_id} (run {state.run_id}) was written for "
                "another plan of this spec (its waves differ)")
    for w in earlier:
        status = state.waves[w.number - 1].status
        if status not in (WAVE_DONE, WAVE_SKIPPED):
            return (f"wave {wave.label} needs wave {w.label} aggregated first (run "
                    f"{state.run_id} has wave {w.label} {status})")
        for gid in w.groups:
            for ref in landed_refs(state, gid):
                if workspace.resolve_ref(root, ref) is None or \
                        not workspace.is_ancestor(root, ref, at):
                    return (f"{gid} of wave {w.label} was merged as {ref[:12]}, which is not in "
                            f"the history of {where}")
    return None


def read_state_at(root: Path, commit: str, rel_path: str) -> RunState | None:
    """The execution state as committed in `commit` (None when absent or unreadable)."""
    proc = gitcli.run_git("show", f"{commit}:{rel_path}", cwd=root)
    if proc.returncode != 0:
        return None
    try:
        return RunState.from_dict(json.loads(proc.stdout))
    except (ValueError, TypeError, KeyError):
        return None


# --- result files ----------------------------------------------------------------------------

@dataclass
class CIResult:
    """One result file of a CI job, matched to its batch of the plan."""

    path: Path
    result: WorkerResult
    wave: Wave
    batch: Batch
    branch: str  # the batch's branch, as aggregate derives it (never as the file names it)
    base_commit: str | None = None  # the commit the job started from, as it reported it
    provider: str | None = None
    model: str | None = None
    ref: str | None = None  # the git ref holding the branch here (local or remote-tracking)
    problem: str | None = None  # why the batch fails without merging (a forged result)


def read_results(paths: Iterable[Path], spec: Spec, plan: Plan) -> list[CIResult]:
    """Read and match result files; BadInput (exit 2) names the first file that is unusable."""
    known = {gid for w in plan.waves for b in w.batches for gid in b.ids}
    found: list[CIResult] = []
    seen: dict[str, Path] = {}
    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise BadInput(f"result file not found: {path}", hint=RESULT_HINT)
        try:
            result, data = WorkerResult.read_with_extras(path)
        except ValueError as exc:
            raise BadInput(str(exc), hint=RESULT_HINT) from None
        named = data.get("spec")
        if named and named != spec.id:
            raise BadInput(f"{path} is a result for {named}, not {spec.id}",
                           hint="aggregate each spec's results separately")
        ids = list(result.groups or [result.group])
        unknown = [g for g in ids if g not in known]
        if unknown:
            raise BadInput(f"{path} is a result for {', '.join(unknown)}, which "
                           f"{'is' if len(unknown) == 1 else 'are'} not in the plan of "
                           f"{spec.id} (groups: {', '.join(sorted(known)) or 'none'})",
                           hint="pass only this spec's results; if the spec changed, plan and "
                                "run the workers again (`agentrun plan SPEC --matrix`)")
        match = find_batch(plan, ",".join(ids))
        if match is None:
            raise BadInput(f"{path} covers groups {', '.join(ids)}, which are not one worker "
                           f"batch of the plan ({describe_batches(plan)})",
                           hint="give `aggregate` the same --mode/--max-workers as `plan "
                                "--matrix`")
        wave, batch = match
        if batch.id in seen:
            raise BadInput(f"two results for batch {batch.id}: {seen[batch.id]} and {path}",
                           hint="pass one result per matrix job")
        seen[batch.id] = path
        branch = ci_branch(spec.id, batch.id)
        problem = None
        if result.branch and result.branch != branch:
            problem = (f"{path} names branch {result.branch}, but batch {batch.id}'s work is "
                       f"on {branch}: not merged")
        found.append(CIResult(path=path, result=result, wave=wave, batch=batch, branch=branch,
                              base_commit=_text(data.get("base_commit")),
                              provider=_text(data.get("provider")),
                              model=_text(data.get("model")), problem=problem))
    if not found:
        raise BadInput("no result files given", hint=RESULT_HINT)
    waves = sorted({r.wave.number for r in found})
    if len(waves) > 1:
        labels = ", ".join(plan.waves[n - 1].label for n in waves)
        raise BadInput(f"the results span waves {labels}; aggregate one wave at a time, in order",
                       hint="pass only the results of the wave that just ran")
    return found


def results_wave(paths: Iterable[Path], spec: Spec, plan: Plan) -> Wave:
    """The wave the result files are of (`read_results` checks them: BadInput, exit 2)."""
    return read_results(paths, spec, plan)[0].wave


def _text(value: Any) -> str | None:
    return str(value) if isinstance(value, str) and value else None


def resolve_branch(root: Path, branch: str, remote: str) -> str | None:
    """The ref holding `branch`: the local branch, else `<remote>/<branch>` after a fetch."""
    for ref in (f"refs/heads/{branch}", f"refs/remotes/{remote}/{branch}"):
        if workspace.resolve_ref(root, ref) is not None:
            return ref
    return None

# --- the checks before aggregate changes anything --------------------------------------------

def prepare(project: Project, spec: Spec, plan: Plan, paths: Iterable[Path], *, remote: str,
            allow_missing: bool) -> tuple[list[CIResult], Wave, RunState | None]:
    """Check everything `aggregate` needs before it changes anything (BadInput, exit 2):
    the result files, the wave order, and the branches the results name."""
    root = workspace.repo_root(project.root)
    results = read_results(paths, spec, plan)
    wave = results[0].wave
    previous = load_state(state_path(project.execution_dir, spec.id)) if wave.number > 1 \
        else None
    head = workspace.head_commit(root)
    problem = previous_waves_problem(root, plan, previous, wave, head, "HEAD")
    if problem:
        raise BadInput(problem, hint=f"aggregate the earlier waves' results first, push, and "
                                     f"run wave {wave.label}'s jobs on the result")
    if previous is not None:
        if previous.status != RunStatus.RUNNING:
            raise BadInput(f"run {previous.run_id} of {spec.id} already ended "
                           f"({previous.status}); wave {wave.label} is not part of it",
                           hint="start a new run with wave 1")
        if previous.waves[wave.number - 1].status != "pending":
            raise BadInput(f"wave {wave.label} was already aggregated in run "
                           f"{previous.run_id}",
                           hint="aggregate the next wave's results, or start a new run with "
                                "wave 1")
    given = {r.batch.id for r in results}
    missing = [b for b in wave.batches if b.id not in given and _needs_result(previous, spec, b)]
    if missing and not allow_missing:
        names = ", ".join(b.id for b in missing)
        raise BadInput(f"no result for batch {names} of wave {wave.label}",
                       hint="pass every matrix job's result file, or --allow-missing to count "
                            "the missing ones as failed")
    for ci in results:
        if ci.problem:
            continue  # fails its batch (`CIResultsBackend`), whatever git holds
        ci.ref = resolve_branch(root, ci.branch, remote)
        if ci.ref is None and Status(ci.result.status).landed_work:
            raise BadInput(
                f"branch {ci.branch} of {ci.path} ({ci.result.status}) is not in this "
                f"repository: neither a local branch nor {remote}/{ci.branch}",
                hint=f"hand it on from the worker job — push it (`git push {remote} "
                     f"HEAD:refs/heads/{ci.branch}`) or bundle it (`git bundle create "
                     f"B.bundle refs/heads/{ci.branch} ^<base>`) — and fetch it before "
                     f"aggregating (`git fetch {remote} '+refs/heads/agentrun/*:refs/remotes/"
                     f"{remote}/agentrun/*'`, or `git fetch B.bundle "
                     f"'+refs/heads/{ci.branch}:refs/remotes/{remote}/{ci.branch}'`)")
        if ci.ref is not None and wave.number > 1 and \
                Status(ci.result.status).landed_work:
            problem = previous_waves_problem(root, plan, previous, wave, ci.ref, ci.branch)
            if problem:
                raise BadInput(f"{ci.path}: {problem}",
                               hint=f"run wave {wave.label}'s jobs on the commit the previous "
                                    "wave's aggregate pushed")
    return results, wave, previous


def _needs_result(previous: RunState | None, spec: Spec, batch: Batch) -> bool:
    """A batch needs a result unless its dependencies are already known to have failed."""
    if previous is None:
        return True
    groups = [g for g in map(spec.group, batch.groups) if g is not None]
    deps = {d for g in groups for d in g.dependencies}
    return not any(previous.groups.get(d) and previous.groups[d].status.blocks_dependents
                   for d in deps)
