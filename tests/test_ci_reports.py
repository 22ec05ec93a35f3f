"""Reports CI systems read: JUnit XML, the GitHub job summary and annotations, the live event
stream of `run --events`."""

from __future__ import annotations

import io
import json
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from clirun import agentrun, finish, start
from runkit import make_project, scripted, spec_text, submit, writes

from agentrun.audit.static import static_audit
from agentrun.report.execution_state import GroupState, ReviewRecord, RunState, WaveState
from agentrun.report.github import (
    annotation,
    audit_annotations,
    publish,
    publish_run,
    run_annotations,
    run_summary_markdown,
)
from agentrun.report.junit import audit_junit, run_junit
from agentrun.spec import load_spec

SHA = "0123456789abcdef0123456789abcdef01234567"


def sample_state() -> RunState:
    state = RunState(run_id="20260101-000000-abcd", spec_id="SPEC-40",
                     spec_path=".specflow/specs/SPEC-40.md", mode="orchestrated",
                     base_commit=SHA, target_branch="main", started="2026-01-01 00:00 UTC",
                     status="partial", provider="scripted", model="scripted",
                     waves=[WaveState(number=1, label="1", groups=["G1", "G2", "G4"],
                                      status="done"),
                            WaveState(number=2, label="2", groups=["G3", "G5"],
                                      status="done")])
    state.groups = {
        "G1": GroupState(id="G1", title="Parser & <lexer>", wave="1", batch="G1",
                         status="complete", commits=[SHA],
                         files_created=["a.py"], duration_s=1.5, summary="done",
                         usage={"input_tokens": 10, "output_tokens": 5,
                                "cache_read_tokens": 0, "cache_write_tokens": 0}),
        "G2": GroupState(id="G2", title="Emitter", wave="1", batch="G2", status="failed",
                         error="compile error\x1b[31m in b.py\x00\nsecond line",
                         deviations=["skipped a test"]),
        "G3": GroupState(id="G3", title="Linker", wave="2", batch="G3", status="blocked",
                         error="dependency G2 did not complete"),
        "G4": GroupState(id="G4", title="Docs", wave="1", batch="G4", status="partial",
                         error="ran out of budget"),
        "G5": GroupState(id="G5", title="", wave="2", batch="G5", status="pending"),
    }
    return state


def test_run_junit_is_valid_xml_with_one_case_per_group():
    root = ET.fromstring(run_junit(sample_state()).encode())
    suite = root.find("testsuite")
    assert suite.get("name") == "SPEC-40"
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("5", "2", "2")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert list(cases) == ["G1: Parser & <lexer>", "G2: Emitter", "G3: Linker", "G4: Docs",
                           "G5"]
    assert cases["G1: Parser & <lexer>"].find("failure") is None
    assert SHA in cases["G1: Parser & <lexer>"].find("system-out").text
    failure = cases["G2: Emitter"].find("failure")
    assert failure.get("type") == "failed"
    assert failure.get("message") == "compile error\ufffd[31m in b.py\ufffd"  # no raw controls
    assert "second line" in failure.text and "deviation: skipped a test" in failure.text
    assert cases["G3: Linker"].find("skipped").get("message") == \
        "dependency G2 did not complete"
    assert cases["G4: Docs"].find("failure").get("type") == "partial"
    assert cases["G5"].find("skipped").get("message") == "not run yet"
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["status"] == "partial" and props["tokens"] == "15"


