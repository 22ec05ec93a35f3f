"""Human-readable rendering of plans and findings (Rich renderables; plain mode prints text)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from agentrun.plan import Plan, SpecFinding, Wave
    from agentrun.spec.model import Spec

SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


def plan_summary(spec: Spec, plan: Plan, console: Console, max_parallel: int | None = None) -> None:
    """The pre-execution summary: spec, mode and why, waves with batches, findings.

    `max_parallel` caps the workers that run at once (the rest of a wave queues)."""
    from rich.markup import escape

    if spec.source is not None:  # a plan from another tool: its tasks carry its state
        from agentrun.formats.render import FORMAT_NAMES

        status = f"{FORMAT_NAMES.get(spec.source.format, spec.source.format)} plan"
    else:
        status = spec.status or "unknown"
    title = spec.title.removeprefix(spec.id).lstrip(":—- ").strip()
    heading = f"[bold]{escape(spec.id)}[/bold]" + (f": {escape(title)}" if title else "")
    console.print(f"{heading}  [dim](status: {escape(status)})[/dim]")
    console.print(f"Execution mode: [bold]{plan.mode}[/bold] — {escape(plan.mode_reason)}")
    groups = {g.id: g for g in spec.groups}
    if plan.mode == "orchestrated":
        cap = f" (at most {max_parallel} at once)" if max_parallel else ""
        console.print(f"Task groups: {len(spec.groups)} · Waves: {len(plan.waves)} · "
                      f"Workers: {plan.workers}{cap}")
    rows = [("Wave", "Parallel", "Worker", "Groups")]
    for wave in plan.waves:
        parallel = str(_at_once(wave, max_parallel))
        for n, batch in enumerate(wave.batches or [None]):
            ids = batch.groups if batch is not None else []
            worker = ("+".join(ids) or "all") if batch is not None else "-"
            names = [f"{gid} {groups[gid].title}".strip() if gid in groups else gid
                     for gid in ids] or ["(whole spec)"]
            for k, name in enumerate(names):
                first = n == 0 and k == 0
                rows.append((wave.label if first else "", parallel if first else "",
                             worker if k == 0 else "", name))
    for n, line in enumerate(plan_lines(rows, console.width)):
        console.print(line, style="bold" if n == 0 else None, markup=False, highlight=False)
    if plan.mode == "orchestrated":
        widest = max(plan.waves, key=lambda w: len(w.batches))
        at_once = _at_once(widest, max_parallel)
        queued = len(widest.batches) - at_once
        console.print(f"Parallelization: wave {widest.label} runs {at_once} "
                      "workers simultaneously"
                      + (f", {queued} more queued (--max-parallel {max_parallel})"
                         if queued else ""))
    findings(plan.findings, console)


def plan_lines(rows: list[tuple[str, str, str, str]], width: int) -> list[str]:
    """The plan table as text lines: one line per group, under its wave and worker. The
    columns keep their width whatever the terminal's (a wave of 60 groups on one line pushed
    the other columns off a table laid out by width); a worker or group name too long for
    the line is cut with an ellipsis, never dropped."""
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    widths[2] = min(widths[2], MAX_WORKER_WIDTH)
    room = max(MIN_GROUPS_WIDTH, width - sum(widths) - 2 * len(widths))
    out = []
    for wave, at_once, worker, groups in rows:
        cells = [wave.ljust(widths[0]), at_once.rjust(widths[1]),
                 _cut(worker, widths[2]).ljust(widths[2]), _cut(groups, room)]
        out.append("  ".join(cells).rstrip())
    return out


MAX_WORKER_WIDTH = 24
MIN_GROUPS_WIDTH = 12


def _cut(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _at_once(wave: Wave, max_parallel: int | None) -> int:
    return min(len(wave.batches), max_parallel or len(wave.batches))


def findings(items: list[SpecFinding], console: Console) -> None:
    from rich.markup import escape

    for f in items:
        where = f" (line {f.line})" if f.line else ""
        style = SEVERITY_STYLE[f.severity]
        console.print(f"[{style}]{f.severity}[/{style}] {escape(f.code)}{where}: "
                      f"{escape(f.message)}")
