"""Model faults through `agentrun run` and the real SDKs against the fake model server: what a
model says that is not an answer (refusals, replies cut off at the output limit, an end without
a submitted result: never `complete`, each named in the group's result, the progress lines and
the spec's Execution Summary), a rate limit longer than agentrun waits, and a model that never
stops under a spending cap. Each group is scripted to its own fault, and the server's record of
each group's requests shows that the fault was served at the intended turn. (How the OpenAI
wire format says the same is read is tests/test_providers_sdk.py's.)"""

from __future__ import annotations

import email.utils
import re
import threading
import time
from pathlib import Path

from clirun import agentrun
from fake_model_server import Error, FakeModelServer, RecordedRequest, Reply
from gitutil import init_repo
from runkit import STATE_MD, spec_text

SPEC = "SPEC-29"
GROUP_ID = re.compile(r"\bG\d+\b")
USAGE = {"input_tokens": 100, "output_tokens": 20}
KEY = "sk-test-fault-key"


def write(path: str) -> Reply:
    return Reply(tool_calls=[{"name": "write_file", "arguments": {
        "path": path, "content": f"# {path}\n"}}], usage=USAGE)


def submit(status: str = "complete") -> Reply:
    return Reply(tool_calls=[{"name": "submit_result", "arguments": {
        "status": status, "summary": "done", "criteria_met": ["every file exists"],
        "deviations": []}}], usage=USAGE)


def group_of(request: RecordedRequest) -> str:
    messages = (request.body or {}).get("messages") or []
    first = next((str(m.get("content")) for m in messages if m.get("role") == "user"), "")
    found = GROUP_ID.search(first)
    return found.group(0) if found else "?"


class PerGroup:
    """Serves each group its own replies in order, and keeps each group's requests. The first
    requests of the groups in `meet` are answered only once all of them have come (their
    workers all started), so that one group's fault cannot keep another from starting."""

    def __init__(self, replies: dict[str, list[Reply | Error]], meet: tuple[str, ...] = ()):
        self.replies = {g: list(r) for g, r in replies.items()}
        self.meet = set(meet)
        self.seen: dict[str, list[RecordedRequest]] = {}
        self.times: dict[str, list[float]] = {}  # when each request arrived
        self.lock = threading.Condition()

    def __call__(self, request: RecordedRequest) -> Reply | Error:
        group = group_of(request)
        with self.lock:
            self.seen.setdefault(group, []).append(request)
            self.times.setdefault(group, []).append(time.monotonic())
            self.lock.notify_all()
            if group in self.meet:
                self.lock.wait_for(lambda: self.meet <= set(self.seen), timeout=60)
            left = self.replies.get(group) or []
            return left.pop(0) if left else Error(400, f"nothing scripted for {group}")

    def said(self, group: str, n: int) -> str:
        """The text of request `n` of `group`'s (what the model was sent)."""
        return str((self.seen[group][n].body or {}).get("messages"))


def project(root: Path, groups: list[str], files: dict[str, str] | None = None) -> Path:
    return init_repo(root, {**(files or {}),
        "README.md": "# fixture\n",
        ".gitignore": ".specflow/runs/\n",
        ".specflow/PROJECT.md": "# Project\n",
        ".specflow/STATE.md": STATE_MD.format(spec=SPEC),
        f".specflow/specs/{SPEC}.md": spec_text(SPEC, [(g, [], f"src/{g}.py") for g in groups]),
    })


def run(root: Path, server: FakeModelServer, provider: str, *extra: str):
    env = ({"ANTHROPIC_BASE_URL": server.anthropic_base_url, "ANTHROPIC_API_KEY": KEY}
           if provider == "anthropic" else
           {"OPENAI_BASE_URL": server.openai_base_url, "OPENAI_API_KEY": KEY})
    model = "claude-sonnet-4-6" if provider == "anthropic" else "gpt-4o"
    return agentrun("run", SPEC, "--provider", provider, "--model", model, "--yes", "--json",
                    "--no-review", *extra, cwd=root, env=env)


