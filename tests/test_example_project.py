"""The bundled example project that `agentrun demo` runs: its own tests, its specs, and the
demo script the scripted provider replays.

The key check replays the script's file edits the way a run applies them: the groups of one
wave each start from the same base in their own copy (as in their own worktrees), their changes
are merged, and the next wave starts from the merged result. The project's tests must pass in
every group's copy (the worker's validation) and after the last merge.
"""

from __future__ import annotations

import graphlib
import os
import re
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
from agentrun.spec import load_spec

EXAMPLE = Path(__file__).resolve().parents[1] / ".specflow-example"
SPECS = EXAMPLE / ".specflow" / "specs"
SCRIPT = EXAMPLE / ".specflow" / "demo-script.yaml"

# tool name -> (required argument names, optional argument names)
TOOLS: dict[str, tuple[set[str], set[str]]] = {
    "read_file": ({"path"}, {"offset", "limit"}),
    "write_file": ({"path", "content"}, set()),
    "edit_file": ({"path", "old", "new"}, set()),
    "list_files": (set(), {"path", "pattern"}),
    "search_files": ({"pattern"}, {"path", "glob"}),
    "run_command": ({"command"}, {"timeout_s"}),
    "spawn_subagent": ({"agent", "task"}, {"context", "tools", "max_steps"}),
    "check_token_budget": (set(), set()),
    "submit_result": ({"status", "summary", "criteria_met", "deviations"}, {"error"}),
}
WRITES = {"write_file", "edit_file"}
USAGE_KEYS = {"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"}


# -- reading the specs (fence-aware, independent of agentrun's own parser) ----------------------


def _unfenced_lines(text: str) -> list[str]:
    """The lines of `text` with everything inside ``` / ~~~ fences blanked out."""
    out, fence = [], None
    for line in text.splitlines():
        stripped = line.strip()
        marker = stripped[:3]
        if fence is None and marker in ("```", "~~~"):
            fence = marker
            out.append("")
        elif fence is not None:
            if stripped.startswith(fence) and stripped.strip(fence[0]) == "":
                fence = None
            out.append("")
        else:
            out.append(line)
    return out


def _section(text: str, title: str) -> list[str]:
    """The unfenced lines of the `## title` section."""
    lines = _unfenced_lines(text)
    starts = [i for i, line in enumerate(lines) if line.strip() == f"## {title}"]
    assert len(starts) == 1, f"expected one '## {title}' outside code fences, found {len(starts)}"
    body = []
    for line in lines[starts[0] + 1:]:
        if line.startswith("## "):
            break
        body.append(line)
    return body


def _criteria(spec: str) -> list[str]:
    body = _section((SPECS / spec).read_text(encoding="utf-8"), "Acceptance Criteria")
    return [m.group(1) for line in body if (m := re.match(r"- \[ \] (.+)$", line))]


def _files_under(spec: str, heading: str) -> list[str]:
    body = _section((SPECS / spec).read_text(encoding="utf-8"), "Requirements")
    found, inside = [], False
    for line in body:
        if line.startswith("### "):
            inside = line.strip() == f"### {heading}"
        elif inside:
            found += re.findall(r"`([^`\s]+\.\w+)`", line)
    return found


def _task_groups() -> dict[str, dict]:
    """SPEC-002's `### Task Groups` table: id -> {wave, deps, files}."""
    body = _section((SPECS / "SPEC-002.md").read_text(encoding="utf-8"), "Implementation Tasks")
    groups, inside = {}, False
    for line in body:
        if line.startswith("### "):
            inside = line.strip() == "### Task Groups"
            continue
        if not inside or not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "Group" or set(cells[0]) <= {"-", ":"}:
            continue
        gid, wave, tasks, deps = cells[:4]
        groups[gid] = {
            "wave": int(wave),
            "deps": [] if deps in ("—", "-", "--", "None", "") else
            [d.strip() for d in deps.split(",")],
            "files": re.findall(r"`([^`]+)`", tasks),
        }
    return groups


def _waves(groups: dict[str, dict]) -> list[list[str]]:
    """Topological layers of the dependency graph."""
    sorter = graphlib.TopologicalSorter({g: info["deps"] for g, info in groups.items()})
    sorter.prepare()
    layers = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready())
        layers.append(ready)
        sorter.done(*ready)
    return layers


# -- the script and its replay ------------------------------------------------------------------


def _script() -> dict:
    return yaml.safe_load(SCRIPT.read_text(encoding="utf-8"))


