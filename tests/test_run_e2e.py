"""`agentrun run` end to end: real git repositories, worker processes, the scripted model."""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

import pytest
from clirun import agentrun, finish, start
from gitutil import run_git
from runkit import command, make_project, scripted, spec_text, submit, writes

FIVE = [("G1", [], "src/a.py"), ("G2", [], "src/b.py"), ("G3", ["G1", "G2"], "src/c.py"),
        ("G4", ["G1"], "src/d.py"), ("G5", ["G3", "G4"], "src/e.py")]


def five_group_script(**overrides) -> dict:
    groups = {gid: writes(path, f"# {gid}\nVALUE = {i}\n") for i, (gid, _, path)
              in enumerate(FIVE, 1)}
    groups.update(overrides)
    return {"groups": groups}


def test_dry_run_changes_nothing_then_five_groups_run_in_three_waves(tmp_path):
    root = make_project(tmp_path / "p", "SPEC-10", spec_text("SPEC-10", FIVE),
                        five_group_script())
    base = run_git(root, "rev-parse", "HEAD")
    # first a dry run: nothing changes
    dry = agentrun("run", "SPEC-10", *scripted("--dry-run"), cwd=root)
    assert dry.returncode == 0
    assert dry.json["dry_run"] is True
    assert run_git(root, "rev-parse", "HEAD") == base
    assert run_git(root, "status", "--porcelain") == ""
    proc = agentrun("run", "SPEC-10", *scripted(), cwd=root)
    assert proc.returncode == 0, proc.stderr
    result = proc.json
    assert result["status"] == "complete" and result["mode"] == "orchestrated"
    assert [w["groups"] for w in result["waves"]] == [["G1", "G2"], ["G3", "G4"], ["G5"]]
    # every group's commit is on main, every file is there
    for gid, _, path in FIVE:
        assert (root / path).read_text().startswith(f"# {gid}")
        group = result["groups"][gid]
        assert group["status"] == "complete" and len(group["commits"]) == 1
        run_git(root, "merge-base", "--is-ancestor", group["commits"][0], "HEAD")
        assert group["files_created"] == [path]
    merges = run_git(root, "log", "--merges", "--format=%s", f"{base}..HEAD").splitlines()
    assert len(merges) == 5
    # the spec got its summary and status, everything else byte-for-byte the same
    spec = (root / ".specflow/specs/SPEC-10.md").read_text()
    original = spec_text("SPEC-10", FIVE)
    assert spec.startswith(original.split("---", 2)[0])
    assert "status: review" in spec
    assert spec.replace("status: review", "status: audited").startswith(original)
    assert "## Execution Summary" in spec and "- [x] every file exists" in spec
    state = (root / ".specflow/STATE.md").read_text()
    assert "| SPEC-10 |" in state and "Complete" in state
    assert "| 2026-01-01 | SPEC-10 | keep this row |" in state
    execution = json.loads((root / ".specflow/execution/SPEC-10-state.json").read_text())
    assert execution["status"] == "complete"
    # the run record
    run_dir = Path(result["run_dir"])
    events = [json.loads(x) for x in (run_dir / "events.ndjson").read_text().splitlines()]
    assert events[0]["type"] == "run_start" and events[-1]["type"] == "run_done"
    assert (run_dir / "result.json").is_file()
    assert sorted(p.name for p in (run_dir / "workers").iterdir()) == ["G1", "G2", "G3", "G4",
                                                                        "G5"]
    assert (run_dir / "workers/G1/transcript.jsonl").stat().st_size > 0
    # worktrees of successful workers are gone, the tree is clean
    assert run_git(root, "worktree", "list").count("\n") == 0
    assert run_git(root, "status", "--porcelain") == ""
    # `agentrun status` shows the active spec and this run
    status = agentrun("status", "--json", cwd=root)
    assert status.returncode == 0, status.stderr
    last = status.json
    assert last["active_spec"] == "SPEC-10" and last["last_run"]["run_id"] == result["run_id"]
    human = agentrun("status", cwd=root)
    assert "SPEC-10" in human.stdout and "complete" in human.stdout