def test_anthropic_refusals_truncations_and_a_missing_result_are_never_complete(tmp_path):
    model = PerGroup({
        "G1": [Reply(text="I can't help with that request.", stop_reason="refusal")],
        "G2": [write("src/G2.py"), Reply(stop_reason="refusal", usage=USAGE)],
        "G3": [Reply(text="The plan, part", stop_reason="max_tokens", usage=USAGE)] * 3,
        "G4": [Reply(tool_calls=[{"name": "write_file", "arguments": {"path": "big.py"}}],
                     stop_reason="max_tokens", usage=USAGE), write("src/G4.py"), submit()],
        "G5": [write("src/G5.py"), Reply(text="Done.", usage=USAGE),
               Reply(text="Done, really.", usage=USAGE)],
    })
    root = project(tmp_path / "p", list(model.replies))
    with FakeModelServer(responder=model) as server:
        proc = run(root, server, "anthropic")
    assert proc.returncode == 1, proc.stderr
    doc = proc.json
    groups = doc["groups"]
    ended = {g: (v["status"], v["stop_reason"]) for g, v in groups.items()}
    assert ended == {"G1": ("failed", "refusal"), "G2": ("partial", "refusal"),
                     "G3": ("failed", "truncated"), "G4": ("complete", "completed"),
                     "G5": ("partial", "no_result")}
    assert doc["status"] != "complete"
    # G1: refused at its first request, and not asked again by a retry
    assert len(model.seen["G1"]) == 1
    assert groups["G1"]["error"] == "the model refused the task: I can't help with that request."
    # G2: refused (no words) at its second request; its first file is kept as partial work
    assert len(model.seen["G2"]) == 2
    assert groups["G2"]["error"] == "the model refused the task: (it gave no reason)"
    assert groups["G2"]["files_created"] == ["src/G2.py"]
    # G3: cut off three times in a row, continued twice, then stopped
    assert len(model.seen["G3"]) == 3
    assert "Continue where you stopped" in model.said("G3", 2)
    assert "cut off at the output limit 3 times in a row (the last one mid text)" in \
        groups["G3"]["error"]
    # G4: its cut-off call was not run; asked for smaller calls, it went on and completed
    assert len(model.seen["G4"]) == 3 and not (root / "big.py").exists()
    assert "no call of that reply was run" in model.said("G4", 1)
    assert groups["G4"]["files_created"] == ["src/G4.py"]
    # G5: ended its turn, was asked once for its result, ended again: kept, not complete
    assert len(model.seen["G5"]) == 3 and "without calling submit_result" in model.said("G5", 2)
    assert "without submitting its result" in groups["G5"]["error"]
    # named in the progress lines and in the spec's Execution Summary
    for words in ("the model refused the task", "cut off at the output limit",
                  "without submitting its result"):
        assert words in proc.stderr
    summary = (root / f".specflow/specs/{SPEC}.md").read_text()
    assert "the model refused the task" in summary and "cut off at the output limit" in summary


