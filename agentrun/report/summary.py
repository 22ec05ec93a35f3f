"""The `## Execution Summary` a run writes into its spec (its shape, plus accounting)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from agentrun.core.status import Status
from agentrun.report.escape import inline
from agentrun.report.execution_state import GroupState, IntegrationCheck, RunState

STATUS_MARK = {"complete": "✅ complete", "partial": "⚠️ partial", "failed": "❌ failed",
               "blocked": "⛔ blocked", "interrupted": "⏸ interrupted", "pending": "… pending",
               "running": "… running"}


def format_tokens(n: int) -> str:
    return f"{n:,}"


def format_cost(cost: float | None) -> str:
    return "unknown (no price for this model)" if cost is None else f"${cost:.4f}"


def render_summary(state: RunState, criteria: list[str], when: str) -> str:
    """The section body (without the `## Execution Summary` heading)."""
    groups = list(state.groups.values())
    commits = [c for g in groups for c in g.commits]
    usage = state.usage
    lines = [
        f"**Executed:** {when}",
        f"**Run:** `{state.run_id}`",
        f"**Mode:** {state.mode} ({len(state.waves)} wave(s), "
        f"{len({g.batch for g in groups if g.batch})} worker(s))",
        f"**Result:** {state.status}"
        + ("" if state.integration_command else " (not validated: no validation command)"),
        f"**Review:** {inline(review_words(state))}",
        f"**Commits:** {len(commits)}",
        f"**Tokens:** {format_tokens(usage.total)} (input {format_tokens(usage.input_tokens)}, "
        f"output {format_tokens(usage.output_tokens)}, cache read "
        f"{format_tokens(usage.cache_read_tokens)}, cache write "
        f"{format_tokens(usage.cache_write_tokens)})",
        f"**Cost:** {format_cost(state.cost_usd)}",
    ]
    if state.provider:
        lines.append(f"**Model:** {state.provider}/{state.model}")
    lines += ["", "### Waves", "", "| Wave | Groups | Status |", "|------|--------|--------|"]
    for wave in state.waves:
        lines.append(f"| {wave.label} | {', '.join(wave.groups) or '(all)'} | {wave.status} |")
    lines += ["", "### Integration", ""] + _integration(state)
    lines += ["", "### Task Groups", "",
              "| Group | Status | Commits | Attempts | Tokens | Notes |",
              "|-------|--------|---------|----------|--------|-------|"]
    for g in groups:
        tokens = g.usage.total
        note = inline(g.error or g.summary or "", limit=160)
        short = ", ".join(c[:7] for c in g.commits) or "—"
        lines.append(f"| {g.id} | {STATUS_MARK.get(g.status, g.status)} | {short} | "
                     f"{g.attempts} | {format_tokens(tokens)} | {note} |")
    lines += ["", "### Files Created", ""]
    lines += _files(groups, lambda g: g.files_created)
    lines += ["", "### Files Modified", ""]
    lines += _files(groups, lambda g: g.files_modified)
    lines += ["", "### Acceptance Criteria Status", ""]
    lines += _criteria_status(state, groups, criteria)
    lines += ["", "### Deviations", ""]
    deviations = [f"- {g.id}: {inline(d)}" for g in groups for d in g.deviations]
    lines += deviations or ["None"]
    kept = kept_worktrees(g for g in groups if g.status != Status.COMPLETE)
    if kept:
        lines += ["", "### Kept Worktrees", ""]
        lines += [f"- {', '.join(ids)}: {_code(path)} (branch {_code(branch)})"
                  for ids, path, branch in kept]
    return "\n".join(lines) + "\n"


def _criteria_status(state: RunState, groups: list[GroupState],
                     criteria: list[str]) -> list[str]:
    """Each criterion as the latest review judged it; before any review, as the workers
    claimed it (their claims are named as such)."""
    if not criteria:
        return ["(the spec lists no acceptance criteria)"]
    last = state.reviews[-1] if state.reviews else None
    judged = last.met() if last is not None else None
    if last is not None and judged is not None and len(judged) == len(criteria):
        word = f"Review v{last.version}" + ("" if last.judged else f", {last.result}")
        return [f"- [{'x' if ok else ' '}] {criterion} ({word}: "
                f"{'met' if ok else 'not met'})"
                for criterion, ok in zip(criteria, judged, strict=True)]
    met = {c.strip().lower(): g.id for g in groups for c in g.criteria_met}
    lines = []
    for criterion in criteria:
        by = _met_by(criterion, met)
        lines.append(f"- [{'x' if by else ' '}] {criterion}" + (f" ({by})" if by else ""))
    return lines


def kept_worktrees(groups: Iterable[GroupState]) -> list[tuple[list[str], str, str]]:
    """The worktrees `groups` kept, once each: (the groups in it, its path, its branch). The
    groups of one batch share their worker's worktree."""
    kept: dict[str, tuple[list[str], str, str]] = {}
    for g in groups:
        if g.worktree:
            kept.setdefault(g.worktree, ([], g.worktree, g.branch or ""))[0].append(g.id)
    return list(kept.values())


