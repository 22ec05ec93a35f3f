"""The run's HTML report: one real run (three groups in two waves, a failed attempt retried,
integration checks, a review with findings) writes `report.html` into its record; parsed, it
has every part, loads nothing from outside, and shows the untrusted text of models and file
names as text. `agentrun report` finds it, and writes it for a run that wrote none.

The same run is traced to a collector that is not there (a closed port): it ends as it would
untraced, at once, with one warning."""

from __future__ import annotations

import json
import time
from html.parser import HTMLParser
from pathlib import Path

from clirun import agentrun
from otlp_receiver import closed_port
from runkit import make_project, scripted, spec_text, submit, writes
from test_review_cli import met, review_turn

from agentrun.report import html
from agentrun.report.html_data import collect

XSS = "<script>alert(1)</script>"
GROUPS = [("G1", [], "one.txt"), ("G2", [], "two.txt"), ("G3", ["G1"], "three.txt")]
STRAY = f"notes/{XSS}.txt"  # a file name a model chose


class Page(HTMLParser):
    """The parts of a page the tests look at."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.data: list[str] = []
        self.sections: list[str] = []
        self.rects: list[tuple[str, str]] = []  # (class, title)
        self.rows: list[list[str]] = []  # table rows, their cells' text
        self._cell: list[str] | None = None
        self._rect: str | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        found = dict(attrs)
        self.tags.append((tag, found))
        if tag == "h2":
            self.sections.append(found.get("id") or "")
        elif tag == "rect":
            self._rect = found.get("class") or ""
        elif tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "rect":
            self._rect = None

    def handle_data(self, data):
        self.data.append(data)
        if self._cell is not None:
            self._cell.append(data)
        if self._rect is not None:
            self.rects.append((self._rect, data))

    def of(self, kind: str, status: str | None = None) -> list[str]:
        return [title for cls, title in self.rects if cls.split()[0] == kind
                and (status is None or status in cls.split())]

    def row(self, first: str) -> list[str]:
        return next(r for r in self.rows if r and r[0] == first)


def test_a_run_writes_a_self_contained_report_with_every_part(tmp_path):
    slow = {"input_tokens": 1000, "output_tokens": 100}
    script = {"groups": {
        "G1": [{"text": f"Writing {XSS}", "tool_calls": [{"name": "write_file", "arguments": {
            "path": STRAY, "content": "x\n"}}], "usage": slow, "latency_s": 0.1},
            *writes("one.txt", "1\n")],
        "G2": [submit("failed", "could not", error=f"compile error {XSS}"),
               *writes("two.txt", "2\n")],
        "G3": writes("three.txt", "3\n")},
        "agents": {"code-reviewer": [{**review_turn(
            [met(1, "one.txt:1"), {"criterion": 2, "verdict": "not_met", "evidence": XSS}],
            [{"severity": "major", "file": STRAY, "issue": f"stray file {XSS}",
              "fix": "remove it"}], summary=f"Mostly fine {XSS}"),
            "usage": {"input_tokens": 3000, "output_tokens": 200}}]}}
    root = make_project(tmp_path / "p", "SPEC-7", spec_text("SPEC-7", GROUPS), script)
    dead = closed_port()
    proc = agentrun("run", "SPEC-7", *scripted("--validate", "true", review=True), cwd=root,
                    env={"OTEL_EXPORTER_OTLP_ENDPOINT": dead,
                         "OTEL_EXPORTER_OTLP_TIMEOUT": "30"})  # waiting it out: 30 s
    exited = time.time()
    assert proc.returncode == 1, proc.stderr
    doc = proc.json
    assert (doc["status"], doc["stop_reason"]) == ("partial", "review")
    run_dir = Path(doc["run_dir"])
    # the dead collector: one warning, no wait (the run's end to the process's exit)
    assert proc.stderr.count("warning: traces not exported") == 1, proc.stderr
    assert f"traces not exported to {dead}/v1/traces" in proc.stderr and doc["trace_id"]
    run_done = json.loads((run_dir / "events.ndjson").read_text().splitlines()[-1])
    assert run_done["type"] == "run_done" and exited - run_done["t"] < 10
    path = run_dir / "report.html"
    text = path.read_text(encoding="utf-8")
    page = Page(text)

    # self-contained: nothing to load, nothing to run
    assert not [t for t, _ in page.tags if t in ("script", "link", "img", "iframe", "object")]
    assert not [a for _, attrs in page.tags for k, a in attrs.items()
                if k in ("src", "href") and a and "://" in a]
    assert "url(" not in text and "@import" not in text
    # the model's words and file name are on the page as text
    shown = "".join(page.data)
    for said in (f"stray file {XSS}", f"Mostly fine {XSS}", f"compile error {XSS}", STRAY):
        assert said in shown
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text

    assert page.sections == ["plan", "timeline", "cost", "verification", "failures"]
    assert "<h1>SPEC-7: End-to-end fixture</h1>" in text  # the spec's heading, its id once
    # the plan: waves and groups
    assert page.row("Wave") and [page.row(g)[:1] for g in ("1", "2")]
    waves = [r[:4] for r in page.rows if r and r[0] in ("1", "2") and len(r) == 8]
    assert waves == [["1", "G1", "Create `one.txt`", "complete"],
                     ["1", "G2", "Create `two.txt`", "complete"],
                     ["2", "G3", "Create `three.txt`", "complete"]]
    # the timeline: one bar per attempt, the model and tool calls inside them
    assert sorted(t.split(":")[0] for t in page.of("attempt")) == [
        "G1 attempt 1", "G2 attempt 1", "G2 attempt 2", "G3 attempt 1"]
    assert [t.split(":")[0] for t in page.of("attempt", "failed")] == ["G2 attempt 1"]
    assert len(page.of("model")) == 3 + 3 + 2  # every model call of the workers
    assert any(t.startswith("write_file") for t in page.of("tool"))
    assert len(page.of("validation", "ok")) == 3
    assert len(page.of("merge", "ok")) == 3 and len(page.of("check", "ok")) == 2
    assert len(page.of("base", "ok")) == 1 and len(page.of("review", "failed")) == 1
    # tokens and cost per group and in total, as the run's result says
    def total(usage: dict) -> str:
        return f"{sum(usage.values()):,}"

    for gid, group in doc["groups"].items():
        assert page.row(gid)[1:3] == [f"{group['usage']['input_tokens']:,}",
                                      f"{group['usage']['output_tokens']:,}"]
        assert page.row(gid)[5] == total(group["usage"])
    assert page.row("total")[5] == total(doc["usage"]) != "0"
    assert page.row("review v1")[1] == "3,000"
    # verification: the checks and the review's findings and verdicts
    assert sum(1 for r in page.rows if len(r) == 4 and r[3] == "passed") == 2
    assert page.row("major")[1:3] == [STRAY, f"stray file {XSS}"]
    assert page.row("AC2")[1:] == ["not met", XSS]
    assert "CHANGES_REQUESTED" in shown
    # failures: the attempt that failed, with its reason
    failed = next(r for r in page.rows if r[:2] == ["G2", "1"])
    assert "retried" in failed[2] and f"compile error {XSS}" in failed[4]

    # the same page without autoescaping would run the model's script: the payload got there
    report = collect(run_dir, root / ".git/agentrun/runs" / run_dir.name)
    unsafe = html.environment(autoescape=False).from_string(
        html.TEMPLATE.read_text()).render(**html.context(report))
    assert ("script", {}) in Page(unsafe).tags

    # `agentrun report`: the active spec's last run by default, a run id, its folder
    for args in ((), (run_dir.name,), (str(run_dir),)):
        found = agentrun("report", *args, cwd=root)
        assert (found.returncode, found.stdout.strip()) == (0, str(path))
    opened = agentrun("report", "--open", "--json", cwd=root, env={"DISPLAY": ""})
    assert opened.returncode == 0 and opened.json["report"] == str(path)
    unknown = agentrun("report", "20990101-000000-beef", cwd=root)
    assert unknown.returncode == 2 and "no run 20990101-000000-beef" in unknown.stderr
    # a run that wrote no report (killed before its end): written from its record
    path.unlink()
    (run_dir / "result.json").unlink()
    again = agentrun("report", "--json", cwd=root)
    assert again.returncode == 0 and Path(again.json["report"]).is_file()
    assert Page(path.read_text()).sections[0] == "plan"
    assert "<h1>SPEC-7: End-to-end fixture</h1>" in path.read_text()  # the spec's title too


def test_a_record_of_garbage_and_wrong_types_still_makes_a_page(tmp_path):
    """A line that is not exactly an event (not JSON, a field missing or of the wrong type)
    is skipped; the good lines around it are drawn."""
    run_dir = tmp_path / "20260101-000000-abcd"
    workers = tmp_path / "control" / "workers" / "G1"
    workers.mkdir(parents=True)
    run_dir.mkdir()
    lines = ["not json", json.dumps([1, 2]),
             json.dumps({"type": "worker_start", "batch": "G1", "t": 10.0}),
             json.dumps({"v": 1, "type": "worker_start", "batch": "G1", "groups": ["G1"],
                         "worktree": "/w", "branch": "b", "t": 10.0}),
             json.dumps({"type": "review_done", "t": "soon", "findings": ["x", {"file": 3}],
                         "criteria": "none", "version": "two"}),
             json.dumps({"type": "merged", "batch": {"a": 1}, "t": 12.0, "started": None}),
             json.dumps({"v": 1, "type": "merged", "batch": "G1", "commit": None, "t": 12.5,
                         "started": 12.2})]
    (run_dir / "events.ndjson").write_text("\n".join(lines) + "\n")
    (workers / "progress.ndjson").write_text("\n".join([
        json.dumps({"type": "attempt", "attempt": "1", "t": 10.5}),
        json.dumps({"v": 1, "type": "attempt", "attempt": 1, "max_attempts": 1,
                    "agent": "worker", "t": 10.5}),
        json.dumps({"type": "step", "t": 11.0, "started": 10.6, "usage": "many"}),
        json.dumps({"v": 1, "type": "step", "t": 11.1, "started": 10.7, "tool": None}),
        json.dumps({"type": "tool", "t": 11.2, "started": "then", "name": "garbage"}),
        json.dumps({"v": 1, "type": "tool", "t": 11.3, "started": 11.2, "name": XSS}),
        '{"type": "attempt_end", "attempt": 1, "t": 11.5, "status": "fail']) + "\n")
    path = html.write_report(run_dir, tmp_path / "control")
    text = path.read_text()
    page = Page(text)
    assert page.sections[0] == "plan" and not [t for t, _ in page.tags if t == "script"]
    assert len(page.of("model")) == 1 and len(page.of("merge")) == 1
    assert page.of("tool") == [f"{XSS} · 0.1 s"] and XSS not in text
    assert "garbage" not in text
