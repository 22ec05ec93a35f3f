"""The orchestrator built directly: a real git repository, in-process workers, the scripted
model; no subprocess."""

from __future__ import annotations

import json

from gitutil import run_git, status
from runkit import make_project, spec_text, submit, writes

from agentrun.core.events import BaseEvent
from agentrun.core.status import RunStatus, Status
from agentrun.plan import build_plan
from agentrun.project import Project
from agentrun.protocol import ProviderSettings, WorkerLimits
from agentrun.run.backends import InProcessBackend
from agentrun.run.options import RunOptions
from agentrun.run.orchestrator import Orchestrator
from agentrun.spec.parse import load_spec

GROUPS = [("G1", [], "a.txt"), ("G2", [], "b.txt"), ("G3", ["G2"], "c.txt")]


def orchestrator(tmp_path, script, **options):
    root = make_project(tmp_path / "p", "SPEC-O", spec_text("SPEC-O", GROUPS), script)
    project = Project(root)
    spec = load_spec(root / ".specflow/specs/SPEC-O.md")
    provider = ProviderSettings(provider="scripted", model="scripted",
                                script=str(root / ".specflow/script.yaml"))
    events: list[BaseEvent] = []
    orch = Orchestrator(project, spec, build_plan(spec, mode="orchestrated"),
                        RunOptions(provider=provider, use_processes=False,
                                   limits=WorkerLimits(retries=0), **options),
                        on_event=events.append)
    return orch, events


def test_a_failed_group_blocks_its_dependent_and_keeps_its_worktree(tmp_path):
    asked = []
    orch, events = orchestrator(tmp_path, {"groups": {
        "G1": writes("a.txt", "one\n"),
        "G2": [submit("failed", "could not", error="no way")],
        "G3": writes("c.txt", "three\n")}},
        ask_continue=lambda failed: asked.append(failed) or True)
    assert isinstance(orch.backend, InProcessBackend)
    base = run_git(orch.root, "rev-parse", "HEAD")
    state = orch.run()
    assert state.status == RunStatus.PARTIAL
    groups = state.groups
    assert [groups[g].status for g in ("G1", "G2", "G3")] == \
        [Status.COMPLETE, Status.FAILED, Status.BLOCKED]
    assert groups["G3"].error == "dependency G2 did not complete"
    assert asked == [["G2"]]
    # G1 merged and its worktree gone; G2's kept for a human
    assert (orch.root / "a.txt").read_text() == "one\n"
    assert run_git(orch.root, "log", "--merges", "--format=%s", f"{base}..HEAD") \
        .splitlines() == ["Merge SPEC-O G1: Create `a.txt`"]
    assert groups["G1"].worktree is None
    assert groups["G2"].worktree and (orch.run_dir / "worktrees" / "G2").is_dir()
    # the reports are committed; the tree is clean but for the run record
    assert status(orch.root) == ""
    saved = json.loads(orch.state_file.read_text())
    assert saved["status"] == "partial"
    assert "Failed (Wave 1)" in (orch.root / ".specflow/STATE.md").read_text()
    types = [e.type for e in events]
    assert types[0] == "run_start" and types[-1] == "run_done"
    assert "blocked" in types and "kept_worktree" in types
    recorded = (orch.run_dir / "events.ndjson").read_text().splitlines()
    assert json.loads(recorded[-1])["type"] == "run_done"


def test_declining_to_continue_aborts_the_later_waves(tmp_path):
    orch, _ = orchestrator(tmp_path, {"groups": {
        "G1": [submit("failed", "could not", error="no way")],
        "G2": writes("b.txt", "two\n"),
        "G3": writes("c.txt", "three\n")}},
        ask_continue=lambda failed: False)
    state = orch.run()
    assert state.status == RunStatus.ABORTED
    assert state.waves[1].status == "skipped"
    assert state.groups["G3"].status == Status.BLOCKED
    assert state.groups["G3"].error == "the run was aborted after an earlier wave failed"
    assert (orch.root / "b.txt").read_text() == "two\n"
    assert not (orch.root / "c.txt").exists()