def _calls(turns: list[dict]) -> list[dict]:
    return [call for turn in turns for call in turn.get("tool_calls") or []]


def _written(turns: list[dict]) -> set[str]:
    return {c["arguments"]["path"] for c in _calls(turns) if c["name"] in WRITES}


def _replay(turns: list[dict], root: Path, who: str) -> set[str]:
    """Apply the script's file effects under `root`; return the paths written.

    Reads, listings and searches must name paths that exist at that point; an edit's `old`
    must occur exactly once, as the edit_file tool requires.
    """
    written = set()
    for call in _calls(turns):
        name, args = call["name"], call.get("arguments") or {}
        path = root / args["path"] if "path" in args else root
        if name == "read_file":
            assert path.is_file(), f"{who}: read_file of missing {args['path']}"
        elif name in ("list_files", "search_files"):
            assert path.is_dir(), f"{who}: {name} of missing directory {args.get('path')}"
        elif name == "write_file":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(args["content"], encoding="utf-8")
            written.add(args["path"])
        elif name == "edit_file":
            assert path.is_file(), f"{who}: edit_file of missing {args['path']}"
            text = path.read_text(encoding="utf-8")
            count = text.count(args["old"])
            assert count == 1, f"{who}: edit_file old {args['old']!r} matches {count} times"
            path.write_text(text.replace(args["old"], args["new"]), encoding="utf-8")
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


def _replay_spec_002(base: Path, work: Path, *, validate: bool) -> Path:
    """Run SPEC-002's groups wave by wave, each from the wave's base; return the merged tree."""
    groups, script = _task_groups(), _script()["groups"]
    for n, wave in enumerate(_waves(groups), start=1):
        merged = _copy(base, work / f"wave{n}-merged")
        owners: dict[str, str] = {}
        for gid in wave:
            tree = _copy(base, work / f"wave{n}-{gid}")
            for path in sorted(_replay(script[gid], tree, gid)):
                assert path not in owners, f"{gid} and {owners[path]} both change {path}"
                owners[path] = gid
                target = merged / path
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(tree / path, target)
            if validate:
                _assert_passes(tree, f"{gid}'s worktree (wave {n})")
        base = merged
    return base


