"""Files that are not agentrun's to reshape: a symlinked spec or STATE.md is written through to
its target (refused when that lies outside the repository), CRLF line endings and a BOM come
back as they were, and the files agentrun itself scaffolds are committed before a run, in a
commit of their own, so the workers' base holds what they are told about."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from clirun import agentrun
from gitutil import head, init_repo, run_git
from runkit import make_project, scripted, spec_text, writes

TWO = [("G1", [], "one.txt"), ("G2", [], "two.txt")]
SCRIPT = {"groups": {"G1": writes("one.txt", "1\n"), "G2": writes("two.txt", "2\n")}}
APPROVE = [{"tool_calls": [{"name": "submit_result", "arguments": {
    "status": "complete", "summary": "Audited.", "criteria_met": [], "deviations": [],
    "output": {"status": "APPROVED", "critical_issues": [], "recommendations": []}}}]}]


def two_groups(root: Path, spec: str | None = None) -> Path:
    return make_project(root, "SPEC-1", spec or spec_text("SPEC-1", TWO),
                        {**SCRIPT, "groups": {**SCRIPT["groups"], "SPEC-1": APPROVE}})


def audit(root: Path):
    return agentrun("audit", "SPEC-1", "--provider", "scripted", "--script",
                    ".specflow/script.yaml", cwd=root)


def commit_all(root: Path, message: str = "change") -> None:
    run_git(root, "add", "-A")
    run_git(root, "commit", "-q", "-m", message)


def no_worktrees(root: Path) -> bool:
    return len(run_git(root, "worktree", "list").splitlines()) == 1


def relink(link: Path, target: Path, to: str) -> None:
    """Move `link`'s file to `target` and leave a symlink `to` in its place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(link.read_bytes())
    link.unlink()
    link.symlink_to(to)


# -- symlinks -------------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["spec", "state"])
def test_a_symlink_out_of_the_repository_is_refused_before_the_run(tmp_path, which):
    root = two_groups(tmp_path / "p")
    link = root / (".specflow/specs/SPEC-1.md" if which == "spec" else ".specflow/STATE.md")
    outside = tmp_path / "elsewhere" / link.name
    relink(link, outside, str(outside))
    commit_all(root)
    before = outside.read_bytes()
    proc = agentrun("run", "SPEC-1", *scripted(), cwd=root)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    rel = ".specflow/specs/SPEC-1.md" if which == "spec" else ".specflow/STATE.md"
    assert f"{rel} is a symlink to {outside}" in proc.stderr, proc.stderr
    assert outside.read_bytes() == before and link.is_symlink()
    assert no_worktrees(root) and not (root / ".specflow/execution").exists()


# -- line endings and a BOM -----------------------------------------------------------------

def crlf(text: str, bom: bool) -> bytes:
    return ("\ufeff" if bom else "").encode() + text.replace("\n", "\r\n").encode()


def lone_lf(data: bytes) -> int:
    return data.replace(b"\r\n", b"").count(b"\n")


def assert_crlf_kept(old_spec: bytes, old_state: bytes, new_spec: bytes, new_state: bytes,
                     bom: bool) -> None:
    for new in (new_spec, new_state):
        assert lone_lf(new) == 0 and new.startswith(b"\xef\xbb\xbf") == bom
    head_part, _, tail = old_spec.partition(b"## Implementation Tasks")
    assert new_spec.startswith(head_part.replace(b"status: audited", b"status: review"))
    assert b"## Implementation Tasks" + tail in new_spec
    assert b"## Execution Summary\r\n" in new_spec
    decisions = old_state[old_state.index(b"## Decisions"):old_state.index(b"## Warnings")]
    assert decisions in new_state and b"Status:** review\r\n" in new_state


