"""Run progress for people: a live Rich table in a terminal, timestamped lines elsewhere.

Both consume the orchestrator's events; neither writes to stdout (that belongs to the final
report or the `--json` document).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from rich.markup import escape

from agentrun.agent.interaction import screen_held_by
from agentrun.cli.output import Output
from agentrun.core.errors import BadInput
from agentrun.core.usage import Usage
from agentrun.providers.pricing import cost_usd

QUEUED = "queued"  # in a wave, waiting for a free slot under --max-parallel
BASE_CHECK = "base check"  # the row of the validation command on the run's base commit


@dataclass
class Row:
    batch: str
    groups: list[str]
    state: str = "starting"
    step: int = 0
    tool: str = ""
    tokens: int = 0
    cost: float | None = None
    model: str = ""
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None

    @property
    def elapsed(self) -> float:
        return (self.ended or time.monotonic()) - self.started


class Progress:
    """Turns events into rows and running totals; subclasses decide how to show them.

    `pricing` is the config's price overrides: a worker's cost is priced from the usage its
    progress events carry, so it grows while the worker runs, not only when it ends.
    """

    def __init__(self, out: Output, pricing: dict[str, Any] | None = None) -> None:
        self.out = out
        self.pricing = pricing
        self.rows: dict[str, Row] = {}
        self.waves_total = 0
        self.waves_done = 0
        self.phase = ""  # what the run is doing: a wave, its integration check, the review
        self.reviews = 0
        self.started = time.monotonic()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Hold the display still while a person answers a question (nothing to hold here)."""
        yield

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event.get("type", "")
        batch = event.get("batch")
        if kind == "run_start":
            self.waves_total = event.get("waves", 0)
            if BASE_CHECK not in self.rows:  # else the base check's time counts too
                self.started = time.monotonic()
            self.phase = f"Wave 1/{max(self.waves_total, 1)}"
        elif kind == "wave_start":  # under --max-parallel, some wait for a free slot
            self.phase = f"Wave {event.get('wave')}/{max(self.waves_total, 1)}"
            for name in event.get("batches", []):
                self.rows.setdefault(name, Row(name, name.split("_"), state=QUEUED))
        elif kind == "wave_done":
            self.waves_done += 1
            total = max(self.waves_total, 1)
            self.phase = f"Wave {min(self.waves_done + 1, total)}/{total}"
        elif kind == "worker_start" and batch:
            self.rows[batch] = Row(batch, list(event.get("groups", [])))
        elif kind.startswith(("base_check_", "integration_", "review_")):
            self._phase(kind, event)
        elif kind == "fix_start":
            self.phase = f"Fix {batch}"
        elif batch in self.rows:
            self._update(self.rows[batch], kind, event)
        self.show(event)

    def _phase(self, kind: str, event: dict[str, Any]) -> None:
        """The base check, a wave's integration check and the review: rows of their own, with
        their progress (the checks of a culprit search, the reviewer's turns and tokens)."""
        wave = event.get("wave")
        name = BASE_CHECK if kind.startswith("base_check_") else \
            f"check {wave}" if kind.startswith("integration_") else self._review_row()
        if kind == "base_check_start":
            self.phase = "Base check"
            self.rows[name] = Row(name, [], state="checking")
        elif kind == "integration_start":
            self.phase = f"Wave {wave}/{max(self.waves_total, 1)} · integration check"
            self.rows[name] = Row(name, [], state="checking")
        elif kind == "review_start":
            self.reviews += 1
            self.phase = "Review"
            name = self._review_row()
            self.rows[name] = Row(name, [], state="reviewing", model=event.get("model") or "")
        row = self.rows.get(name)
        if row is None:
            return
        if kind == "integration_step":
            row.step = event.get("check", row.step)
            row.tool = "+".join(event.get("groups") or []) or "the base"
        elif kind == "review_step":
            row.step = event.get("step", row.step)
            row.tool = event.get("tool") or row.tool
            row.tokens = event.get("tokens", row.tokens)
            row.cost = self._price(row.model, event.get("worker_usage"), row.cost)
        elif kind in ("base_check_done", "integration_passed", "integration_failed"):
            passed = kind == "integration_passed" or event.get("ok") is True
            row.state, row.ended = ("passed" if passed else "failed"), time.monotonic()
        elif kind == "review_done":
            result = str(event.get("result") or "")
            row.state = "error" if event.get("error") and not event.get("version") else \
                result.lower().replace("_", " ")
            row.tokens = event.get("tokens", row.tokens)
            row.cost = event.get("cost_usd", row.cost)
            row.ended = time.monotonic()

    def _review_row(self) -> str:
        return "review" if self.reviews <= 1 else f"review {self.reviews}"

    def _update(self, row: Row, kind: str, event: dict[str, Any]) -> None:
        if kind == "agent_start":
            row.model = event.get("model") or row.model
        elif kind == "agent_step":
            row.state = "working"
            row.step = event.get("step", row.step)
            row.tool = event.get("tool") or row.tool
            row.tokens = event.get("tokens", row.tokens)
            row.cost = self._price(row.model, event.get("worker_usage"), row.cost)
        elif kind == "agent_attempt":
            row.state = f"attempt {event.get('attempt', '?')}"
        elif kind == "worker_result":
            row.state = event.get("status", "done")
            stop = event.get("stop_reason")
            if stop and stop not in ("completed", "error", "interrupted"):
                row.state += f" ({stop})"  # a limit or a model fault: say which
            row.tokens = event.get("tokens", row.tokens)
            row.cost = event.get("cost_usd")
            row.ended = time.monotonic()
        elif kind == "worker_timeout":
            row.state = "timeout"
        elif kind == "merge_conflict":
            row.state = "conflict"
        elif kind == "merged":
            row.state = "merged"

    def _price(self, model: str, usage: Any, known: float | None) -> float | None:
        if not model or not isinstance(usage, dict):
            return known
        try:
            return cost_usd(model, Usage(**usage), self.pricing)
        except (TypeError, ValueError, BadInput):  # a malformed event changes nothing
            return known

    def totals(self) -> tuple[int, float | None, bool, float]:
        """Tokens, known cost (None: nothing priced yet), whether some cost is unknown
        (a model without a price), and seconds since the run started."""
        active = [r for r in self.rows.values() if r.state != QUEUED]
        costs = [r.cost for r in active if r.cost is not None]
        unknown = any(r.cost is None and r.tokens for r in active)
        return (sum(r.tokens for r in active), sum(costs) if costs else None, unknown,
                time.monotonic() - self.started)

    def show(self, event: dict[str, Any]) -> None:
        raise NotImplementedError


