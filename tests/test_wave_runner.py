"""One wave runner (`Orchestrator.waves`) drives both backends: a local run steps every wave
with its own workers, a CI aggregate steps the wave its jobs ran (`CIResultsBackend`) and
pauses or finishes the run. In process, real git: the orchestrator built directly, the CI
jobs' branches and result files made with git here."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest
from gitutil import run_git
from runkit import make_project, spec_text, writes

from agentrun.core.errors import NoSpace
from agentrun.core.status import RunStatus, Status
from agentrun.plan import build_plan
from agentrun.project import Project
from agentrun.protocol import ProviderSettings, WorkerLimits
from agentrun.run import ci
from agentrun.run.backends import InProcessBackend
from agentrun.run.ci_backend import CIResultsBackend
from agentrun.run.integration import Integration
from agentrun.run.options import RunOptions
from agentrun.run.orchestrator import Orchestrator
from agentrun.run.waves import Waves
from agentrun.spec.parse import load_spec

GROUPS = [("G1", [], "one.txt"), ("G2", [], "two.txt"), ("G3", ["G1"], "three.txt")]
SCRIPT = {"groups": {gid: writes(path, f"{gid}\n") for gid, _, path in GROUPS}}


@pytest.fixture
def steps(monkeypatch) -> list[tuple[str, str]]:
    """Every `Waves.step`, as (backend class, wave label)."""
    seen: list[tuple[str, str]] = []
    real = Waves.step

    def spy(self: Waves) -> object:
        wave = real(self)
        seen.append((type(self._orch.backend).__name__, wave.label))
        return wave

    monkeypatch.setattr(Waves, "step", spy)
    return seen


def project(tmp_path: Path, name: str) -> tuple[Project, object, object]:
    root = make_project(tmp_path / name, "SPEC-W", spec_text("SPEC-W", GROUPS), SCRIPT)
    spec = load_spec(root / ".specflow/specs/SPEC-W.md")
    return Project(root), spec, build_plan(spec, mode="orchestrated")


def local_run(tmp_path: Path) -> Orchestrator:
    proj, spec, plan = project(tmp_path, "local")
    provider = ProviderSettings(provider="scripted", model="scripted",
                                script=str(proj.root / ".specflow/script.yaml"))
    return Orchestrator(proj, spec, plan, RunOptions(
        provider=provider, use_processes=False, limits=WorkerLimits(max_retries=0)))


def ci_job(root: Path, base: str, gid: str, path: str, results: Path) -> Path:
    """What one CI worker job leaves: its branch (a commit on `base`) and its result file."""
    branch = f"agentrun/SPEC-W/{gid}"
    run_git(root, "branch", branch, base)
    run_git(root, "switch", "-q", branch)
    (root / path).write_text(f"{gid}\n")
    run_git(root, "add", path)
    run_git(root, "commit", "-q", "-m", f"SPEC-W {gid}: create {path}")
    commit = run_git(root, "rev-parse", "HEAD")
    run_git(root, "switch", "-q", "-")
    results.mkdir(exist_ok=True)
    out = results / f"{gid}.json"
    out.write_text(json.dumps({
        "group": gid, "groups": [gid], "batch": gid, "status": "complete", "branch": branch,
        "commits": [commit], "files_created": [path], "summary": f"created {path}",
        "spec": "SPEC-W", "base_commit": base, "provider": "scripted", "model": "scripted"}))
    return out


def aggregate(proj: Project, spec, plan, paths: list[Path]) -> ci.Aggregation:
    options = RunOptions(provider=ProviderSettings(provider="", model=""))
    return ci.aggregate(proj, spec, plan, paths, options)


def test_local_runs_and_ci_aggregates_step_the_same_wave_runner(tmp_path, steps):
    state = local_run(tmp_path).run()
    assert state.status == RunStatus.COMPLETE
    assert steps == [("InProcessBackend", "1"), ("InProcessBackend", "2")]

    steps.clear()
    proj, spec, plan = project(tmp_path, "ci")
    root, base = proj.root, run_git(proj.root, "rev-parse", "HEAD")
    wave1 = [ci_job(root, base, gid, path, tmp_path / "r1") for gid, _, path in GROUPS[:2]]
    first = aggregate(proj, spec, plan, wave1)
    assert first.state.status == RunStatus.RUNNING and first.next_wave.label == "2"
    assert run_git(root, "log", "-1", "--format=%s").startswith("SPEC-W: wave 1 aggregated")
    head = run_git(root, "rev-parse", "HEAD")
    wave2 = [ci_job(root, head, "G3", "three.txt", tmp_path / "r2")]
    last = aggregate(proj, spec, plan, wave2)
    assert last.state.status == RunStatus.COMPLETE and last.finished
    assert last.state.run_id == first.state.run_id
    assert [(root / p).read_text() for _, _, p in GROUPS] == ["G1\n", "G2\n", "G3\n"]
    assert steps == [("CIResultsBackend", "1"), ("CIResultsBackend", "2")]


def test_a_full_disk_stops_a_ci_aggregate_as_it_stops_a_local_run(tmp_path, monkeypatch):
    """The integration check after a wave meets a full disk: NoSpace (exit 2), and the
    checkpoint says interrupted — the same in both backends."""

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", "integration/log.txt")

    monkeypatch.setattr(Integration, "after_wave", full)
    orch = local_run(tmp_path)
    with pytest.raises(NoSpace, match="integration/log.txt"):
        orch.run()
    assert isinstance(orch.backend, InProcessBackend)
    assert json.loads(orch.state_file.read_text())["status"] == "interrupted"

    proj, spec, plan = project(tmp_path, "ci")
    base = run_git(proj.root, "rev-parse", "HEAD")
    paths = [ci_job(proj.root, base, gid, path, tmp_path / "r1") for gid, _, path in GROUPS[:2]]
    seen: list[object] = []
    real = Orchestrator.waves

    def spy(self: Orchestrator, *args, **kwargs):
        seen.append(self.backend)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Orchestrator, "waves", spy)
    with pytest.raises(NoSpace, match="integration/log.txt"):
        aggregate(proj, spec, plan, paths)
    assert [type(b) for b in seen] == [CIResultsBackend]
    state = json.loads((proj.execution_dir / "SPEC-W-state.json").read_text())
    assert state["status"] == "interrupted"
    assert {state["groups"][g]["status"] for g in ("G1", "G2")} <= {
        Status.COMPLETE, Status.INTERRUPTED}
    assert "free disk space" in (proj.root / ".specflow/STATE.md").read_text()
