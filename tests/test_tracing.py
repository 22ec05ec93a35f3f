"""OpenTelemetry tracing: a real run through the real Anthropic SDK against the fake model
server, its spans received by a test OTLP/HTTP collector on 127.0.0.1 and decoded with
opentelemetry-proto. One trace from the run down to each model call, across the orchestrator
and its worker processes; GenAI attributes with the tokens the server reported; cost and status
on the group and run spans. A collector that never answers costs a bounded wait and one
warning; tracing asked for without the extra installed is one warning too.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from clirun import agentrun
from fake_model_server import FakeModelServer, RecordedRequest, Reply
from otlp_receiver import OtlpReceiver, ReceivedSpan
from test_review_cli import met, review_turn
from test_run_anthropic import API_KEY, SPEC, USAGE, GroupModel, make_project

from agentrun import telemetry
from agentrun.core import events as ev

GROUPS = [("G1", [], "src/alpha.py"), ("G2", [], "src/beta.py"),
          ("G3", ["G1"], "src/gamma.py")]
MODEL = "claude-sonnet-4-6"
AUDIT_HISTORY = """
## Audit History

### Audit v1 (2026-11-20 10:00)
**Status:** NEEDS_REVISION

### Audit v2 (2026-11-21 09:30)
**Status:** APPROVED
"""


class TracedModel(GroupModel):
    """The workers' turns (write, read, submit) and the reviewer's approval."""

    def __init__(self) -> None:
        super().__init__()
        self.turns.pop("G4")

    def __call__(self, request: RecordedRequest) -> Reply:
        if "independent code reviewer" in str((request.body or {}).get("system")):
            turn = review_turn([met(1, "src/alpha.py:1"), met(2, "git diff --stat")])
            return Reply(tool_calls=turn["tool_calls"], usage=USAGE)
        self.met = {g: True for g in self.turns}  # no meeting: waves differ from the base's
        return super().__call__(request)

    def _meet(self, group: str) -> None:
        pass


def by_id(spans: list[ReceivedSpan]) -> dict[str, ReceivedSpan]:
    return {s.span_id: s for s in spans}


def test_one_trace_from_the_run_to_each_model_call_across_processes(tmp_path):
    root = make_project(tmp_path / "project", GROUPS)
    spec_file = root / ".specflow" / "specs" / f"{SPEC}.md"
    spec_file.write_text(spec_file.read_text() + AUDIT_HISTORY)
    subprocess.run(["git", "commit", "-qam", "audited"], cwd=root, check=True)
    spec_text = spec_file.read_text()  # as the run finds it
    with FakeModelServer(responder=TracedModel()) as server, OtlpReceiver() as collector:
        proc = agentrun("run", SPEC, "--provider", "anthropic", "--model", MODEL, "--yes",
                        "--json", "--validate", "true",
                        env={"ANTHROPIC_BASE_URL": server.anthropic_base_url,
                             "ANTHROPIC_API_KEY": API_KEY,
                             "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
                             "OTEL_SERVICE_NAME": "agentrun-under-test"}, cwd=root)
        spans = list(collector.spans)
    assert proc.returncode == 0, proc.stderr
    result = proc.json
    assert result["status"] == "complete"
    assert not [w for w in result.get("warnings", []) if "trace" in w], result["warnings"]
    assert "traces not exported" not in proc.stderr

    # one trace, the run's, every span linked to one received parent, one root
    assert {s.trace_id for s in spans} == {result["trace_id"]}
    ids = by_id(spans)
    roots = [s for s in spans if not s.parent_id]
    assert [r.name for r in roots] == [f"agentrun run {SPEC}"]
    assert [s.name for s in spans if s.parent_id and s.parent_id not in ids] == []
    assert {s.resource["service.name"] for s in spans} == {"agentrun-under-test"}

    def named(prefix: str) -> list[ReceivedSpan]:
        return [s for s in spans if s.name.startswith(prefix)]

    def parent(span: ReceivedSpan) -> ReceivedSpan:
        return ids[span.parent_id]

    root = roots[0]
    assert root["agentrun.status"] == "complete" and root.status == "OK"
    assert root["agentrun.cost_usd"] == pytest.approx(result["cost_usd"]) and \
        result["cost_usd"] > 0
    assert [parent(s).name for s in named("base check")] == [root.name]
    # the spec's audit, as the run found it: its status and its Audit History's entries
    audit = named(f"audit {SPEC}")
    assert len(audit) == 1 and parent(audit[0]) is root
    assert (audit[0]["agentrun.audit.status"], audit[0]["agentrun.audited"]) == ("audited", True)
    assert "status: audited" in spec_text
    assert audit[0]["agentrun.audit.count"] == spec_text.count("### Audit v") == 2
    waves = {s.name: s for s in named("wave ")}
    assert set(waves) == {"wave 1", "wave 2"} and all(parent(w) is root for w in waves.values())
    groups = {s["agentrun.batch"]: s for s in named("group ")}
    assert set(groups) == {"G1", "G2", "G3"}
    for gid, span in groups.items():
        assert parent(span).name == ("wave 2" if gid == "G3" else "wave 1")
        assert span["agentrun.status"] == "complete" and span.status == "OK"
        assert span["agentrun.cost_usd"] == pytest.approx(result["groups"][gid]["cost_usd"])
    assert [parent(s).name for s in named("merge")] == ["wave 1", "wave 1", "wave 2"]
    assert sorted(parent(s).name for s in named("integration check")) == ["wave 1", "wave 2"]

    # each worker process continued its group's span: its attempt, model calls and tools
    attempts = named("invoke_agent spec-executor-worker")
    assert sorted(parent(a)["agentrun.batch"] for a in attempts) == ["G1", "G2", "G3"]
    pids = {a.resource["process.pid"] for a in attempts}
    assert len(pids) == 3 and root.resource["process.pid"] not in pids
    for attempt in attempts:
        inside = [s for s in spans if s.parent_id == attempt.span_id]
        calls = [s for s in inside if s.name == f"chat {MODEL}"]
        assert len(calls) == 3 and {c.kind for c in calls} == {"CLIENT"}
        for call in calls:
            assert call["gen_ai.operation.name"] == "chat"
            assert call["gen_ai.provider.name"] == call["gen_ai.system"] == "anthropic"
            assert call["gen_ai.request.model"] == MODEL
            assert (call["gen_ai.usage.input_tokens"], call["gen_ai.usage.output_tokens"],
                    call["gen_ai.usage.cache_read.input_tokens"]) == (
                USAGE["input_tokens"], USAGE["output_tokens"], USAGE["cache_read_tokens"])
            assert attempt.start_ns <= call.start_ns <= call.end_ns <= attempt.end_ns
        assert sorted(s["gen_ai.tool.name"] for s in inside if s.name.startswith(
            "execute_tool")) == ["read_file", "submit_result", "write_file"]
        assert [s.name for s in inside if s.name == "validation"] == ["validation"]

    # the review, with the reviewer's model call
    review = named("review")
    assert len(review) == 1 and parent(review[0]) is root and review[0].status == "OK"
    assert [s["gen_ai.usage.input_tokens"] for s in spans if s.parent_id ==
            review[0].span_id and s.name.startswith("chat")] == [USAGE["input_tokens"]]


def test_a_collector_that_never_answers_costs_a_bounded_wait_and_one_warning(monkeypatch):
    from agentrun.telemetry import export

    with OtlpReceiver(answer=False) as hung:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", hung.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "30")  # an unbounded wait: 30 s
        monkeypatch.setattr(export, "_PIPELINE", None)
        monkeypatch.setattr(export, "_PROBLEMS", [])
        trace = telemetry.run_trace("20260101-000000-abcd", "SPEC-1", "orchestrated")
        assert trace is not None
        now = time.time()
        parent = trace.parent_for("G1")
        worker = telemetry.worker_trace(parent, batch="G1", provider="anthropic",
                                        model=MODEL, executor="builtin")
        assert worker is not None
        events = [ev.AttemptEvent(attempt=1, max_attempts=1, agent="worker", t=now),
                  ev.StepEvent(started=now, t=now + 0.1, usage=ev.UsageCounts(**USAGE)),
                  ev.AttemptEndEvent(attempt=1, status="complete", t=now + 0.2)]
        for event in events:
            worker.on_event(event)
        started = time.monotonic()
        worker.on_event(ev.DoneEvent(status="complete", t=now + 0.3))  # the worker's end: bounded
        trace.on_event(ev.WorkerResultEvent(batch="G1", groups=("G1",), status="complete",
                                            commits=1, tokens=0, t=now + 0.4))
        trace.on_event(ev.RunDoneEvent(status="complete", t=now + 0.5))
        waited = time.monotonic() - started
        time.sleep(0.5)  # the exports hang in their threads; nobody waits for them
        assert waited < export.WORKER_FLUSH_S + export.FLUSH_S + 1.0
        problems = telemetry.problems()
        assert len(problems) == 1 and "answer" in problems[0], problems
        assert hung.endpoint in problems[0]
        assert hung.requests == 0 and hung.spans == []  # it took them, it never answered


def test_tracing_without_the_extra_installed_is_one_warning(monkeypatch):
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    for name in [m for m in sys.modules if m.startswith(("opentelemetry",
                                                         "agentrun.telemetry."))]:
        monkeypatch.delitem(sys.modules, name)
    for loaded in ("spans", "export"):
        monkeypatch.delattr(telemetry, loaded, raising=False)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # import opentelemetry fails
    monkeypatch.setattr(telemetry, "_PROBLEMS", [])
    assert telemetry.run_trace("20260101-000000-abcd", "SPEC-1", "single") is None
    assert telemetry.worker_trace("00-" + "1" * 32 + "-" + "2" * 16 + "-01", batch="G1",
                                  provider="anthropic", model=MODEL, executor="builtin") is None
    problems = telemetry.problems()
    assert len(problems) == 1 and "agentrun-specflow[otel]" in problems[0]
    # and with nothing asked for, nothing is tried at all
    monkeypatch.delenv("OTEL_TRACES_EXPORTER")
    assert not telemetry.configured({}) and telemetry.run_trace("r", "S", "single") is None
    assert not telemetry.configured({"OTEL_TRACES_EXPORTER": "none",
                                     "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})


def test_an_exporter_or_protocol_agentrun_does_not_speak_is_said_not_sent(monkeypatch):
    """OTLP over HTTP is what goes out; `console`, `zipkin` or gRPC asked for would otherwise
    send spans where nothing listens (the default endpoint): the run is not traced, and says
    why once, naming the setting to change."""
    endpoint = "http://127.0.0.1:9"
    cases = [  # (environment, traced, the problem said, if any)
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True, None),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}, True, None),
        ({"OTEL_TRACES_EXPORTER": "OTLP , console"}, True, "console beside otlp"),
        ({"OTEL_TRACES_EXPORTER": "console"}, False, "OTEL_TRACES_EXPORTER=console"),
        ({"OTEL_TRACES_EXPORTER": "zipkin,console", "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint},
         False, "OTEL_TRACES_EXPORTER=zipkin,console"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
         False, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"},
         True, None),
        ({"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"}, False, None),
    ]
    for env, traced, said in cases:
        monkeypatch.setattr(telemetry, "_PROBLEMS", [])
        assert telemetry.configured(env) is traced, env
        assert telemetry.configured(env) is traced, env  # asked again: said once
        problems = telemetry.problems()
        if said is None:
            assert problems == [], (env, problems)
        else:
            assert len(problems) == 1 and said in problems[0], (env, problems)
            assert "OTLP/HTTP" in problems[0] or "http/protobuf" in problems[0]


def test_the_github_job_summary_names_the_trace():
    from agentrun.report.execution_state import RunState
    from agentrun.report.github import run_summary_markdown

    state = RunState(run_id="r1", spec_id="SPEC-1", spec_path="s.md", mode="single",
                     base_commit="0" * 40, target_branch="main", started="now")
    assert "Trace" not in run_summary_markdown(state, env={})
    state.trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    assert "**Trace:** `4bf92f3577b34da6a3ce929d0e0e4736`" in run_summary_markdown(state, env={})
