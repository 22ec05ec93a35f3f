"""Run progress for people in a terminal: a live Rich table of the rows `cli/progress.py`
keeps, under a line with the wave's progress bar and the run's totals; elsewhere, timestamped
lines. Rich is imported here only (and lazily: `agentrun --help` never loads this module).

Neither writes to stdout (that belongs to the final report or the `--json` document).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from agentrun.agent.interaction import screen_held_by
from agentrun.cli.event_lines import describe, money
from agentrun.cli.output import Output
from agentrun.cli.progress import QUEUED, PlainProgress, Progress
from agentrun.core.events import (
    BaseEvent,
    BlockedEvent,
    CommittedEvent,
    FallbackSequentialEvent,
    InterruptEvent,
    KeptWorktreeEvent,
    MergeConflictEvent,
)

if TYPE_CHECKING:
    from rich.console import Group, RenderableType
    from rich.live import Live
    from rich.table import Table


class LiveProgress(Progress):
    """A live table (one row per worker) under a line with the wave's progress bar and the
    run's totals, on stderr. Questions pause it: the table is erased while a person reads
    and answers, then drawn again below the answer, so the screen never holds two."""

    def __enter__(self) -> LiveProgress:
        self._lock = threading.RLock()
        self._held: list[str] = []  # lines that came while a question was on screen
        self._live: Any = self._start()
        self._screen = screen_held_by(self.paused)
        self._screen.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._screen.__exit__(None, None, None)
        with self._lock:
            if self._live is not None:
                self._live.update(self._render())
                self._live.__exit__(None, None, None)

    def _start(self) -> Live:
        from rich.live import Live

        live = Live(self._render(), console=self.out.stderr, refresh_per_second=8,
                    transient=False, get_renderable=self._render)
        live.__enter__()
        return live

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        with self._lock:
            live, self._live = self._live, None
        if live is None:  # already paused (a question inside a question)
            yield
            return
        live.transient = True  # stopping erases the table instead of leaving a copy behind
        live.stop()
        try:
            yield
        finally:
            with self._lock:
                self._live = self._start()
                for line in self._held:
                    self._live.console.print(line)
                self._held.clear()

    # what the table does not show: said above it
    SAID: tuple[type[BaseEvent], ...] = (MergeConflictEvent, InterruptEvent,
                                         FallbackSequentialEvent, KeptWorktreeEvent,
                                         BlockedEvent, CommittedEvent)

    def show(self, event: BaseEvent) -> None:
        line = describe(event) if isinstance(event, self.SAID) else None
        with self._lock:
            if self._live is None:
                if line:
                    self._held.append(f"[yellow]{escape(line)}[/yellow]")
                return
            if line:
                self._live.console.print(f"[yellow]{escape(line)}[/yellow]")

    def _render(self) -> Group:
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
                  "conflict": "red", "partial": "yellow", "interrupted": "yellow",
                  QUEUED: "dim", "passed": "green", "approved": "green",
                  "changes requested": "red", "error": "red"}
        for row in list(self.rows.values()):
            waiting = row.state == QUEUED
            table.add_row(row.batch, ",".join(row.groups),
                          Text(row.state, style=styles.get(row.state.split(" ")[0], "cyan")),
                          "" if waiting else str(row.step), row.tool,
                          "" if waiting else f"{row.tokens:,}",
                          "" if waiting else money(row.cost),
                          "" if waiting else clock(row.elapsed))
        total = max(self.waves_total, 1)
        bar = ProgressBar(total=total, completed=self.waves_done, width=30)
        phase = self.phase or f"Wave {min(self.waves_done + 1, total)}/{total}"
        head = Text(f"{phase}  ", style="bold")
        tokens, cost, unknown, elapsed = self.totals()
        shown = money(cost) + ("+ (some prices unknown)" if unknown and cost is not None else "")
        tail = Text(f"  {tokens:,} tokens · {shown} · {clock(elapsed)}")
        return Group(_line(head, bar, tail), table)



def clock(seconds: float) -> str:
    """"42.0s" under a minute, "3m 07s" after (a run's total is watched in minutes)."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m {secs:02d}s" if minutes < 60 else f"{minutes // 60}h {minutes % 60:02d}m"


def _line(*cells: RenderableType) -> Table:
    from rich.table import Table

    grid = Table.grid()
    grid.add_row(*cells)
    return grid


def progress_for(out: Output, pricing: dict[str, Any] | None = None) -> Progress:
    if out.mode == "human":
        return LiveProgress(out, pricing)
    return PlainProgress(out, pricing)