def review_outcome(state: RunState) -> str | None:
    """The review as CI reports count it: "passed", "failure" or "skipped"; None before the
    run has ended (an aggregate of a wave that is not the last)."""
    if not state.finished:
        return None
    if not state.reviews:
        return "skipped"
    return "passed" if state.reviews[-1].result == "APPROVED" else "failure"


def review_words(state: RunState) -> str:
    """The run's review in a few words: for the Execution Summary and the terminal."""
    if not state.reviews:
        return f"not reviewed ({state.review_skipped})" if state.review_skipped \
            else "not reviewed"
    last = state.reviews[-1]
    if last.version is None:
        return f"no review submitted — not approved ({last.error or 'no output'})"
    said = f"{last.result} (Review v{last.version}, {len(state.reviews)} review(s))"
    return said if last.judged else f"{said} — not approved: {last.error or 'no verdict'}"


def _integration(state: RunState) -> list[str]:
    """Whether each wave's merged result passed the validation command, and for a failure,
    what breaks it, where the target branch is, the kept branches and the output's tail."""
    if not state.integration_command:
        return ["Not integration-checked: no validation command."]
    if not state.integration:
        return [f"Nothing was merged to check with `{state.integration_command}`."]
    lines: list[str] = []
    for check in state.integration:
        lines += _check_lines(check)
    return lines


def _check_lines(check: IntegrationCheck) -> list[str]:
    head = f"- Wave {check.wave}: `{check.command}` on `{check.commit[:12]}`"
    if check.ok:
        return [head + ": passed"]
    lines = [head + ": **failed**"]
    if check.base_fails:
        lines.append("  - the wave's base fails it already")
    elif check.culprits:
        lines.append("  - broken by: " + "; ".join(" + ".join(c) for c in check.culprits))
    if check.note:
        lines.append(f"  - {check.note}")
    if check.kept_branches:
        lines.append("  - branches kept: " + ", ".join(f"`{b}`" for b in check.kept_branches))
    if check.output:
        fence = "`" * max(3, _longest_backtick_run(check.output) + 1)
        lines += ["", fence, check.output, fence]
    return lines


def _longest_backtick_run(text: str) -> int:
    run = best = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        best = max(best, run)
    return best


def _files(groups: list[GroupState], paths: Callable[[GroupState], list[str]]) -> list[str]:
    seen: dict[str, list[str]] = {}
    for g in groups:
        for path in paths(g):
            seen.setdefault(path, []).append(g.id)
    return [f"- {_code(p)} ({', '.join(ids)})" for p, ids in seen.items()] or ["None"]


def _code(text: str) -> str:
    """A path as inline code; a backtick in it (a model chose the name) widens the fence."""
    value = inline(text)
    fence = "``" if "`" in value else "`"
    return f"{fence} {value} {fence}" if fence == "``" else f"`{value}`"


def _met_by(criterion: str, met: dict[str, str]) -> str | None:
    key = criterion.strip().lower()
    if key in met:
        return met[key]
    # models often quote a criterion's name or its first words rather than the whole line
    for text, gid in met.items():
        if text and (key.startswith(text) or text.startswith(key[:40]) or text in key):
            return gid
    return None
