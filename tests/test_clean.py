"""`agentrun clean`: the worktrees and branches runs left behind, removed by their run's end."""

from __future__ import annotations

from clirun import agentrun
from gitutil import run_git
from runkit import make_project, scripted, spec_text, submit, writes

TWO = [("G1", [], "one.txt"), ("G2", [], "two.txt")]


def _branches(root) -> list[str]:
    return run_git(root, "for-each-ref", "--format=%(refname:short)", "refs/heads").split()


def test_clean_keeps_a_failed_runs_worktree_unless_forced_and_never_the_users(tmp_path):
    script = {"groups": {"G1": [submit("failed", "could not", error="broken")],
                         "G2": writes("two.txt", "2")}}
    root = make_project(tmp_path / "p", "SPEC-1", spec_text("SPEC-1", TWO), script)
    run = agentrun("run", "SPEC-1", *scripted("--max-retries", "0"), cwd=root)
    assert run.returncode == 1, run.stderr
    run_id = run.json["run_id"]
    kept = f"agentrun/SPEC-1/{run_id}/G1"
    assert kept in _branches(root)
    # the user's own branches and worktrees, one with an agentrun-like name
    run_git(root, "branch", "agentrun/mine")
    run_git(root, "worktree", "add", "-q", "-b", "feature", str(tmp_path / "feature"))
    listed = agentrun("clean", "--dry-run", "--json", cwd=root)
    assert listed.returncode == 0, listed.stderr
    [item] = listed.json["items"]
    assert item["branch"] == kept and item["action"] == "kept"
    assert "the run ended partial" in item["reason"] and "--force" in item["reason"]
    assert agentrun("clean", cwd=root).returncode == 0
    assert kept in _branches(root)
    # an unreadable checkpoint does not stop a clean-up: the run record says how it ended
    (root / ".specflow/execution/SPEC-1-state.json").write_text("{")
    assert agentrun("clean", "--dry-run", "--json", cwd=root).json["items"] == [item]
    dry = agentrun("clean", "--force", "--dry-run", cwd=root)
    assert "would remove: " + kept in dry.stdout and kept in _branches(root)
    forced = agentrun("clean", "--force", "--json", cwd=root)
    assert [i["action"] for i in forced.json["items"]] == ["removed"]
    assert kept not in _branches(root)
    assert {"agentrun/mine", "feature"} <= set(_branches(root))
    assert (tmp_path / "feature").is_dir()
    assert run_git(root, "worktree", "list").count("\n") == 1


def test_clean_removes_a_complete_runs_leftovers_but_not_uncommitted_work(tmp_path):
    script = {"groups": {"G1": writes("one.txt", "1"), "G2": writes("two.txt", "2")}}
    root = make_project(tmp_path / "p", "SPEC-1", spec_text("SPEC-1", TWO), script)
    run = agentrun("run", "SPEC-1", *scripted(), cwd=root)
    assert run.returncode == 0, run.stderr
    run_id = run.json["run_id"]
    left = {}
    for batch in ("G1", "G2"):  # what a run killed during its clean-up would leave
        path = root / ".specflow/runs" / run_id / "worktrees" / f"X{batch}"
        run_git(root, "worktree", "add", "-q", "-b", f"agentrun/SPEC-1/{run_id}/X{batch}",
                str(path))
        left[batch] = path
    (left["G2"] / "notes.txt").write_text("mine\n")
    cleaned = agentrun("clean", "--json", cwd=root)
    assert cleaned.returncode == 0, cleaned.stderr
    actions = {i["branch"].rsplit("/", 1)[1]: i for i in cleaned.json["items"]}
    assert actions["XG1"]["action"] == "removed" and not left["G1"].exists()
    assert actions["XG2"]["action"] == "kept"
    assert "uncommitted changes" in actions["XG2"]["reason"]
    human = agentrun("clean", cwd=root)
    assert f"kept: agentrun/SPEC-1/{run_id}/XG2" in human.stdout
    assert "uncommitted changes" in human.stdout
    assert agentrun("clean", "--force", cwd=root).returncode == 0
    assert not left["G2"].exists() and _branches(root) == ["main"]


# `clean` while a run is in progress: test_run_e2e.py::
# test_a_run_in_progress_refuses_a_second_run_and_clean_then_stops_and_resumes
