"""What a run's HTML report shows, read from its record: the run's events
(`.specflow/runs/<id>/events.ndjson`), its result (`result.json`, else the execution state)
and each worker's progress file (in the orchestrator's control directory, run/record.py).

Everything here is read, never trusted: the files hold text that workers and models chose, so
each file is read only up to `MAX_BYTES`, a line that is not a JSON object is skipped, and a
field of the wrong type counts as missing. The template (html.py) escapes every value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrun.report.execution_state import RunState

MAX_BYTES = 16 * 1024 * 1024  # of any one file of the record
MAX_TEXT = 4000  # characters of one text shown (an error, a check's output)
RESULT_FILE = "result.json"


def read_ndjson(path: Path, limit: int = MAX_BYTES) -> list[dict[str, Any]]:
    """The JSON objects of an NDJSON file's first `limit` bytes (nothing when it is missing)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit)
    except OSError:
        return []
    out = []
    for line in data.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            out.append(item)
    return out


def read_state(run_dir: Path, fallback: Path | None = None) -> RunState | None:
    """The run's result, or the execution state at `fallback` when it is this run's (a run
    that was killed wrote no result)."""
    for path in (run_dir / RESULT_FILE, fallback):
        if path is None or not path.is_file():
            continue
        try:
            with open(path, "rb") as fh:
                state = RunState.from_dict(json.loads(fh.read(MAX_BYTES)))
        except (OSError, ValueError, TypeError):
            continue
        if state.run_id == run_dir.name:
            return state
    return None


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


def _text(value: Any, limit: int = MAX_TEXT) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[:limit] + " …"


@dataclass
class Bar:
    """One interval on the timeline."""

    kind: str  # attempt | model | tool | validation | merge | check | review | base | setup
    start: float
    end: float
    label: str
    status: str = ""  # ok | failed | ""

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start)


@dataclass
class Row:
    label: str
    bars: list[Bar] = field(default_factory=list)  # the row's own intervals
    inner: list[Bar] = field(default_factory=list)  # model calls and tools inside them


@dataclass
class Attempt:
    batch: str
    number: int
    start: float
    end: float | None = None
    status: str = ""
    stop_reason: str = ""
    error: str = ""
    retried: bool = False
    model_calls: int = 0
    tools: int = 0


@dataclass
class Report:
    run_id: str
    state: RunState | None
    events: list[dict[str, Any]]
    progress: dict[str, list[dict[str, Any]]]
    title: str = ""
    trace_id: str | None = None
    rows: list[Row] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    start: float = 0.0
    end: float = 0.0

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == kind]

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start)

    @property
    def heading(self) -> str:
        """The spec's id and title; a title that already starts with the id (a spec's
        `# SPEC-7: Title` line) is not prefixed with it again."""
        spec_id = self.state.spec_id if self.state else ""
        if not spec_id:
            return self.title or "Run"
        if not self.title or self.title == spec_id:
            return spec_id
        return self.title if self.title.startswith(f"{spec_id}:") else \
            f"{spec_id}: {self.title}"

    @property
    def reviews(self) -> list[dict[str, Any]]:
        """Each review's verdict, findings and criteria verdicts, every field in place."""
        out = []
        for e in self.of("review_done"):
            rows = [f for f in e.get("findings") or [] if isinstance(f, dict)]
            crit = [c for c in e.get("criteria") or [] if isinstance(c, dict)]
            out.append({
                "result": _text(e.get("result"), 40),
                "version": None if _num(e.get("version")) is None else int(e["version"]),
                "error": _text(e.get("error")), "tokens": _num(e.get("tokens")) or 0,
                "cost_usd": _num(e.get("cost_usd")), "summary": _text(e.get("summary")),
                "findings": [{k: _text(f.get(k)) for k in ("severity", "file", "issue", "fix")}
                             for f in rows],
                "criteria": [{"criterion": _text(c.get("criterion"), 10),
                              "verdict": _text(c.get("verdict"), 40),
                              "evidence": _text(c.get("evidence"))} for c in crit]})
        return out

    @property
    def checks(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") in ("integration_passed",
                                                            "integration_failed")]

    @property
    def base_check(self) -> dict[str, Any] | None:
        found = self.of("base_check_done")
        return found[-1] if found else None


def collect(run_dir: Path, control: Path | None = None, *, state_file: Path | None = None,
            title: str = "", trace_id: str | None = None) -> Report:
    """Read the run record in `run_dir` (and the workers' progress under `control`)."""
    events = read_ndjson(run_dir / "events.ndjson")
    progress: dict[str, list[dict[str, Any]]] = {}
    for base in (run_dir / "workers", *((control / "workers",) if control else ())):
        if not base.is_dir():
            continue
        for folder in sorted(base.iterdir()):
            found = read_ndjson(folder / "progress.ndjson")
            if found:
                progress[folder.name] = found
    report = Report(run_dir.name, read_state(run_dir, state_file), events, progress,
                    title=title, trace_id=trace_id)
    times = [t for e in events if (t := _num(e.get("t"))) is not None]
    times += [t for ps in progress.values() for p in ps if (t := _num(p.get("t"))) is not None]
    report.start, report.end = (min(times), max(times)) if times else (0.0, 0.0)
    _timeline(report)
    return report


def _pairs(events: list[dict[str, Any]], start: str, ends: tuple[str, ...], key: str | None
           ) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """Each `start` event with the next of `ends` (of the same `key` value, if given)."""
    out: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    open_: list[dict[str, Any]] = []
    for e in events:
        kind = e.get("type")
        if kind == start:
            open_.append(e)
        elif kind in ends:
            match = next((o for o in open_ if key is None or o.get(key) == e.get(key)), None)
            if match is not None:
                open_.remove(match)
                out.append((match, e))
    out += [(o, None) for o in open_]
    return sorted(out, key=lambda pair: _num(pair[0].get("t")) or 0.0)