def test_an_ended_run_reports_its_review_as_a_test_case_an_annotation_and_a_line():
    """A run that ends partial on its review says why in every CI report; a run still going
    (an aggregate of an earlier wave) has no review case yet."""
    def ended(**fields) -> RunState:
        state = sample_state()
        state.groups = {"G1": state.groups["G1"]}
        return state.model_copy(update={"finished": "2026-01-01 00:10 UTC", **fields})

    changes = ended(status="partial", stop_reason="review", reviews=[
        ReviewRecord(result="CHANGES_REQUESTED", version=1, findings=2)])
    suite = ET.fromstring(run_junit(changes).encode()).find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("2", "1", "0")
    case = next(c for c in suite.iter("testcase") if c.get("name") == "review")
    assert case.find("failure").get("message") == "CHANGES_REQUESTED (Review v1, 1 review(s))"
    assert run_annotations(changes)[-1] == (
        "::error file=.specflow/specs/SPEC-40.md,title=SPEC-40 review::CHANGES_REQUESTED "
        "(Review v1, 1 review(s)); fix it with `agentrun fix SPEC-40`")
    assert "**Review:** CHANGES_REQUESTED (Review v1, 1 review(s))" in \
        run_summary_markdown(changes, env={})

    approved = ended(status="complete", reviews=[ReviewRecord(result="APPROVED", version=1)])
    case = next(c for c in ET.fromstring(run_junit(approved).encode()).iter("testcase")
                if c.get("name") == "review")
    assert case.find("failure") is None and case.find("skipped") is None
    assert run_annotations(approved) == []
    skipped = ended(status="complete", review_skipped="--no-review")
    case = next(c for c in ET.fromstring(run_junit(skipped).encode()).iter("testcase")
                if c.get("name") == "review")
    assert case.find("skipped").get("message") == "not reviewed (--no-review)"
    running = sample_state()  # not ended: no review case, no review line
    assert "review" not in [c.get("name") for c in
                            ET.fromstring(run_junit(running).encode()).iter("testcase")]
    assert "**Review:**" not in run_summary_markdown(running, env={})


def test_audit_junit_has_one_case_per_spec(tmp_path):
    good = tmp_path / "SPEC-41.md"
    good.write_text(spec_text("SPEC-41", [("G1", [], "a.py")]))
    bad = tmp_path / "SPEC-42.md"
    bad.write_text(spec_text("SPEC-42", []).replace("## Acceptance Criteria", "## Notes"))
    results = [static_audit(load_spec(good)), static_audit(load_spec(bad)).to_dict(),
               {"spec": "SPEC-43", "path": "x/SPEC-43.md", "verdict": "INVALID",
                "error": "broken frontmatter at line 2", "hint": "fix the YAML"}]
    suite = ET.fromstring(audit_junit(results).encode()).find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "1")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases["SPEC-41"].find("failure") is None and cases["SPEC-41"].find("error") is None
    failure = cases["SPEC-42"].find("failure")
    assert failure.get("type") == "NEEDS_REVISION"
    assert "Acceptance Criteria" in failure.text
    assert cases["SPEC-43"].find("error").get("message") == "broken frontmatter at line 2"


def test_annotations_escape_and_point_at_the_spec_line():
    assert annotation("error", "50% done\nnext", file="a,b.md", line=3, title="x: y") == \
        "::error file=a%2Cb.md,line=3,title=x%3A y::50%25 done%0Anext"
    lines = run_annotations(sample_state(), {"G2": 12, "G3": 14})
    assert lines[0].startswith("::error file=.specflow/specs/SPEC-40.md,line=12,"
                               "title=SPEC-40 G2 failed::compile error")
    assert lines[1].startswith("::warning file=.specflow/specs/SPEC-40.md,line=14,")
    assert len(lines) == 3  # failed G2, blocked G3, partial G4; not the complete or pending


def test_audit_annotations_name_file_and_line(tmp_path):
    spec = tmp_path / "specs" / "SPEC-44.md"
    spec.parent.mkdir()
    spec.write_text(spec_text("SPEC-44", [("G1", ["G9"], "a.py")]).replace(
        "## Acceptance Criteria", "## Notes"))
    lines = audit_annotations([static_audit(load_spec(spec))], root=tmp_path)
    assert any(line.startswith("::error file=specs/SPEC-44.md,title=SPEC-44 invalid-plan::")
               for line in lines), lines
    assert any(line.startswith("::error file=specs/SPEC-44.md,title=SPEC-44 missing-section")
               for line in lines), lines


