"""The bundled example project that `agentrun demo` runs: its own tests, its specs, and the
demo script the scripted provider replays.

The replays apply the script's file edits through the real file tools the way a run applies
them: the groups of one wave each start from the same base in their own copy (as in their own
worktrees), their changes are merged, and the next wave starts from the merged result. The
project's tests must pass after SPEC-001 and SPEC-002 land in either order; that they pass in
every worker's worktree is what tests/test_demo.py proves with a real run. The specs are read by
agentrun's own parser and planner, so a spec the tools misread fails here too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from agentrun.audit.static import static_audit
from agentrun.plan import build_plan
from agentrun.providers.base import Request
from agentrun.providers.scripted import ScriptedProvider
from agentrun.spec import Spec, load_spec
from agentrun.tools.base import ToolContext
from agentrun.tools.registry import Toolset, tool_specs

EXAMPLE = Path(__file__).resolve().parents[1] / ".specflow-example"
SPECS = EXAMPLE / ".specflow" / "specs"
SCRIPT = EXAMPLE / ".specflow" / "demo-script.yaml"

# tool name -> (required argument names, every argument name), from the tools' own schemas
TOOLS = {t.name: (set(t.parameters.get("required", [])), set(t.parameters["properties"]))
         for t in tool_specs()}
FILE_TOOLS = ["read_file", "write_file", "edit_file", "list_files", "search_files"]
WRITES = {"write_file", "edit_file"}
USAGE_KEYS = {"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"}


def _spec(name: str) -> Spec:
    return load_spec(SPECS / f"{name}.md")


def _criteria(name: str) -> list[str]:
    return [c.text for c in _spec(name).acceptance_criteria]


def _declared_files(name: str) -> set[str]:
    spec = _spec(name)
    return set(spec.files_to_create + spec.files_to_modify)


# -- the script and its replay ------------------------------------------------------------------


def _script() -> dict:
    return yaml.safe_load(SCRIPT.read_text(encoding="utf-8"))


def _calls(turns: list[dict]) -> list[dict]:
    return [call for turn in turns for call in turn.get("tool_calls") or []]


def _written(turns: list[dict]) -> set[str]:
    return {c["arguments"]["path"] for c in _calls(turns) if c["name"] in WRITES}


def _replay(turns: list[dict], root: Path, who: str) -> set[str]:
    """Run the script's file tool calls under `root` with the real tools; return the paths
    written. Every call must succeed as it would in a run (reads of existing paths, edits whose
    `old` occurs exactly once). Commands, budget checks and the submission are the loop's
    business and are skipped; the project's tests are run separately."""
    tools = Toolset(ToolContext(root=root), FILE_TOOLS)
    written = set()
    for call in _calls(turns):
        name, args = call["name"], call.get("arguments") or {}
        if name not in FILE_TOOLS:
            continue
        result = tools.call(name, args)
        assert not result.is_error, f"{who}: {name}({args.get('path')}): {result.content}"
        if name in WRITES:
            written.add(args["path"])
    return written


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    return dst


def _pytest(root: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # the example needs no plugins; saves ~2 s a run
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)


def _assert_passes(root: Path, what: str) -> None:
    proc = _pytest(root)
    assert proc.returncode == 0, f"{what}: tests failed\n{proc.stdout[-3000:]}{proc.stderr}"
    assert " passed" in proc.stdout


def _replay_spec_002(base: Path, work: Path) -> Path:
    """Run SPEC-002's groups wave by wave, each from the wave's base; return the merged tree."""
    script = _script()["groups"]
    for n, wave in enumerate(build_plan(_spec("SPEC-002")).waves, start=1):
        merged = _copy(base, work / f"wave{n}-merged")
        owners: dict[str, str] = {}
        for gid in wave.groups:
            tree = _copy(base, work / f"wave{n}-{gid}")
            for path in sorted(_replay(script[gid], tree, gid)):
                assert path not in owners, f"{gid} and {owners[path]} both change {path}"
                owners[path] = gid
                target = merged / path
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(tree / path, target)
        base = merged
    return base