def test_crlf_and_bom_survive_a_run_byte_for_byte(tmp_path):
    root = two_groups(tmp_path / "p")
    spec, state = root / ".specflow/specs/SPEC-1.md", root / ".specflow/STATE.md"
    spec.write_bytes(crlf(spec_text("SPEC-1", TWO), bom=True))
    state.write_bytes(crlf(state.read_text(), bom=True))
    commit_all(root)
    old_spec, old_state = spec.read_bytes(), state.read_bytes()
    proc = agentrun("run", "SPEC-1", *scripted(), cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert_crlf_kept(old_spec, old_state, spec.read_bytes(), state.read_bytes(), bom=True)
    diff = run_git(root, "diff", "--numstat", "HEAD~1", "--", ".specflow/specs/SPEC-1.md")
    assert diff.split()[1] == "1", diff  # one line removed: the status


def test_symlinked_crlf_spec_and_state_md_are_written_through_byte_for_byte(tmp_path):
    """Two cases in one run: the spec and STATE.md are symlinks into docs/ (written through to
    their targets), and those targets have CRLF line endings without a BOM (kept so)."""
    root = two_groups(tmp_path / "p")
    spec, state = root / ".specflow/specs/SPEC-1.md", root / ".specflow/STATE.md"
    spec.write_bytes(crlf(spec_text("SPEC-1", TWO), bom=False))
    state.write_bytes(crlf(state.read_text(), bom=False))
    relink(spec, root / "docs/SPEC-1.md", "../../docs/SPEC-1.md")
    relink(state, root / "docs/STATE.md", "../docs/STATE.md")
    commit_all(root, "keep spec and state in docs/")
    old_spec, old_state = spec.read_bytes(), state.read_bytes()
    proc = agentrun("run", "SPEC-1", *scripted(), cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert spec.is_symlink() and state.is_symlink()
    assert str(spec.readlink()) == "../../docs/SPEC-1.md"
    target = (root / "docs/SPEC-1.md").read_text()
    assert "## Execution Summary" in target and "status: review" in target
    assert "Status:** review" in (root / "docs/STATE.md").read_text()
    changed = run_git(root, "show", "--name-status", "--format=", "HEAD").split("\n")
    assert "M\tdocs/SPEC-1.md" in changed and "M\tdocs/STATE.md" in changed
    assert not any(line.startswith("T") for line in changed), changed
    assert run_git(root, "status", "--porcelain") == ""
    new_spec = (root / "docs/SPEC-1.md").read_bytes()
    new_state = (root / "docs/STATE.md").read_bytes()
    assert_crlf_kept(old_spec, old_state, new_spec, new_state, bom=False)
    diff = run_git(root, "diff", "--numstat", "HEAD~1", "--", "docs/SPEC-1.md")
    assert diff.split()[1] == "1", diff  # one line removed: the status


def test_audit_writes_through_a_symlinked_spec_keeping_crlf_and_bom(tmp_path):
    """Two cases in one audit: the spec is a symlink into docs/ (written through), and its
    target has CRLF line endings and a BOM (kept so)."""
    root = two_groups(tmp_path / "p")
    spec = root / ".specflow/specs/SPEC-1.md"
    spec.write_bytes(crlf(spec_text("SPEC-1", TWO, status="draft"), bom=True))
    relink(spec, root / "docs/SPEC-1.md", "../../docs/SPEC-1.md")
    commit_all(root)
    old = spec.read_bytes()
    proc = audit(root)
    assert proc.returncode == 0, proc.stderr
    assert spec.is_symlink()
    assert "## Audit History" in (root / "docs/SPEC-1.md").read_text()
    new = (root / "docs/SPEC-1.md").read_bytes()
    assert lone_lf(new) == 0 and new.startswith(b"\xef\xbb\xbf")
    assert b"## Audit History\r\n" in new
    assert new.startswith(old.split(b"status: draft")[0] + b"status: audited\r\n")
    assert new.startswith(old.replace(b"status: draft", b"status: audited"))


# -- agentrun's own files, committed before a run -------------------------------------------

def fresh_project(root: Path) -> Path:
    """A user's repository after `agentrun init` and writing a first spec, nothing committed."""
    init_repo(root, {"README.md": "# mine\n"})
    assert agentrun("init", cwd=root).returncode == 0
    (root / ".specflow/specs/SPEC-001.md").write_text(
        spec_text("SPEC-001", [("G1", [], "one.txt"), ("G2", [], "two.txt")]))
    script = {"groups": {"G1": writes("one.txt", "1\n"), "G2": writes("two.txt", "2\n")}}
    (root.parent / "script.yaml").write_text(yaml.safe_dump(script))
    return root


def run_fresh(root: Path, *extra: str):
    return agentrun("run", "SPEC-001", "--provider", "scripted", "--script",
                    str(root.parent / "script.yaml"), "--yes", "--no-review", *extra, cwd=root)


SCAFFOLD = [".gitignore", ".specflow/PROJECT.md", ".specflow/STATE.md",
            ".specflow/config.yaml", ".specflow/specs/SPEC-001.md"]


def test_init_then_a_spec_then_run_commits_scaffolding_and_spec_first(tmp_path):
    root = fresh_project(tmp_path / "p")
    initial = head(root)
    proc = run_fresh(root)
    assert proc.returncode == 0, proc.stderr
    subjects = run_git(root, "log", "--format=%s", f"{initial}..HEAD", "--first-parent",
                       "--reverse").splitlines()
    assert subjects[0] == "agentrun: commit SPEC-001 and scaffolding before run", subjects
    first = run_git(root, "rev-list", "--first-parent", "--reverse",
                    f"{initial}..HEAD").split()[0]
    files = run_git(root, "show", "--name-only", "--format=", first).split()
    assert files == SCAFFOLD
    assert "agentrun: commit SPEC-001 and scaffolding before run" in proc.stderr
    assert ".specflow/config.yaml" in proc.stderr
    state = json.loads((root / ".specflow/execution/SPEC-001-state.json").read_text())
    assert state["base_commit"] == first  # the workers started from it
    assert run_git(root, "status", "--porcelain") == ""


def test_dry_run_commits_nothing_and_any_other_change_still_stops_the_run(tmp_path):
    """Three cases on one fresh project, none of which commits or writes a tracked file: a dry
    run, then a file of the user's, then (that file gone) the user's own edit to .gitignore."""
    root = fresh_project(tmp_path / "p")
    before = head(root)
    proc = run_fresh(root, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert head(root) == before

    (root / "notes.txt").write_text("mine\n")
    proc = run_fresh(root)
    assert proc.returncode == 3, proc.stderr
    assert "uncommitted changes: notes.txt" in proc.stderr
    assert ".gitignore" not in proc.stderr and "config.yaml" not in proc.stderr
    assert head(root) == before and no_worktrees(root)

    (root / "notes.txt").unlink()
    with (root / ".gitignore").open("a") as fh:
        fh.write("*.log\n")
    proc = run_fresh(root)
    assert proc.returncode == 3 and "uncommitted changes: .gitignore" in proc.stderr


def test_a_users_edit_to_the_spec_is_committed_before_the_workers_start(tmp_path):
    root = two_groups(tmp_path / "p")
    spec = root / ".specflow/specs/SPEC-1.md"
    spec.write_text(spec.read_text().replace("Each group creates its own file.",
                                             "Each group creates its own file, exactly."))
    initial = head(root)
    proc = agentrun("run", "SPEC-1", *scripted(), cwd=root)
    assert proc.returncode == 0, proc.stderr
    first = run_git(root, "rev-list", "--first-parent", "--reverse",
                    f"{initial}..HEAD").split()[0]
    assert run_git(root, "log", "-1", "--format=%s", first) == \
        "agentrun: commit SPEC-1 before run"
    assert "exactly." in run_git(root, "show", f"{first}:.specflow/specs/SPEC-1.md")
    state = json.loads((root / ".specflow/execution/SPEC-1-state.json").read_text())
    assert state["base_commit"] == first
    added = [line for line in run_git(root, "show", "HEAD", "--", ".specflow/specs/SPEC-1.md")
             .splitlines() if line.startswith("+")]
    assert added and not any("exactly." in line for line in added)  # only the report