class PlainProgress(Progress):
    """One timestamped line per meaningful event (CI logs, pipes)."""

    QUIET = {"agent_step", "agent_start", "agent_done", "agent_event", "review_step"}

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
    if kind in ("cost_warning", "cost_cap"):
        share = "80% of" if kind == "cost_warning" else "reached"
        return (f"spending: ${e['spent_usd']:.4f} spent, {share} the ${e['cap_usd']:g} cap"
                + ("; no new worker starts, running ones stop" if kind == "cost_cap"
                   else ""))
    if kind == "cost_stop":
        return f"worker {b}: stopped at its next model call (spending cap)"
    if kind == "rate_limit_stop":
        return (f"the model's rate limit stopped the run (worker {b}): {e['error']}; no "
                "further worker starts")
    if kind == "agent_truncated":
        return f"worker {b}: reply cut off at the output limit ({e.get('where')})"
    if kind == "base_check_start":
        return f"base check: `{e['command']}` on {(e.get('commit') or '')[:7]}"
    if kind == "base_check_done":
        return f"base check: {'passed' if e.get('ok') else 'failed'} ({e['seconds']:.1f}s)"
    if kind == "integration_start":
        return (f"wave {e['wave']}: integration check `{e['command']}` on "
                f"{(e.get('commit') or '')[:7]}")
    if kind == "integration_step" and e.get("check", 1) > 1:  # the culprit search
        return (f"wave {e['wave']}: check {e['check']}: "
                f"{'+'.join(e.get('groups') or []) or 'the base'} alone")
    if kind == "integration_passed":
        return f"wave {e['wave']}: integration check passed"
    if kind == "integration_failed":
        culprits = "; ".join("+".join(c) for c in e.get("culprits") or [])
        return f"wave {e['wave']}: integration check failed" + (
            f" (broken by {culprits})" if culprits else "")
    if kind == "review_start":
        return f"review: {e['spec']}" + (f" by {e['model']}" if e.get("model") else "")
    if kind == "review_done":
        if e.get("version") is None:
            return f"review: no verdict — {e.get('error') or 'no review submitted'}"
        return (f"review: {e['result']} (Review v{e['version']}, {e.get('tokens', 0):,} "
                f"tokens, {money(e.get('cost_usd'))})")
    if kind == "fix_start":
        return f"fix {b}: the findings of Review v{e.get('review')}"
    if kind == "fix_done":
        return f"fix {b}: {e.get('status')}"
    if kind == "review_skipped":
        return (f"{e['step']} was not run: the ${e['cap_usd']:g} spending cap is reached "
                f"(${e['spent_usd']:.4f} spent)")
    return None


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

    def _start(self):
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

    def show(self, event: dict[str, Any]) -> None:
        line = None
        if event.get("type") in ("merge_conflict", "interrupt", "fallback_sequential",
                                 "kept_worktree", "blocked", "committed"):
            line = describe(event)
        with self._lock:
            if self._live is None:
                if line:
                    self._held.append(f"[yellow]{escape(line)}[/yellow]")
                return
            if line:
                self._live.console.print(f"[yellow]{escape(line)}[/yellow]")

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


def money(cost: float | None) -> str:
    return "—" if cost is None else f"${cost:.4f}"


def clock(seconds: float) -> str:
    """"42.0s" under a minute, "3m 07s" after (a run's total is watched in minutes)."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m {secs:02d}s" if minutes < 60 else f"{minutes // 60}h {minutes % 60:02d}m"


def _line(*cells):
    from rich.table import Table

    grid = Table.grid()
    grid.add_row(*cells)
    return grid


def progress_for(out: Output, pricing: dict[str, Any] | None = None) -> Progress:
    if out.mode == "human":
        return LiveProgress(out, pricing)
    return PlainProgress(out, pricing)