# -- the example project ------------------------------------------------------------------------


def test_example_test_suite_passes(tmp_path):
    _assert_passes(_copy(EXAMPLE, tmp_path / "example"), "the example project")


def test_example_has_specflow_files():
    flow = EXAMPLE / ".specflow"
    state = (flow / "STATE.md").read_text(encoding="utf-8").splitlines()
    for heading in ("Current Position", "Execution Status", "Queue", "Decisions", "Warnings"):
        assert f"## {heading}" in state
    assert "- **Active Specification:** SPEC-002" in state
    assert "python -m pytest -q" in (flow / "PROJECT.md").read_text(encoding="utf-8")
    config = yaml.safe_load((flow / "config.yaml").read_text(encoding="utf-8"))
    assert config["validation_command"] == "python -m pytest -q"
    assert {"provider", "model", "max_parallel", "token_budget", "worker_timeout_s",
            "timeout_s"} <= set(config)
    assert config["max_parallel"] >= 3, "wave 1 of SPEC-002 runs three groups at once"
    ignored = (EXAMPLE / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert ".specflow/runs/" in ignored and "__pycache__/" in ignored


def test_specs_have_the_expected_shape():
    for name, complexity in (("SPEC-001", "small"), ("SPEC-002", "large")):
        spec = _spec(name)
        assert (spec.id, spec.status, spec.complexity) == (name, "audited", complexity)
        assert spec.acceptance_criteria
        assert "### Audit v1 (" in spec.text and "**Status:** APPROVED" in spec.text
        audit = static_audit(spec)
        assert audit.verdict == "PASSED", [f.message for f in audit.findings]
        assert not audit.findings, [f.message for f in audit.findings]
    assert _spec("SPEC-001").groups == []
    assert build_plan(_spec("SPEC-001")).mode == "single"
    # SPEC-002 carries an example task table and heading inside a fence, which parsers ignore.
    spec_002 = _spec("SPEC-002")
    assert spec_002.text.count("## Implementation Tasks") == 2
    assert "| G7 |" in spec_002.text and [g.id for g in spec_002.groups] == [
        "G1", "G2", "G3", "G4", "G5", "G6"]


def test_spec_002_has_three_waves_with_parallelism():
    spec = _spec("SPEC-002")
    plan = build_plan(spec)
    assert plan.mode == "orchestrated" and not plan.findings
    assert plan.layers == [["G1", "G2", "G3"], ["G4", "G5"], ["G6"]]
    assert [w.groups for w in plan.waves] == plan.layers  # no file overlap splits a wave
    for n, wave in enumerate(plan.layers, start=1):
        for gid in wave:
            assert spec.group(gid).declared_wave == n, f"{gid}: declared wave differs"
        declared = [f for gid in wave for f in spec.group(gid).files]
        assert len(declared) == len(set(declared)), f"wave {n}: groups declare the same file"


# -- the demo script ----------------------------------------------------------------------------


def _all_lists() -> dict[str, list[dict]]:
    """The workers' lists (the reviewer's answers are checked by the demo's review)."""
    script = _script()
    lists = {f"agents.{k}": v for k, v in (script.get("agents") or {}).items()
             if k != "code-reviewer"}
    lists.update({f"groups.{k}": v for k, v in (script.get("groups") or {}).items()})
    return lists


def test_script_top_level():
    script = _script()
    assert set(script) == {"agents", "groups"}
    assert set(script["agents"]) == {"spec-executor", "code-reviewer"}
    assert set(script["groups"]) == {g.id for g in _spec("SPEC-002").groups}


@pytest.mark.parametrize("key", sorted(_all_lists()))
def test_script_turns_are_well_formed(key):
    turns = _all_lists()[key]
    assert 3 <= len(turns) <= 6
    for i, turn in enumerate(turns):
        where = f"{key}[{i}]"
        assert set(turn) <= {"text", "tool_calls", "usage"}, where
        assert turn["tool_calls"], f"{where}: every turn calls a tool"
        usage = turn["usage"]
        assert set(usage) == USAGE_KEYS, where
        assert 1500 <= usage["input_tokens"] <= 9000, where
        assert 100 <= usage["output_tokens"] <= 900, where
        for call in turn["tool_calls"]:
            assert call["name"] in TOOLS, f"{where}: unknown tool {call['name']}"
            required, known = TOOLS[call["name"]]
            args = call.get("arguments") or {}
            assert required <= set(args) <= known, f"{where}: {call['name']} {args}"
            for name in ("path", "content", "old", "new", "command", "pattern"):
                if name in args:
                    assert isinstance(args[name], str) and args[name], f"{where}: {name}"
        is_last = i == len(turns) - 1
        submits = [c for c in turn["tool_calls"] if c["name"] == "submit_result"]
        assert len(submits) == (1 if is_last else 0), f"{where}: submit_result only at the end"
    assert any(t["usage"]["cache_read_tokens"] > 0 for t in turns)


def test_submitted_results_name_real_criteria():
    criteria = {"agents.spec-executor": _criteria("SPEC-001")}
    criteria.update({f"groups.{g.id}": _criteria("SPEC-002") for g in _spec("SPEC-002").groups})
    claimed_002 = set()
    for key, turns in _all_lists().items():
        args = turns[-1]["tool_calls"][-1]["arguments"]
        assert args["status"] == "complete"
        assert args["deviations"] == []
        assert isinstance(args["summary"], str) and len(args["summary"]) > 40
        assert args["criteria_met"], key
        for text in args["criteria_met"]:
            assert text in criteria[key], f"{key}: {text!r} is not an acceptance criterion"
        if key.startswith("groups."):
            claimed_002.update(args["criteria_met"])
        else:
            assert set(args["criteria_met"]) == set(criteria[key])
    assert claimed_002 == set(_criteria("SPEC-002"))


def test_each_writer_stays_within_its_declared_files():
    script, spec_002 = _script(), _spec("SPEC-002")
    for gid, turns in script["groups"].items():
        assert _written(turns) == set(spec_002.group(gid).files), gid
    assert _written(script["agents"]["spec-executor"]) == _declared_files("SPEC-001")
    assert (set().union(*(_written(t) for t in script["groups"].values()))
            == _declared_files("SPEC-002"))


def test_scripted_provider_replays_the_demo_script():
    provider = ScriptedProvider.from_file(SCRIPT)
    script = _script()
    for agent, group, expected in (("spec-executor", "", script["agents"]["spec-executor"][0]),
                                   ("spec-executor-worker", "G4", script["groups"]["G4"][0])):
        turn = provider.complete(Request(system="", messages=[], agent=agent, group=group))
        assert [c.name for c in turn.tool_calls] == [c["name"] for c in expected["tool_calls"]]
        assert turn.usage.to_dict() == expected["usage"]


# -- replaying the script against the project ---------------------------------------------------


def test_spec_001_then_spec_002(tmp_path):
    base = _copy(EXAMPLE, tmp_path / "base")
    assert _replay(_script()["agents"]["spec-executor"], base, "spec-executor")
    _assert_passes(base, "SPEC-001's result")
    final = _replay_spec_002(base, tmp_path)
    _assert_passes(final, "SPEC-001 followed by SPEC-002")


def test_spec_002_then_spec_001(tmp_path):
    tree = _replay_spec_002(_copy(EXAMPLE, tmp_path / "base"), tmp_path)
    for path in _spec("SPEC-002").files_to_create:
        assert (tree / path).is_file(), path
    _replay(_script()["agents"]["spec-executor"], tree, "spec-executor")
    _assert_passes(tree, "SPEC-002 followed by SPEC-001")
    init = (tree / "textkit" / "__init__.py").read_text(encoding="utf-8")
    imports = [line for line in init.splitlines() if line.startswith("from textkit.")]
    assert imports == sorted(imports)