def test_failed_group_blocks_dependents_and_siblings_finish(tmp_path):
    script = five_group_script(G1=[submit("failed", "could not", error="compile error")])
    root = make_project(tmp_path / "p", "SPEC-11", spec_text("SPEC-11", FIVE), script)
    proc = agentrun("run", "SPEC-11", *scripted("--max-retries", "0"), cwd=root)
    assert proc.returncode == 1, proc.stderr
    groups = proc.json["groups"]
    assert groups["G1"]["status"] == "failed" and "compile error" in groups["G1"]["error"]
    assert groups["G2"]["status"] == "complete"
    assert {groups[g]["status"] for g in ("G3", "G4", "G5")} == {"blocked"}
    assert (root / "src/b.py").exists() and not (root / "src/c.py").exists()
    # the failed worker's worktree is kept and named; the spec keeps its status
    assert groups["G1"]["worktree"] and Path(groups["G1"]["worktree"]).is_dir()
    spec = (root / ".specflow/specs/SPEC-11.md").read_text()
    assert "status: audited" in spec and "⛔ blocked" in spec
    state = (root / ".specflow/STATE.md").read_text()
    assert "Failed (Wave 1)" in state and "G1 failed" in state


def test_all_groups_of_a_wave_failed_aborts(tmp_path):
    script = five_group_script(G1=[submit("failed", "no", error="x")],
                               G2=[submit("failed", "no", error="y")])
    root = make_project(tmp_path / "p", "SPEC-12", spec_text("SPEC-12", FIVE), script)
    proc = agentrun("run", "SPEC-12", *scripted("--max-retries", "0"), cwd=root)
    assert proc.returncode == 1
    result = proc.json
    assert result["status"] == "aborted"
    assert [w["status"] for w in result["waves"]] == ["done", "skipped", "skipped"]
    assert any("run aborted" in w for w in result["warnings"])


def test_on_failure_abort_stops_after_the_wave(tmp_path):
    script = five_group_script(G2=[submit("failed", "no", error="y")])
    root = make_project(tmp_path / "p", "SPEC-13", spec_text("SPEC-13", FIVE), script)
    proc = agentrun("run", "SPEC-13", *scripted("--on-failure", "abort",
                                                      "--max-retries", "0"), cwd=root)
    assert proc.returncode == 1
    result = proc.json
    assert result["groups"]["G1"]["status"] == "complete"
    assert result["groups"]["G4"]["status"] == "blocked"  # only needs G1, but the run aborted


def test_branches_land_in_group_order_as_soon_as_they_can(tmp_path):
    three = [("G1", [], "one.txt"), ("G2", [], "two.txt"), ("G3", [], "three.txt")]
    script = {"groups": {"G1": writes("one.txt", "1\n"),
                         "G2": writes("two.txt", "2\n", latency=2.0),
                         "G3": writes("three.txt", "3\n")}}
    root = make_project(tmp_path / "p", "SPEC-19", spec_text("SPEC-19", three), script)
    base = run_git(root, "rev-parse", "HEAD")
    proc = agentrun("run", "SPEC-19", *scripted(), cwd=root)
    assert proc.returncode == 0, proc.stderr
    merges = run_git(root, "log", "--first-parent", "--merges", "--reverse", "--format=%s",
                     f"{base}..HEAD").splitlines()
    assert [m.split()[2].rstrip(":") for m in merges] == ["G1", "G2", "G3"]
    events = [json.loads(x) for x in
              (Path(proc.json["run_dir"]) / "events.ndjson").read_text().splitlines()]
    seen = [(e["type"], e["batch"]) for e in events if e["type"] in ("worker_result", "merged")]
    # G1 lands while G2 still works; G3, done early, waits for G2 to land first
    assert seen.index(("merged", "G1")) < seen.index(("worker_result", "G2"))
    assert seen.index(("worker_result", "G3")) < seen.index(("worker_result", "G2"))
    assert seen.index(("merged", "G2")) < seen.index(("merged", "G3"))
    assert run_git(root, "worktree", "list").count("\n") == 0


TWO = [("G1", [], "one.txt"), ("G2", [], "two.txt")]


def _dead(pid: int, timeout: float = 5) -> bool:
    """Whether process `pid` is gone (or a zombie) within `timeout` seconds."""
    stat = Path(f"/proc/{pid}/stat")
    deadline = time.monotonic() + timeout
    while stat.exists() and time.monotonic() < deadline:
        try:
            if stat.read_text().split()[2] == "Z":
                return True
        except OSError:
            pass
        time.sleep(0.1)
    return not stat.exists()


