"""The integration check's parts: the subset search, checks in throwaway worktrees on real git
repositories, undoing a wave, and how the run's status and summary read the outcome."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest
from gitutil import head, init_repo, run_git

from agentrun.core.results import WorkerResult
from agentrun.core.status import RunStatus, Status, StopReason
from agentrun.report.execution_state import GroupState, IntegrationCheck, RunState
from agentrun.report.summary import render_summary
from agentrun.run import scheduler
from agentrun.run.integration import IntegrationChecker, Merge, find_culprits, undo_wave
from agentrun.run.verify import empty_claim
from agentrun.sandbox.local import LocalSandbox
from agentrun.tools.base import CommandPolicy


class Breaks:
    """`breaks` for the search: the subsets that fail, and every subset it was asked about."""

    def __init__(self, *failing: tuple[str, ...]) -> None:
        self.failing = {tuple(f) for f in failing}
        self.asked: list[tuple[str, ...]] = []

    def __call__(self, subset: list[str]) -> bool:
        self.asked.append(tuple(subset))
        return tuple(subset) in self.failing


def test_every_member_that_breaks_it_alone_is_named():
    breaks = Breaks(("G2",), ("G3",))
    found = find_culprits(["G1", "G2", "G3"], breaks)
    assert found.subsets == [["G2"], ["G3"]] and not found.base_fails
    assert breaks.asked == [("G1",), ("G2",), ("G3",)]  # no pairs once a single one fails


def test_without_a_single_culprit_the_first_failing_pair_is_named():
    breaks = Breaks(("G1", "G3"), ("G2", "G3"))
    found = find_culprits(["G1", "G2", "G3"], breaks)
    assert found.subsets == [["G1", "G3"]]
    assert breaks.asked == [("G1",), ("G2",), ("G3",), ("G1", "G2"), ("G1", "G3")]


def test_only_the_whole_wave_breaks_it():
    found = find_culprits(["G1", "G2", "G3"], Breaks(("G1", "G2", "G3")))
    assert found.subsets == [] and not found.base_fails


def test_when_every_member_fails_alone_the_base_is_checked():
    breaks = Breaks(("G1",), ("G2",), ())
    found = find_culprits(["G1", "G2"], breaks)
    assert found.subsets == [] and found.base_fails
    assert breaks.asked[-1] == ()


def test_a_wave_of_one_merge_needs_no_recheck_of_it():
    breaks = Breaks()
    found = find_culprits(["G1"], breaks)
    assert found.subsets == [["G1"]] and not found.base_fails
    assert breaks.asked == [()]  # only the base, to rule out a base that fails already


# -- on real repositories ---------------------------------------------------------------------

CHECK_PY = "import lib, app\napp.run()\n"


def branch(root: Path, name: str, files: dict[str, str]) -> str:
    run_git(root, "checkout", "-q", "-b", name, "main")
    for rel, text in files.items():
        (root / rel).write_text(text)
    run_git(root, "add", "-A")
    run_git(root, "commit", "-q", "-m", name)
    run_git(root, "checkout", "-q", "main")
    return name


@pytest.fixture
def wave(tmp_path):
    """main with lib.old(); G1 renames it to new(), G2 makes app call old(): both merged."""
    root = tmp_path / "repo"
    init_repo(root, {"lib.py": "def old():\n    return 1\n", "app.py": "def run():\n    pass\n",
                     "check.py": CHECK_PY, ".gitignore": "runs/\n"})
    base = head(root)
    b1 = branch(root, "g1", {"lib.py": "def new():\n    return 1\n"})
    b2 = branch(root, "g2", {"app.py": "import lib\n\n\ndef run():\n    return lib.old()\n"})
    merges = []
    for gid, name in (("G1", b1), ("G2", b2)):
        run_git(root, "merge", "-q", "--no-ff", "-m", f"Merge {gid}", name)
        merges.append(Merge(gid, [gid], f"{head(root)}^2"))
    return root, base, merges


def checker(root: Path, command: str = f"{sys.executable} check.py") -> IntegrationChecker:
    return IntegrationChecker(root, root / "runs" / "integration", lambda n: f"agentrun/t/{n}",
                              command, 60, lambda _wt: LocalSandbox(), threading.Event())


def test_the_merged_result_is_checked_and_the_pair_named(wave):
    root, base, merges = wave
    check = checker(root).check("1", base, head(root), merges)
    assert not check.ok and check.culprits == [["G1", "G2"]] and not check.base_fails
    assert "AttributeError" in check.output
    # the throwaway worktrees and branches are gone; the user's checkout is untouched
    assert run_git(root, "worktree", "list").count("\n") == 0
    assert run_git(root, "branch", "--list", "agentrun/*") == ""
    assert run_git(root, "status", "--porcelain") == ""


def test_a_passing_result_needs_no_search(wave):
    root, base, merges = wave
    check = checker(root, "true").check("1", base, head(root), merges)
    assert check.ok and check.culprits == [] and check.commit == head(root)


def test_a_base_that_fails_already_names_no_culprit(wave):
    root, base, merges = wave
    check = checker(root, "false").check("1", base, head(root), merges)
    assert not check.ok and check.base_fails and check.culprits == []


def test_a_wave_is_undone_only_when_nothing_is_on_top(wave):
    root, base, _ = wave
    merged = head(root)
    run_git(root, "commit", "-q", "--allow-empty", "-m", "someone else's work")
    restored, note = undo_wave(root, "main", base, merged)
    assert not restored and "moved on" in note and head(root) != merged
    run_git(root, "reset", "-q", "--hard", merged)
    restored, note = undo_wave(root, "main", base, merged)
    assert restored and head(root) == base and "reset to" in note
    assert not (root / "lib.py").read_text().startswith("def new")


# -- what the run makes of it -----------------------------------------------------------------

def state(**fields) -> RunState:
    run = RunState(run_id="r1", spec_id="S", spec_path="s.md", mode="orchestrated",
                   base_commit="b" * 40, target_branch="main", started="now", **fields)
    run.groups["G1"] = GroupState(id="G1", status=Status.COMPLETE)
    return run


def test_an_integration_stop_fails_the_run_and_survives_a_round_trip():
    run = state(stop_reason=StopReason.INTEGRATION, integration_command="make test",
                integration=[IntegrationCheck(wave="1", command="make test", commit="c" * 40,
                                              base="b" * 40, ok=False,
                                              culprits=[["G1", "G2"]])])
    assert scheduler.final_status(run, interrupted=False) == RunStatus.FAILED
    again = RunState.from_dict(run.to_dict())
    assert again.stop_reason == StopReason.INTEGRATION
    assert again.integration == run.integration
    assert scheduler.final_status(state(), interrupted=False) == RunStatus.COMPLETE


def test_the_summary_says_when_nothing_was_checked():
    assert "Not integration-checked: no validation command." in render_summary(state(), [], "t")
    checked = state(integration_command="make test", integration=[
        IntegrationCheck(wave="1", command="make test", commit="c" * 40, base="b" * 40,
                         ok=False, output="x ```` y",
                         culprits=[["G2"]], kept_branches=["agentrun/S/r1/G2"])])
    text = render_summary(checked, [], "t")
    assert "- Wave 1: `make test` on `cccccccccccc`: **failed**" in text
    assert "broken by: G2" in text and "`agentrun/S/r1/G2`" in text
    assert "`````\nx ```` y\n`````" in text  # a fence the output cannot close


def test_an_empty_complete_claim_needs_a_reason():
    deviations: list[str] = []
    bare = WorkerResult(group="G1", groups=["G1"], status=Status.COMPLETE)
    assert empty_claim(bare, deviations) == Status.PARTIAL
    assert "no_change_needed" in (bare.error or "")
    reasoned = WorkerResult(group="G1", groups=["G1"], status=Status.COMPLETE,
                            no_change_needed="already done in lib.py:3")
    assert empty_claim(reasoned, deviations) == Status.COMPLETE
    assert deviations[-1] == "no change needed: already done in lib.py:3"


def test_a_check_that_cannot_run_is_no_pass(wave):
    root, base, merges = wave
    broken = IntegrationChecker(root, root / "runs" / "integration", lambda n: "bad..ref",
                                "true", 60, lambda _wt: LocalSandbox(), threading.Event())
    check = broken.check("1", base, head(root), merges)
    assert not check.ok and check.culprits == []
    assert check.note.startswith("could not create a worktree to check in")


def test_the_check_runs_with_the_variables_the_project_lets_commands_see(wave, monkeypatch):
    """The workers' `command_env` reaches the integration check too, so a check that needs
    it does not fail only on the merged result."""
    root, base, _merges = wave
    monkeypatch.setenv("APP_SETTING", "on")
    needs = 'test "$APP_SETTING" = on'

    def check(policy: CommandPolicy | None):
        return IntegrationChecker(root, root / "runs" / "integration",
                                  lambda n: f"agentrun/t/{n}", needs, 60,
                                  lambda _wt: LocalSandbox(), threading.Event(), policy)

    assert not check(None).run_on(base, []).ok  # allow-listed environment: not passed
    assert check(CommandPolicy(env_allow=("APP_SETTING",))).run_on(base, []).ok
