"""Run progress for people: a live Rich table in a terminal, timestamped lines elsewhere.

Both consume the orchestrator's events; neither writes to stdout (that belongs to the final
report or the `--json` document).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from agentrun.cli.output import Output


@dataclass
class Row:
    batch: str
    groups: list[str]
    state: str = "starting"
    step: int = 0
    tool: str = ""
    tokens: int = 0
    cost: float | None = None
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None

    @property
    def elapsed(self) -> float:
        return (self.ended or time.monotonic()) - self.started


class Progress:
    """Turns events into rows; subclasses decide how to show them."""

    def __init__(self, out: Output) -> None:
        self.out = out
        self.rows: dict[str, Row] = {}
        self.waves_total = 0
        self.waves_done = 0

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event.get("type", "")
        batch = event.get("batch")
        if kind == "run_start":
            self.waves_total = event.get("waves", 0)
        elif kind == "wave_done":
            self.waves_done += 1
        elif kind == "worker_start" and batch:
            self.rows[batch] = Row(batch, list(event.get("groups", [])))
        elif batch in self.rows:
            row = self.rows[batch]
            if kind == "agent_step":
                row.state = "working"
                row.step = event.get("step", row.step)
                row.tool = event.get("tool") or row.tool
                row.tokens = event.get("tokens", row.tokens)
            elif kind == "agent_attempt":
                row.state = f"attempt {event.get('attempt', '?')}"
            elif kind == "worker_result":
                row.state = event.get("status", "done")
                row.tokens = event.get("tokens", row.tokens)
                row.cost = event.get("cost_usd")
                row.ended = time.monotonic()
            elif kind == "worker_timeout":
                row.state = "timeout"
            elif kind == "merge_conflict":
                row.state = "conflict"
            elif kind == "merged":
                row.state = "merged"
        self.show(event)

    def show(self, event: dict[str, Any]) -> None:
        raise NotImplementedError


class PlainProgress(Progress):
    """One timestamped line per meaningful event (CI logs, pipes)."""

    QUIET = {"agent_step", "agent_start", "agent_done", "agent_event"}

    def show(self, event: dict[str, Any]) -> None:
        kind = event.get("type", "")
        text = describe(event)
        if text and kind not in self.QUIET:
            self.out.progress(text)


def describe(e: dict[str, Any]) -> str | None:
    """One line for an event, or None for events not worth a line of their own."""
    kind = e.get("type")
    b = e.get("batch", "")
    if kind == "run_start":
        return f"run {e['run_id']}: {e['spec']} in {e['mode']} mode, {e['waves']} wave(s)"
    if kind == "wave_start":
        return f"wave {e['wave']}: starting {', '.join(e['batches']) or 'nothing'}"
    if kind == "worker_start":
        return f"worker {b}: started in {e['worktree']}"
    if kind == "agent_attempt":
        return f"worker {b}: attempt {e.get('attempt')}"
    if kind == "worker_result":
        extra = f" — {e['error']}" if e.get("error") else ""
        return (f"worker {b}: {e['status']} ({e['commits']} commit(s), "
                f"{e['tokens']:,} tokens){extra}")
    if kind == "worker_timeout":
        return f"worker {b}: timed out after {e['timeout_s']:g}s, killed"
    if kind == "merged":
        return f"merged {b} ({(e.get('commit') or '')[:7]})"
    if kind == "merge_conflict":
        return f"merge conflict in {b}: {', '.join(e['conflicts']) or e['message']}"
    if kind == "blocked":
        return f"blocked {', '.join(e['groups'])}: dependency {', '.join(e['by'])} failed"
    if kind == "kept_worktree":
        return f"kept worktree of {b} for inspection: {e['worktree']}"
    if kind == "fallback_sequential":
        return f"worker processes unavailable ({e['reason']}); running sequentially"
    if kind == "interrupt":
        return f"{e['signal']} received: stopping workers and saving state"
    if kind == "wave_done":
        failed = e.get("failed") or []
        return f"wave {e['wave']} done" + (f"; failed: {', '.join(failed)}" if failed else "")
    if kind == "committed":
        return (f"{e['message'].splitlines()[0]} ({e['commit'][:7]}): "
                f"{', '.join(e['paths'])}")
    if kind == "warning":
        return f"warning: {e['message']}"
    return None


class LiveProgress(Progress):
    """A live table (one row per worker) and a wave progress bar, on stderr."""

    def __enter__(self) -> LiveProgress:
        from rich.live import Live

        self._live = Live(self._render(), console=self.out.stderr, refresh_per_second=8,
                          transient=False)
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.update(self._render())
        self._live.__exit__(None, None, None)

    def show(self, event: dict[str, Any]) -> None:
        if event.get("type") in ("merge_conflict", "interrupt", "fallback_sequential",
                                 "kept_worktree", "blocked", "committed"):
            line = describe(event)
            if line:
                self._live.console.print(f"[yellow]{line}[/yellow]")
        self._live.update(self._render())

    def _render(self):
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        table = Table(box=None, header_style="bold", pad_edge=False)
        for col in ("Worker", "Groups", "State", "Step", "Last tool", "Tokens", "Cost",
                    "Elapsed"):
            table.add_column(col, justify="right" if col in ("Step", "Tokens", "Cost",
                                                             "Elapsed") else "left")
        styles = {"complete": "green", "merged": "green", "failed": "red", "timeout": "red",
                  "conflict": "red", "partial": "yellow", "interrupted": "yellow"}
        for row in self.rows.values():
            cost = "—" if row.cost is None else f"${row.cost:.4f}"
            table.add_row(row.batch, ",".join(row.groups),
                          Text(row.state, style=styles.get(row.state, "cyan")), str(row.step),
                          row.tool, f"{row.tokens:,}", cost, f"{row.elapsed:.1f}s")
        total = max(self.waves_total, 1)
        bar = ProgressBar(total=total, completed=self.waves_done, width=30)
        head = Text(f"Wave {min(self.waves_done + 1, total)}/{total}  ", style="bold")
        return Group(_line(head, bar), table)


def _line(head, bar):
    from rich.table import Table

    grid = Table.grid()
    grid.add_row(head, bar)
    return grid


def progress_for(out: Output) -> Progress:
    if out.mode == "human":
        return LiveProgress(out)
    return PlainProgress(out)