def test_workers_that_die_time_out_or_forge_progress_fail_alone(tmp_path, bystander):
    """One unconfined run (a sandboxed command can neither kill its worker, write its result
    file nor forge its progress; test_sandbox_e2e has the sandboxed timeout), one group per
    case: G1 does its work and lands; G2's worker is killed (kill -9); G3 writes garbage as its
    result file and is killed; G4's model call outlasts the worker timeout; G5's command
    outlasts it (the sleep it started must die with it); G6 names a bystander's process group
    in its progress file as if it had spawned it, then outlasts the timeout: only the commands
    it really started are killed."""
    garbage = ("python3 -c \"import glob; open(glob.glob('../../../../../.git/agentrun/runs/*/"
               "workers/G3')[0] + '/result.json', 'w').write('not json')\"; "
               "kill -9 $PPID")
    sleeper = "sleep 300 & echo $! > sleeper.pid; wait"
    line = json.dumps({"type": "spawn", "pgid": bystander.pid})
    # into the run record's progress file and the one the orchestrator reads (in the git
    # common dir, which only an unconfined command can write)
    forge = ("python3 -c 'import sys; [open(f, \"a\").write(sys.argv[1] + chr(10)) "
             f"for f in sys.argv[2:]]' '{line}' ../../workers/G6/progress.ndjson "
             "$(git rev-parse --git-common-dir)/agentrun/runs/*/workers/G6/progress.ndjson; "
             f"{sleeper}")
    six = [(f"G{i}", [], f"{i}.txt") for i in range(1, 7)]
    script = {"groups": {"G1": writes("1.txt", "1\n"),
                         "G2": [command("kill -9 $PPID"), submit("complete", "never")],
                         "G3": [command(garbage), submit("complete", "never")],
                         "G4": writes("4.txt", "4\n", latency=60),
                         "G5": [command(sleeper), submit("complete", "never")],
                         "G6": [command(forge), submit("complete", "never")]}}
    root = make_project(tmp_path / "p", "SPEC-14", spec_text("SPEC-14", six), script)
    started = time.monotonic()
    proc = agentrun("run", "SPEC-14", *scripted("--worker-timeout", "5", "--sandbox", "off"),
                    cwd=root)
    assert time.monotonic() - started < 40
    assert proc.returncode == 1, proc.stderr
    groups = proc.json["groups"]
    assert groups["G1"]["status"] == "complete"
    assert groups["G2"]["status"] == "failed"
    assert "killed by signal 9" in groups["G2"]["error"]
    assert "no valid result" in groups["G2"]["error"]
    assert groups["G3"]["status"] == "failed" and "not valid JSON" in groups["G3"]["error"]
    for gid in ("G4", "G5", "G6"):
        assert groups[gid]["status"] == "failed" and groups[gid]["stop_reason"] == "timeout"
        # the worker's own deadline or the orchestrator's hard one, whichever fires first
        assert re.search(r"(timeout of|limit) 5s", groups[gid]["error"]), groups[gid]["error"]
    run_dir = Path(proc.json["run_dir"])
    assert str(bystander.pid) in (run_dir / "workers/G6/progress.ndjson").read_text()
    control = next((root / ".git/agentrun/runs").glob("*/workers/G6/progress.ndjson"))
    assert str(bystander.pid) in control.read_text()
    time.sleep(0.5)
    assert bystander.poll() is None, "the bystander's process group was killed"
    for gid in ("G5", "G6"):
        pid = int((Path(groups[gid]["worktree"]) / "sleeper.pid").read_text())
        assert _dead(pid), f"{gid}'s sleep survived"


