"""What a failed run keeps, said once per worktree: the groups of one batch share their
worker's worktree, in the terminal, `status` and the spec's Execution Summary alike."""

from __future__ import annotations

from clirun import agentrun
from runkit import make_project, scripted, spec_text, submit

TWO = [("G1", [], "one.txt"), ("G2", ["G1"], "two.txt")]


def test_a_failed_batch_of_two_groups_names_its_worktree_once(tmp_path):
    script = {"default": [submit("failed", "could not", error="compile error")]}
    root = make_project(tmp_path / "p", "SPEC-1", spec_text("SPEC-1", TWO), script)
    plain = [a for a in scripted("--mode", "single", "--max-retries", "0") if a != "--json"]
    proc = agentrun("run", "SPEC-1", *plain, cwd=root)
    assert proc.returncode == 1, proc.stderr
    kept = [line for line in proc.stdout.splitlines() if line.startswith("Kept worktree")]
    assert len(kept) == 1 and kept[0].startswith("Kept worktree for G1, G2: "), proc.stdout
    status = agentrun("status", cwd=root).stdout
    assert [line for line in status.splitlines() if line.startswith("Kept worktree")] == \
        [kept[0].split(" (branch")[0]]
    summary = (root / ".specflow/specs/SPEC-1.md").read_text().split("### Kept Worktrees\n")[1]
    entries = [line for line in summary.splitlines() if line.startswith("- ")]
    assert len(entries) == 1 and entries[0].startswith("- G1, G2: `"), summary