def test_a_rate_limit_longer_than_agentrun_waits_stops_the_run_and_resume_continues(tmp_path):
    """G1 meets a 429 asking (as an HTTP date) for an hour at its second call, G3 a 529 asking
    for two hours at its first: neither waits, no further worker starts (G4), the run ends
    within a minute of the 429, exit 1, naming the limit and the wait. G2's 503 asks for 0.3 s
    (`retry-after-ms`): that wait is sat through, and G2 completes. `--resume` continues."""
    hour = email.utils.formatdate(time.time() + 3600, usegmt=True)
    model = PerGroup({
        "G1": [write("src/G1.py"), Error(429, "tokens per minute exceeded",
                                         headers={"retry-after": hour})],
        "G2": [Error(503, "unavailable", headers={"retry-after-ms": "300"}),
               write("src/G2.py"), submit()],
        "G3": [Error(529, "Overloaded", headers={"retry-after": "7200"})],
    }, meet=("G1", "G2", "G3"))
    root = init_repo(tmp_path / "p", {
        "README.md": "# fixture\n", ".gitignore": ".specflow/runs/\n",
        ".specflow/PROJECT.md": "# Project\n", ".specflow/STATE.md": STATE_MD.format(spec=SPEC),
        f".specflow/specs/{SPEC}.md": spec_text(SPEC, [
            ("G1", [], "src/G1.py"), ("G2", [], "src/G2.py"), ("G3", [], "src/G3.py"),
            ("G4", ["G2"], "src/G4.py")])})
    with FakeModelServer(responder=model) as server:
        proc = run(root, server, "anthropic")
    assert time.monotonic() - model.times["G1"][1] < 60  # from the 429 to the end of the run
    assert proc.returncode == 1, proc.stderr
    doc = proc.json
    assert doc["stop_reason"] == "rate_limited" and doc["status"] == "partial"
    groups = doc["groups"]
    assert {g: (v["status"], v["stop_reason"]) for g, v in groups.items()} == {
        "G1": ("partial", "rate_limited"), "G2": ("complete", "completed"),
        "G3": ("failed", "rate_limited"), "G4": ("blocked", "rate_limited")}
    # the faults met the intended calls, and the long waits were not retried
    assert [len(model.seen[g]) for g in ("G1", "G2", "G3")] == [2, 3, 1]
    assert "G4" not in model.seen
    assert re.search(r"^anthropic rate limit \(HTTP 429\): tokens per minute exceeded; the "
                     r"server asks to wait 3[5-6]\d\d s, longer than agentrun waits \(60 s\)",
                     groups["G1"]["error"])  # (an HTTP date: an hour from when it was sent)
    assert "anthropic is overloaded (HTTP 529): Overloaded; the server asks to wait 7200 s" \
        in groups["G3"]["error"]
    assert "rate limit" in groups["G4"]["error"] and "--resume" in groups["G4"]["error"]
    assert any(w.startswith("the model's rate limit stopped the run") for w in doc["warnings"])
    assert "the model's rate limit stopped the run" in proc.stderr

    # (G1's partial work landed: the resumed worker finishes it)
    again = PerGroup({"G1": [write("src/G1_rest.py"), submit()],
                      "G3": [write("src/G3.py"), submit()], "G4": [write("src/G4.py"), submit()]})
    with FakeModelServer(responder=again) as server:
        proc = run(root, server, "anthropic", "--resume")
    assert proc.returncode == 0, proc.stderr
    assert proc.json["status"] == "complete" and sorted(again.seen) == ["G1", "G3", "G4"]


class Endless:
    """A model that never finishes: each call writes one more file, whatever it is told. The
    first calls are answered once every group of `meet` has called (all its workers run)."""

    def __init__(self, meet: tuple[str, ...]) -> None:
        self.calls: dict[str, int] = {}
        self.meet = set(meet)
        self.lock = threading.Condition()

    def __call__(self, request: RecordedRequest) -> Reply:
        group = group_of(request)
        with self.lock:
            n = self.calls[group] = self.calls.get(group, 0) + 1
            self.lock.notify_all()
            self.lock.wait_for(lambda: self.meet <= set(self.calls), timeout=60)
        return Reply(tool_calls=[{"name": "write_file", "arguments": {
            "path": f"src/{group}_{n}.py", "content": f"# {n}\n"}}], usage=USAGE, delay_s=0.05)


def test_the_spending_cap_is_hard_whatever_the_model_does(tmp_path):
    """Three workers that would never stop, a cap of 8 calls: once the run has spent it, each
    running worker makes no call beyond the one in flight; what they committed is kept as
    partial, and the run spent at most the cap plus one call per worker."""
    call_usd = (100 + 20) * 1000.0 / 1e6  # USAGE at $1000 per million tokens
    model = Endless(meet=("G1", "G2", "G3"))
    root = project(tmp_path / "p", ["G1", "G2", "G3"], {
        ".specflow/config.yaml": "pricing:\n  fake-model: {input: 1000.0, output: 1000.0}\n"})
    cap = 8 * call_usd
    with FakeModelServer(responder=model) as server:
        proc = agentrun("run", SPEC, "--provider", "openai", "--model", "fake-model", "--yes",
                        "--json", "--no-review", "--max-cost", f"{cap}", cwd=root,
                        env={"OPENAI_BASE_URL": server.openai_base_url,
                             "OPENAI_API_KEY": KEY})
    assert proc.returncode == 1, proc.stderr
    doc = proc.json
    assert doc["stop_reason"] == "cost_cap"
    calls = len(server.requests)
    assert 8 <= calls <= 8 + 3, model.calls  # the cap, and at most a call in flight each
    assert cap <= doc["spent_usd"] <= cap + 3 * call_usd + 1e-9
    for gid, group in doc["groups"].items():
        assert (group["status"], group["stop_reason"]) == ("partial", "cost_cap"), gid
        assert len(group["files_created"]) == model.calls[gid]  # every call's file, kept
    assert "stopped at its next model call (spending cap)" in proc.stderr