def test_merge_conflict_is_reported_and_main_stays_clean(tmp_path):
    # both groups edit line 2 of shared.txt without naming it, so they run in one wave
    spec = spec_text("SPEC-17", [("G1", [], "x"), ("G2", [], "y")]).replace("`x`", "x") \
        .replace("`y`", "y")
    edit = [{"tool_calls": [{"name": "edit_file", "arguments": {
        "path": "shared.txt", "old": "line 2", "new": "line 2 by {g}"}}]}]
    script = {"groups": {g: [{"tool_calls": [{"name": "edit_file", "arguments": {
        "path": "shared.txt", "old": "line 2", "new": f"line 2 by {g}"}}]},
        submit("complete", f"{g} edited")] for g in ("G1", "G2")}}
    assert edit  # the same edit shape, different text per group
    root = make_project(tmp_path / "p", "SPEC-17", spec, script,
                        files={"shared.txt": "line 1\nline 2\nline 3\n"})
    proc = agentrun("run", "SPEC-17", *scripted(), cwd=root)
    assert proc.returncode == 1, proc.stderr
    groups = proc.json["groups"]
    assert groups["G1"]["status"] == "complete"
    assert groups["G2"]["status"] == "failed"
    assert "merge conflict in shared.txt" in groups["G2"]["error"]
    assert (root / "shared.txt").read_text() == "line 1\nline 2 by G1\nline 3\n"
    assert run_git(root, "status", "--porcelain") == ""
    assert Path(groups["G2"]["worktree"]).is_dir()  # kept for inspection


def test_not_a_git_repo_and_no_model_are_refused(tmp_path):
    plain = tmp_path / "plain"
    (plain / ".specflow/specs").mkdir(parents=True)
    (plain / ".specflow/specs/SPEC-1.md").write_text(spec_text("SPEC-1", []))
    (plain / "s.yaml").write_text("[]")
    proc = agentrun("run", "SPEC-1", "--provider", "scripted", "--script", "s.yaml",
                    "--yes", cwd=plain)
    assert proc.returncode == 3 and "not a git repository" in proc.stderr
    root = make_project(tmp_path / "p", "SPEC-19", spec_text("SPEC-19", TWO), {"groups": {}})
    proc = agentrun("run", "SPEC-19", "--yes", cwd=root)
    assert proc.returncode == 3
    assert "ANTHROPIC_API_KEY" in proc.stderr and "scripted" in proc.stderr


def test_single_mode_spec_without_groups(tmp_path):
    script = {"agents": {"spec-executor": writes("hello.py", "print('hi')\n")}}
    root = make_project(tmp_path / "p", "SPEC-20", spec_text("SPEC-20", []), script)
    proc = agentrun("run", "SPEC-20", *scripted(), cwd=root)
    assert proc.returncode == 0, proc.stderr
    result = proc.json
    assert result["mode"] == "single"
    assert (root / "hello.py").read_text() == "print('hi')\n"
    assert "status: review" in (root / ".specflow/specs/SPEC-20.md").read_text()