def test_publish_only_on_github(tmp_path):
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    stream = io.StringIO()
    env = {"GITHUB_STEP_SUMMARY": str(summary), "GITHUB_ACTIONS": "true",
           "GITHUB_SERVER_URL": "https://github.example", "GITHUB_REPOSITORY": "o/r"}
    publish_run(sample_state(), title="SPEC-40: Compiler", group_lines={"G2": 9}, env=env,
                stream=stream)
    text = summary.read_text()
    assert text.startswith("earlier step\n### agentrun SPEC-40: ⚠️ partial")  # appended
    assert f"[`{SHA[:7]}`](https://github.example/o/r/commit/{SHA})" in text
    assert "| G1 | Parser & &lt;lexer> | 1 | ✅ complete |" in text  # no raw HTML
    assert "| G2 | Emitter | 1 | ❌ failed |" in text
    assert stream.getvalue().splitlines()[0].startswith("::error file=.specflow/specs/"
                                                        "SPEC-40.md,line=9,")
    quiet = io.StringIO()
    publish("md", ["::error::x"], env={}, stream=quiet)
    assert quiet.getvalue() == ""
    plain = run_summary_markdown(sample_state(), env={})  # off GitHub: short ids, no links
    assert f"`{SHA[:7]}`" in plain and "/commit/" not in plain


THREE = [("G1", [], "one.txt"), ("G2", [], "two.txt"), ("G3", ["G2"], "three.txt")]


def test_run_writes_junit_events_and_github_reports(tmp_path):
    script = {"groups": {"G1": writes("one.txt", "1\n", latency=1.0),
                         "G2": [submit("failed", "no", error="compile error in two.txt")],
                         "G3": writes("three.txt", "3\n")}}
    root = make_project(tmp_path / "p", "SPEC-45", spec_text("SPEC-45", THREE), script)
    summary, events = tmp_path / "summary.md", tmp_path / "events.ndjson"
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary),
           "GITHUB_SERVER_URL": "https://github.example", "GITHUB_REPOSITORY": "o/r"}
    proc = start("run", "SPEC-45", *scripted("--max-retries", "0", "--junit",
                                             str(tmp_path / "junit.xml"), "--events", str(events)),
                 cwd=root, env=env)
    seen_live = False
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        if events.exists() and '"worker_start"' in events.read_text():
            seen_live = proc.poll() is None  # written while the run still goes on
            break
        time.sleep(0.05)
    done = finish(proc, timeout=120)
    assert done.returncode == 1, done.stderr
    assert seen_live
    result = done.json  # --json stays one document: annotations went to stderr
    err = done.stderr

    lines = [json.loads(line) for line in events.read_text().splitlines()]
    assert lines[0]["type"] == "run_start" and lines[-1]["type"] == "run_done"
    assert any(e["type"].startswith("agent_") for e in lines)  # worker progress included
    recorded = (Path(result["run_dir"]) / "events.ndjson").read_text().splitlines()
    assert [json.loads(r) for r in recorded] == [e for e in lines
                                                 if not e["type"].startswith("agent_")]

    cases = {c.get("name").split(":")[0]: c
             for c in ET.parse(tmp_path / "junit.xml").getroot().iter("testcase")}
    assert cases["G1"].find("failure") is None
    assert cases["G2"].find("failure").get("message") == "compile error in two.txt"
    assert cases["G3"].find("skipped").get("message") == "dependency G2 did not complete"

    g1_commit = result["groups"]["G1"]["commits"][0]
    text = summary.read_text()
    assert f"https://github.example/o/r/commit/{g1_commit}" in text
    assert "❌ failed" in text and "⛔ blocked" in text
    spec = load_spec(root / ".specflow/specs/SPEC-45.md")
    line = spec.group("G2").line
    assert (f"::error file=.specflow/specs/SPEC-45.md,line={line},title=SPEC-45 G2 failed::"
            "compile error in two.txt") in err.splitlines()
    assert any(x.startswith("::warning ") and "G3 blocked" in x for x in err.splitlines())


def test_bad_events_target_is_bad_input(tmp_path):
    root = make_project(tmp_path / "p", "SPEC-46", spec_text("SPEC-46", THREE[:2]),
                        {"groups": {"G1": writes("one.txt", "1"), "G2": writes("two.txt", "2")}})
    proc = agentrun("run", "SPEC-46",
                    *scripted("--events", str(tmp_path / "no/such/dir/e.ndjson")), cwd=root)
    assert proc.returncode == 2 and "cannot write events" in proc.stderr
    assert "--events" in proc.stderr
    ok = agentrun("run", "SPEC-46", *scripted("--events", "-"), cwd=root)
    assert ok.returncode == 0, ok.stderr
    streamed = [json.loads(x) for x in ok.stderr.splitlines() if x.startswith("{")]
    assert streamed[0]["type"] == "run_start" and streamed[-1]["type"] == "run_done"
    assert ok.json["status"] == "complete"
