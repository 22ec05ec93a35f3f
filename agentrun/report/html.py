"""The run's HTML report: `.specflow/runs/<id>/report.html`, one self-contained page.

Built from the run record only (html_data.py), so any run — finished, failed or killed — can
be reported afterwards (`agentrun report`). The page carries its styles and its timeline (SVG)
inline and loads nothing: it reads the same offline, attached to a CI job, or mailed around.
Every value in it comes from the record, much of it written by workers and models, so the
template renders with autoescaping on: text is shown, never run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrun.core.events import WorkerResultEvent, WorkerStartEvent
from agentrun.core.fsutil import atomic_write_text
from agentrun.report.html_data import Bar, Report, collect

if TYPE_CHECKING:
    import jinja2

REPORT_FILE = "report.html"
TEMPLATE = Path(__file__).resolve().parent / "html_report.html.j2"
LABEL_W, PLOT_W, ROW_H, AXIS_H = 150, 830, 22, 22  # the timeline's geometry (px)
BAR_H = {"attempt": 16, "base": 16, "merge": 16, "check": 16, "review": 16, "model": 8,
         "tool": 5, "validation": 5}
BAR_Y = {"model": 3, "tool": 12, "validation": 12}  # inside an attempt's bar


def write_report(run_dir: Path, control: Path | None = None, *, state_file: Path | None = None,
                 title: str = "", trace_id: str | None = None) -> Path:
    """Write `report.html` into the run's record; returns its path."""
    report = collect(run_dir, control, state_file=state_file, title=title, trace_id=trace_id)
    path = run_dir / REPORT_FILE
    atomic_write_text(path, render(report))
    return path


def render(report: Report) -> str:
    template = environment().from_string(TEMPLATE.read_text(encoding="utf-8"))
    return template.render(**context(report))


def environment(autoescape: bool = True) -> jinja2.Environment:
    """The page's Jinja environment: autoescaping on, since every value is untrusted text."""
    from jinja2 import ChainableUndefined, Environment

    env = Environment(autoescape=autoescape, undefined=ChainableUndefined, trim_blocks=True,
                      lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(cost=_cost, secs=_secs, num=lambda n: f"{int(n or 0):,}")
    return env


def context(report: Report) -> dict[str, Any]:
    """What the template is given."""
    return {"r": report, "s": report.state, "timeline": timeline(report),
            "groups": _groups(report)}


def _cost(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.4f}"


def _secs(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.1f} s" if value < 120 else f"{int(value // 60)} min {int(value % 60)} s"


def timeline(report: Report) -> dict[str, Any]:
    """The SVG's rows, rectangles and time axis, in pixels."""
    span = max(report.seconds, 0.001)

    def x(t: float) -> float:
        return round(LABEL_W + (t - report.start) / span * PLOT_W, 2)

    def rect(bar: Bar, y: float) -> dict[str, Any]:
        left = x(bar.start)
        return {"x": left, "y": y + BAR_Y.get(bar.kind, 3), "h": BAR_H.get(bar.kind, 16),
                "w": max(1.0, round(x(bar.end) - left, 2)),
                "cls": f"{bar.kind} {bar.status}".strip(),
                "title": f"{bar.label} · {_secs(bar.seconds)}"}

    rows = []
    for i, row in enumerate(report.rows):
        y = AXIS_H + i * ROW_H
        rows.append({"label": row.label, "y": y,
                     "rects": [rect(b, y) for b in row.bars] + [rect(b, y) for b in row.inner]})
    step = _tick(span)
    ticks = [{"x": x(report.start + k * step), "label": _secs(k * step)}
             for k in range(int(span // step) + 1)]
    return {"rows": rows, "ticks": ticks, "width": LABEL_W + PLOT_W + 10,
            "height": AXIS_H + max(1, len(rows)) * ROW_H + 4, "label_w": LABEL_W}


def _tick(span: float) -> float:
    """A round step that puts 4 to 10 ticks on the axis."""
    for step in (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600):
        if span / step <= 10:
            return step
    return span / 10


def _groups(report: Report) -> list[dict[str, Any]]:
    """Each group with its attempts and the seconds its worker took."""
    state = report.state
    if state is None:
        return []
    starts = {e.batch: e.t for e in report.of(WorkerStartEvent)}
    ends = {e.batch: e.t for e in report.of(WorkerResultEvent)}
    out = []
    for g in state.groups.values():
        begin, end = starts.get(g.batch), ends.get(g.batch)
        seconds = end - begin if begin is not None and end is not None else None
        attempts = [a for a in report.attempts if a.batch == g.batch]
        out.append({"g": g, "seconds": seconds, "attempts": attempts,
                    "model_calls": sum(a.model_calls for a in attempts),
                    "tools": sum(a.tools for a in attempts)})
    return out
