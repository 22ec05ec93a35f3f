"""`agentrun worker --assignment FILE`: one assignment end to end, its result JSON."""

from __future__ import annotations

import json
import subprocess
import sys

import yaml
from clirun import agentrun
from gitutil import init_repo, run_git
from runkit import writes

from agentrun.core.results import WorkerResult
from agentrun.protocol import Assignment, ProviderSettings, SandboxSettings, WorkerLimits

RESULT_KEYS = {"group", "groups", "status", "files_created", "files_modified", "commits",
               "criteria_met", "deviations", "error", "summary", "attempts", "steps", "usage",
               "cost_usd", "duration_s", "stop_reason"}


def make_assignment(tmp_path, script, validation=None, checkout=True,
                    sandbox: str = "auto") -> tuple[Assignment, str]:
    repo = init_repo(tmp_path / "repo", {"README.md": "hi\n"})
    base = run_git(repo, "rev-parse", "HEAD")
    wt = tmp_path / "wt"
    lazy = [] if checkout else ["--no-checkout"]
    run_git(repo, "worktree", "add", "-q", *lazy, "-b", "agentrun/SPEC-1/G1", str(wt), base)
    script_path = tmp_path / "script.yaml"
    script_path.write_text(yaml.safe_dump(script))
    out = tmp_path / "out"
    out.mkdir()
    assignment = Assignment(
        run_id="r1", spec_id="SPEC-1", spec_path=".specflow/specs/SPEC-1.md",
        spec_title="Greeting", batch="G1",
        groups=[{"id": "G1", "title": "Add greeting", "tasks": ["Create `hello.py`"],
                 "files": ["hello.py"]}],
        sections={"context": "A tiny project.", "requirements": "Say hello."},
        acceptance_criteria=["hello.py prints hi"], worktree=str(wt),
        branch="agentrun/SPEC-1/G1", base_commit=base,
        provider=ProviderSettings(provider="scripted", model="scripted",
                                  script=str(script_path)),
        limits=WorkerLimits(retries=1), validation_command=validation,
        result_path=str(out / "result.json"), transcript_path=str(out / "t.jsonl"),
        progress_path=str(out / "progress.ndjson"), sandbox=SandboxSettings(mode=sandbox))
    path = tmp_path / "assignment.json"
    assignment.write(path)
    return assignment, str(path)


def test_worker_runs_an_assignment_and_writes_a_verified_result(tmp_path):
    script = {"groups": {"G1": writes("hello.py", "print('hi')\n",
                                      criteria=["hello.py prints hi"])}}
    assignment, path = make_assignment(tmp_path, script, validation="python3 hello.py")
    proc = agentrun("worker", "--assignment", path, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads((tmp_path / "out/result.json").read_text())
    assert set(data) >= RESULT_KEYS
    result = WorkerResult.model_validate(data)
    assert result.status == "complete" and result.stop_reason == "completed"
    assert result.files_created == ["hello.py"] and result.criteria_met == ["hello.py prints hi"]
    assert len(result.commits) == 1
    # the commit is real and on the worker's branch
    assert run_git(tmp_path / "wt", "rev-parse", "HEAD") == result.commits[0]
    assert result.usage.input_tokens > 0 and result.cost_usd == 0.0
    assert proc.json["status"] == "complete"
    transcript = (tmp_path / "out/t.jsonl").read_text().splitlines()
    assert transcript and all(json.loads(line) for line in transcript)


def test_worker_checks_out_a_worktree_created_without_files(tmp_path):
    script = {"groups": {"G1": writes("hello.py", "print(open('README.md').read())\n")}}
    _, path = make_assignment(tmp_path, script, validation="python3 hello.py",
                              checkout=False)
    assert not (tmp_path / "wt/README.md").exists()
    proc = agentrun("worker", "--assignment", path, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = WorkerResult.model_validate_json((tmp_path / "out/result.json").read_text())
    assert result.status == "complete" and result.files_created == ["hello.py"]
    assert (tmp_path / "wt/README.md").read_text() == "hi\n"
    assert run_git(tmp_path / "wt", "status", "--porcelain") == ""


def test_a_retry_on_a_fresh_checkout_starts_from_the_checkout(tmp_path):
    attempts = writes("junk.txt", "junk\n") + writes("hello.py", "print('hi')\n")
    _, path = make_assignment(tmp_path, {"groups": {"G1": attempts}},
                              validation="python3 hello.py", checkout=False)
    proc = agentrun("worker", "--assignment", path, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = WorkerResult.model_validate_json((tmp_path / "out/result.json").read_text())
    assert result.attempts == 2 and result.files_created == ["hello.py"]
    assert not (tmp_path / "wt/junk.txt").exists()


PRELOADED = """
import agentrun.preload
from agentrun.agent.prompts import compile_template, render_worker_assignment
from agentrun.resources import list_resources
from agentrun.tools.names import ALL_TOOLS
from agentrun.tools.registry import tool_specs
from agentrun.tools.tooldef import _parameters
before = compile_template.cache_info()
render_worker_assignment({"groups": [{"id": "G1"}]})
tool_specs()
after = compile_template.cache_info()
print(before.currsize, len(list_resources("prompts")), after.hits - before.hits,
      after.misses - before.misses, _parameters.cache_info().currsize, len(ALL_TOOLS))
"""


def test_preload_does_once_what_every_worker_would_do():
    proc = subprocess.run([sys.executable, "-c", PRELOADED], capture_output=True, text=True,
                          check=True)
    compiled, prompts, hits, misses, schemas, tools = map(int, proc.stdout.split())
    assert compiled == prompts > 0
    assert (hits, misses) == (1, 0)  # a worker renders its task without compiling
    assert schemas == tools > 0


def test_worker_failure_is_a_result_not_a_crash(tmp_path):
    script = {"groups": {"G1": writes("hello.py", "print(\n") * 2}}  # both attempts
    _, path = make_assignment(tmp_path, script, validation="python3 hello.py")
    proc = agentrun("worker", "--assignment", path, "--json", cwd=tmp_path)
    assert proc.returncode == 1
    result = WorkerResult.model_validate_json((tmp_path / "out/result.json").read_text())
    assert result.status in ("failed", "partial")
    assert "SyntaxError" in (result.error or "")
    assert result.attempts == 2
    assert result.commits == []  # the branch only ever holds finished work


def test_invalid_assignment_is_bad_input(tmp_path):
    bad = tmp_path / "a.json"
    bad.write_text('{"run_id": 1}')
    proc = agentrun("worker", "--assignment", str(bad), cwd=tmp_path)
    assert proc.returncode == 2 and "invalid assignment" in proc.stderr