def test_dirty_tree_refused_unless_allowed_and_unaudited_spec_warns_or_refuses(tmp_path):
    root = make_project(tmp_path / "p", "SPEC-21", spec_text("SPEC-21", TWO, status="draft"),
                        {"groups": {"G1": writes("one.txt", "1"), "G2": writes("two.txt", "2")}})
    (root / "README.md").write_text("local edit\n")
    dirty = agentrun("run", "SPEC-21", *scripted(), cwd=root)
    assert dirty.returncode == 3
    assert "uncommitted changes: README.md" in dirty.stderr and "--allow-dirty" in dirty.stderr
    refused = agentrun("run", "SPEC-21", *scripted("--allow-dirty", "--require-audit"), cwd=root)
    assert refused.returncode == 1 and "not audited" in refused.stderr
    proc = agentrun("run", "SPEC-21", *scripted("--allow-dirty"), cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert "not audited" in proc.stderr
    assert "not audited" in (root / ".specflow/STATE.md").read_text()
    assert (root / "README.md").read_text() == "local edit\n"


def _wait_for(predicate, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("condition not reached in time")


def _merged(root: Path, group: str) -> bool:
    return f" {group}" in run_git(root, "log", "--merges", "--format=%s")


def _branches(root: Path) -> list[str]:
    return run_git(root, "for-each-ref", "--format=%(refname:short)", "refs/heads").split()


def test_a_run_in_progress_refuses_a_second_run_and_clean_then_stops_and_resumes(tmp_path):
    """While a run works (wave 2's workers in a slow model call): a second run is refused,
    `agentrun clean` refuses to remove anything and lists the running run's worktrees as
    skipped. Then SIGTERM stops the run (exit 130, state saved) and `--resume` finishes it
    without running the finished groups again. (SIGINT: test_run_integration_e2e.)"""
    slow = five_group_script(G3=writes("src/c.py", "# G3\n", latency=30),
                             G4=writes("src/d.py", "# G4\n", latency=30))
    root = make_project(tmp_path / "p", "SPEC-23", spec_text("SPEC-23", FIVE), slow)
    proc = start("run", "SPEC-23", *scripted(), cwd=root)
    try:
        _wait_for(lambda: _merged(root, "G2") and (
            root / ".specflow/execution/SPEC-23-state.json").exists())
        # wave 2's workers have started (their model call is slow)
        _wait_for(lambda: all(any(g in b for b in _branches(root)) for g in ("G3", "G4")))
        second = agentrun("run", "SPEC-23", *scripted("--allow-dirty"), cwd=root)
        assert second.returncode == 3
        assert "another agentrun run is in progress" in second.stderr
        refused = agentrun("clean", "--force", cwd=root)
        assert refused.returncode == 3 and "in progress" in refused.stderr
        listed = agentrun("clean", "--force", "--dry-run", "--json", cwd=root)
        assert listed.returncode == 0, listed.stderr
        assert {i["action"] for i in listed.json["items"]} == {"skipped"}
        assert any("G3" in b for b in _branches(root))
    finally:
        proc.send_signal(signal.SIGTERM)
        stopped = finish(proc, timeout=60)
    assert stopped.returncode == 130, stopped.stderr
    state = json.loads((root / ".specflow/execution/SPEC-23-state.json").read_text())
    assert state["status"] == "interrupted"
    assert state["groups"]["G1"]["status"] == "complete"
    assert state["groups"]["G3"]["status"] == "interrupted"
    # resume with a fast script: G1 and G2 are not run again
    (root / ".specflow/script.yaml").write_text(json.dumps(five_group_script()))
    resumed = agentrun("run", "SPEC-23", *scripted("--resume", "--allow-dirty"), cwd=root)
    assert resumed.returncode == 0, resumed.stderr
    result = resumed.json
    assert result["status"] == "complete" and result["resumed_from"] == state["run_id"]
    run_dir = Path(result["run_dir"])
    assert sorted(p.name for p in (run_dir / "workers").iterdir()) == ["G3", "G4", "G5"]
    for _, _, path in FIVE:
        assert (root / path).exists()
    # the stopped workers' worktrees stay as they were (unfinished edits), and the run says so
    kept = [w for w in result["warnings"] if "before this run ran it again" in w]
    assert len(kept) == 2 and all(state["run_id"] in w for w in kept), result["warnings"]
    assert all("`agentrun clean --force`" in w for w in kept)
    stale = [w.split()[1] for w in kept]
    assert all(Path(p).is_dir() for p in stale)
    cleaned = agentrun("clean", "--force", cwd=root)
    assert cleaned.returncode == 0, cleaned.stderr
    assert not any(Path(p).exists() for p in stale)


@pytest.mark.parametrize("args, words", [(("--on-failure", "maybe"), "--on-failure"),
                                         (("--mode", "x"), "--mode")])
def test_bad_flags_exit_2(tmp_path, args, words):
    root = make_project(tmp_path / "p", "SPEC-25", spec_text("SPEC-25", TWO), {"groups": {}})
    proc = agentrun("run", "SPEC-25", *scripted(*args), cwd=root)
    assert proc.returncode == 2 and words in proc.stderr


@pytest.mark.parametrize("flags", [("--in-process",), ("--max-parallel", "1")])
def test_sequential_execution_gives_the_same_result(tmp_path, flags):
    root = make_project(tmp_path / "p", "SPEC-27", spec_text("SPEC-27", FIVE),
                        five_group_script())
    proc = agentrun("run", "SPEC-27", *scripted(*flags), cwd=root)
    assert proc.returncode == 0, proc.stderr
    result = proc.json
    assert {g["status"] for g in result["groups"].values()} == {"complete"}
    events = [json.loads(x) for x in (Path(result["run_dir"]) / "events.ndjson")
              .read_text().splitlines()]
    starts = [e["t"] for e in events if e["type"] == "worker_start"]
    results = [e["t"] for e in events if e["type"] == "worker_result"]
    # one worker at a time: each starts after the previous one returned
    assert all(s >= r for s, r in zip(starts[1:], results[:-1], strict=True))