@pytest.fixture(scope="module")
def spec_002_result(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("demo")
    base = _copy(EXAMPLE, work / "base")
    return _replay_spec_002(base, work, validate=True)


# -- the example project ------------------------------------------------------------------------


def test_example_test_suite_passes(tmp_path):
    _assert_passes(_copy(EXAMPLE, tmp_path / "example"), "the example project")


def test_example_has_specflow_files():
    flow = EXAMPLE / ".specflow"
    state = (flow / "STATE.md").read_text(encoding="utf-8")
    for heading in ("Current Position", "Execution Status", "Queue", "Decisions", "Warnings"):
        assert _section(state, heading) is not None
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
    for spec, complexity in (("SPEC-001.md", "small"), ("SPEC-002.md", "large")):
        text = (SPECS / spec).read_text(encoding="utf-8")
        front = yaml.safe_load(text.split("---\n")[1])
        assert front["id"] == spec[:-3]
        assert front["status"] == "audited"
        assert front["complexity"] == complexity
        assert _criteria(spec)
        assert "### Audit v1 (" in text and "**Status:** APPROVED" in text
    spec_001 = (SPECS / "SPEC-001.md").read_text(encoding="utf-8")
    assert "## Implementation Tasks" not in spec_001
    # SPEC-002 carries an example task table and heading inside a fence, which parsers ignore.
    spec_002 = (SPECS / "SPEC-002.md").read_text(encoding="utf-8")
    assert spec_002.count("## Implementation Tasks") == 2
    assert "| G7 |" in spec_002 and "G7" not in _task_groups()


def test_spec_002_has_three_waves_with_parallelism():
    groups = _task_groups()
    waves = _waves(groups)
    assert len(waves) == 3
    assert len(waves[0]) >= 2 and any(len(w) >= 2 for w in waves[1:])
    for n, wave in enumerate(waves, start=1):
        for gid in wave:
            assert groups[gid]["wave"] == n, f"{gid}: declared wave differs from computed"
        declared = [f for gid in wave for f in groups[gid]["files"]]
        assert len(declared) == len(set(declared)), f"wave {n}: groups declare the same file"


def test_agentrun_reads_the_specs_as_intended():
    """The real parser, planner and static audit agree with the table read above."""
    spec_002 = load_spec(SPECS / "SPEC-002.md")
    plan = build_plan(spec_002)
    assert plan.mode == "orchestrated"
    assert plan.layers == _waves(_task_groups())
    assert [w.groups for w in plan.waves] == plan.layers  # no file overlap splits a wave
    assert {g.id: sorted(g.files) for g in spec_002.groups} == {
        gid: sorted(info["files"]) for gid, info in _task_groups().items()}
    assert build_plan(load_spec(SPECS / "SPEC-001.md")).mode == "single"
    for name in ("SPEC-001.md", "SPEC-002.md"):
        audit = static_audit(load_spec(SPECS / name))
        assert audit.verdict == "PASSED", [f.message for f in audit.findings]
        assert not audit.findings, [f.message for f in audit.findings]


# -- the demo script ----------------------------------------------------------------------------


def _all_lists() -> dict[str, list[dict]]:
    script = _script()
    lists = {f"agents.{k}": v for k, v in (script.get("agents") or {}).items()}
    lists.update({f"groups.{k}": v for k, v in (script.get("groups") or {}).items()})
    return lists


def test_script_top_level():
    script = _script()
    assert set(script) == {"agents", "groups"}
    assert set(script["agents"]) == {"spec-executor"}
    assert set(script["groups"]) == set(_task_groups())


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
            required, optional = TOOLS[call["name"]]
            args = call.get("arguments") or {}
            assert required <= set(args) <= required | optional, f"{where}: {call['name']} {args}"
            for name in ("path", "content", "old", "new", "command", "pattern"):
                if name in args:
                    assert isinstance(args[name], str) and args[name], f"{where}: {name}"
        is_last = i == len(turns) - 1
        submits = [c for c in turn["tool_calls"] if c["name"] == "submit_result"]
        assert len(submits) == (1 if is_last else 0), f"{where}: submit_result only at the end"
    assert any(t["usage"]["cache_read_tokens"] > 0 for t in turns)


def test_submitted_results_name_real_criteria():
    criteria = {"agents.spec-executor": _criteria("SPEC-001.md")}
    criteria.update({f"groups.{g}": _criteria("SPEC-002.md") for g in _task_groups()})
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
    assert claimed_002 == set(_criteria("SPEC-002.md"))


def test_each_writer_stays_within_its_declared_files():
    script, groups = _script(), _task_groups()
    for gid, turns in script["groups"].items():
        assert _written(turns) == set(groups[gid]["files"]), gid
    spec_001_files = set(_files_under("SPEC-001.md", "Files to Create")
                         + _files_under("SPEC-001.md", "Files to Modify"))
    assert _written(script["agents"]["spec-executor"]) == spec_001_files
    spec_002_files = set(_files_under("SPEC-002.md", "Files to Create")
                         + _files_under("SPEC-002.md", "Files to Modify"))
    assert set().union(*(_written(t) for t in script["groups"].values())) == spec_002_files


def test_scripted_provider_replays_the_demo_script():
    provider = ScriptedProvider.from_file(SCRIPT)
    script = _script()
    for agent, group, expected in (("spec-executor", "", script["agents"]["spec-executor"][0]),
                                   ("spec-executor-worker", "G4", script["groups"]["G4"][0])):
        turn = provider.complete(Request(system="", messages=[], agent=agent, group=group))
        assert [c.name for c in turn.tool_calls] == [c["name"] for c in expected["tool_calls"]]
        assert turn.usage.to_dict() == expected["usage"]


# -- replaying the script against the project ---------------------------------------------------


def test_replaying_spec_002_wave_by_wave_passes(spec_002_result):
    _assert_passes(spec_002_result, "the merged result of SPEC-002")
    for path in _files_under("SPEC-002.md", "Files to Create"):
        assert (spec_002_result / path).is_file(), path


def test_spec_001_then_spec_002(tmp_path):
    base = _copy(EXAMPLE, tmp_path / "base")
    assert _replay(_script()["agents"]["spec-executor"], base, "spec-executor")
    _assert_passes(base, "SPEC-001's result")
    final = _replay_spec_002(base, tmp_path, validate=False)
    _assert_passes(final, "SPEC-001 followed by SPEC-002")


def test_spec_002_then_spec_001(spec_002_result, tmp_path):
    tree = _copy(spec_002_result, tmp_path / "after-002")
    _replay(_script()["agents"]["spec-executor"], tree, "spec-executor")
    _assert_passes(tree, "SPEC-002 followed by SPEC-001")
    init = (tree / "textkit" / "__init__.py").read_text(encoding="utf-8")
    imports = [line for line in init.splitlines() if line.startswith("from textkit.")]
    assert imports == sorted(imports)