def _timeline(report: Report) -> None:
    """The rows: the base check, each worker attempt (its model calls and tools inside), the
    merges, the integration checks and the reviews."""
    end = report.end
    rows = report.rows

    def bar(kind: str, a: dict[str, Any], b: dict[str, Any] | None, label: str,
            status: str = "", start_key: str = "t") -> Bar | None:
        start = _num(a.get(start_key))
        if start is None:
            return None
        stop = _num((b or {}).get("t"))
        return Bar(kind, start, end if stop is None else max(stop, start), label, status)

    base = Row("base check")
    for a, b in _pairs(report.events, "base_check_start", ("base_check_done",), None):
        ok = (b or {}).get("ok")
        found = bar("base", a, b, f"base check: {_text(a.get('command'), 200)}",
                    "ok" if ok is True else "failed" if b else "")
        if found:
            base.bars.append(found)
    if base.bars:
        rows.append(base)
    results = {e.get("batch"): e for e in report.of("worker_result")}
    for start in report.of("worker_start"):
        batch = str(start.get("batch") or "?")
        _worker_rows(report, batch, start, results.get(batch))
    merges = Row("merges")
    for e in report.events:
        if e.get("type") in ("merged", "merge_conflict"):
            ok = e["type"] == "merged"
            found = bar("merge", e, e, f"merge {_text(e.get('batch'), 100)}"
                        + ("" if ok else ": conflict"), "ok" if ok else "failed",
                        start_key="started" if _num(e.get("started")) is not None else "t")
            if found:
                merges.bars.append(found)
    if merges.bars:
        rows.append(merges)
    checks = Row("integration checks")
    for a, b in _pairs(report.events, "integration_start",
                       ("integration_passed", "integration_failed"), "wave"):
        ok = (b or {}).get("type") == "integration_passed"
        found = bar("check", a, b, f"wave {_text(a.get('wave'), 40)}: integration check",
                    "ok" if ok else "failed" if b else "")
        if found:
            checks.bars.append(found)
    if checks.bars:
        rows.append(checks)
    review = Row("review")
    for a, b in _pairs(report.events, "review_start", ("review_done", "review_skipped"), None):
        result = _text((b or {}).get("result"), 40)
        found = bar("review", a, b, f"review: {result or 'not finished'}",
                    "ok" if result == "APPROVED" else "failed" if b else "")
        if found:
            review.bars.append(found)
    if review.bars:
        rows.append(review)


def _worker_rows(report: Report, batch: str, start: dict[str, Any],
                 result: dict[str, Any] | None) -> None:
    """One row per attempt of `batch`'s worker, from its progress file."""
    events = report.progress.get(batch, [])
    t_end = _num((result or {}).get("t")) or report.end
    attempts = _pairs(events, "attempt", ("attempt_end",), "attempt")
    if not attempts:  # it never got to an attempt (set-up, a crash): the worker's span
        row = Row(f"{batch}")
        begin = _num(start.get("t"))
        if begin is not None:
            row.bars.append(Bar("attempt", begin, max(begin, t_end), f"{batch}: "
                                f"{_text((result or {}).get('status'), 40) or 'running'}",
                                "failed" if result else ""))
            report.rows.append(row)
        return
    for a, b in attempts:
        number = int(_num(a.get("attempt")) or 1)
        begin = _num(a.get("t"))
        if begin is None:
            continue
        stop = _num((b or {}).get("t")) or t_end
        status = _text((b or {}).get("status"), 40)
        att = Attempt(batch, number, begin, stop, status,
                      _text((b or {}).get("stop_reason"), 40), _text((b or {}).get("error")),
                      (b or {}).get("retry") is True)
        row = Row(f"{batch} #{number}", [Bar(
            "attempt", begin, max(begin, stop),
            f"{batch} attempt {number}: {status or 'running'}"
            + (f" ({att.stop_reason})" if att.stop_reason and att.stop_reason != "completed"
               else ""), "ok" if status == "complete" else "failed" if b else "")])
        for e in events:
            t, began = _num(e.get("t")), _num(e.get("started"))
            if t is None or began is None:
                continue
            said = _num(e.get("attempt"))  # agentrun's loop says; a CLI's events: by time
            if (said != number) if said is not None else not (begin <= began < stop):
                continue
            kind = e.get("type")
            if kind == "step":
                att.model_calls += 1
                said_usage = e.get("usage")
                usage: dict[str, Any] = said_usage if isinstance(said_usage, dict) else {}
                tokens = ", ".join(f"{_num(usage.get(k)) or 0:,.0f} {k.split('_')[0]}"
                                   for k in ("input_tokens", "output_tokens"))
                row.inner.append(Bar("model", began, max(began, t),
                                     f"model call {att.model_calls} ({tokens})"))
            elif kind == "tool":
                att.tools += 1
                failed = e.get("error") is True
                row.inner.append(Bar("tool", began, max(began, t),
                                     f"{_text(e.get('name'), 80)}"
                                     + (" (error)" if failed else ""),
                                     "failed" if failed else "ok"))
            elif kind == "validation":
                ok = e.get("ok") is True
                row.inner.append(Bar("validation", began, max(began, t),
                                     "validation " + ("passed" if ok else "failed"),
                                     "ok" if ok else "failed"))
        report.attempts.append(att)
        report.rows.append(row)
