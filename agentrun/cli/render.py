"""Human-readable rendering of plans and findings (Rich renderables; plain mode prints text)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentrun.plan import Finding, Plan
    from agentrun.spec.model import Spec

SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


def plan_summary(spec: Spec, plan: Plan, console, max_parallel: int | None = None) -> None:
    """The pre-execution summary: spec, mode and why, waves with batches, findings.

    `max_parallel` caps the workers that run at once (the rest of a wave queues)."""
    from rich.markup import escape
    from rich.table import Table

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
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("Wave")
    table.add_column("Workers", no_wrap=True)
    table.add_column("Parallel", justify="right", no_wrap=True)
    table.add_column("Groups", no_wrap=True, overflow="ellipsis")
    for wave in plan.waves:
        names = "\n".join(f"{gid} {_short(groups[gid].title)}".strip() if gid in groups
                          else gid for gid in wave.groups) or "(whole spec)"
        batches = " | ".join("+".join(b.groups) or "all" for b in wave.batches)
        table.add_row(wave.label, escape(batches), str(_at_once(wave, max_parallel)),
                      escape(names))
    console.print(table)
    if plan.mode == "orchestrated":
        widest = max(plan.waves, key=lambda w: len(w.batches))
        at_once = _at_once(widest, max_parallel)
        queued = len(widest.batches) - at_once
        console.print(f"Parallelization: wave {widest.label} runs {at_once} "
                      "workers simultaneously"
                      + (f", {queued} more queued (--max-parallel {max_parallel})"
                         if queued else ""))
    findings(plan.findings, console)


def _at_once(wave, max_parallel: int | None) -> int:
    return min(len(wave.batches), max_parallel or len(wave.batches))


def findings(items: list[Finding], console) -> None:
    from rich.markup import escape

    for f in items:
        where = f" (line {f.line})" if f.line else ""
        style = SEVERITY_STYLE[f.severity]
        console.print(f"[{style}]{f.severity}[/{style}] {escape(f.code)}{where}: "
                      f"{escape(f.message)}")


def _short(text: str, width: int = 44) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
