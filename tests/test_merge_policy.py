"""The merge policy's path rules (`agentrun.run.policy`): which changed paths stop a merge."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from gitutil import init_repo, run_git

from agentrun import workspace
from agentrun.run.policy import PATH_DENIED, RUNS_CODE, MergePolicy


def policy(**kw) -> MergePolicy:
    return MergePolicy(spec_path=".specflow/specs/SPEC-1.md", **kw)


@pytest.mark.parametrize("path, kind", [
    (".specflow/config.yaml", PATH_DENIED),
    (".specflow/prompts/worker_assignment.md", PATH_DENIED),
    (".specflow/agents/spec-executor.md", PATH_DENIED),
    (".specflow/agents", PATH_DENIED),  # a file or symlink named like the folder
    (".specflow/commands/run.md", PATH_DENIED),
    (".specflow/runs/20260101-000000-abcd/workers/G1/progress.ndjson", PATH_DENIED),
    (".specflow/runs", PATH_DENIED),
    (".specflow/execution/SPEC-1-state.json", PATH_DENIED),
    (".specflow/STATE.md", PATH_DENIED),
    (".specflow/specs/SPEC-1.md", PATH_DENIED),
    (".specflow/specs/SPEC-2.md", PATH_DENIED),
    (".specflow/PROJECT.md", PATH_DENIED),
    (".specflow/specs/.specflow/config.yaml", PATH_DENIED),
    ("docs/.SpecFlow/config.yaml", PATH_DENIED),
    ("app/.specflow/prompts/x.md", PATH_DENIED),
    (".husky/pre-commit", RUNS_CODE),
    (".Husky/pre-commit", RUNS_CODE),
    (".githooks/pre-commit", RUNS_CODE),
    ("lefthook.yml", RUNS_CODE),
    (".lefthook.yml", RUNS_CODE),
    (".pre-commit-config.yaml", RUNS_CODE),
    (".github/workflows/ci.yml", RUNS_CODE),
    (".GITHUB/Workflows/ci.yml", RUNS_CODE),
    (".gitmodules", RUNS_CODE),
    ("sub/.GIT/config", PATH_DENIED),
    (".git", PATH_DENIED),
    ("./.specflow//config.yaml", PATH_DENIED),
])
def test_protected_paths(path, kind):
    assert policy().kind(path) == kind


@pytest.mark.parametrize("path", [
    "src/a.py", "docs/lefthook.yml", ".gitattributes", ".github/CODEOWNERS", "husky/pre-commit",
    "specflow/config.yaml", ".specflow.md", "src/.gitignore", "x.git/y",
])
def test_ordinary_paths(path):
    assert policy().kind(path) is None


def test_spec_named_paths_are_allowed_but_specflow_paths_never():
    rules = policy(named=[".github/workflows/CI.yml", ".specflow/STATE.md",
                          "./.specflow/config.yaml"])
    found = {f.path: (f.kind, f.allowed) for f in rules.check(
        [".github/workflows/ci.yml", ".specflow/STATE.md", ".specflow/config.yaml",
         ".husky/pre-commit", "src/a.py"])}
    assert found == {".github/workflows/ci.yml": (RUNS_CODE, True),
                     ".specflow/STATE.md": (PATH_DENIED, False),
                     ".specflow/config.yaml": (PATH_DENIED, False),
                     ".husky/pre-commit": (RUNS_CODE, False)}


def test_a_spec_outside_specflow_and_the_hooks_path():
    rules = MergePolicy(spec_path="docs/plan.md", hooks_dir="tools/hooks")
    assert rules.kind("docs/plan.md") == PATH_DENIED
    assert rules.kind("docs/other.md") is None
    assert rules.kind("tools/hooks/pre-commit") == RUNS_CODE
    assert rules.kind("tools/hooksmith.py") is None


def test_for_run_reads_core_hooks_path(tmp_path):
    from agentrun.project import Project
    from agentrun.spec import parse_spec

    root = init_repo(tmp_path / "r", {"README.md": "x\n"})
    run_git(root, "config", "core.hooksPath", "ci/git-hooks")
    spec = parse_spec("---\nid: SPEC-1\n---\n# SPEC-1\n", root / ".specflow/specs/SPEC-1.md")
    rules = MergePolicy.for_run(root, Project(root), spec)
    assert rules.kind("ci/git-hooks/pre-push") == RUNS_CODE
    assert rules.kind(".specflow/specs/SPEC-1.md") == PATH_DENIED


# --- judged from the branch's tree ----------------------------------------------------------

LINKS = {  # symlink -> (target, denied?)
    "ok/sibling": ("../src/a.py", False),
    "ok/dangling-inside": ("missing/file", False),
    "ok/via-link": ("../ok/sibling", False),
    "a/b/up": ("../../t", False),  # deep, pointing near the top
    "bad/through": ("../a/b/up/../..", True),  # inside when read as text, outside for real
    "bad/up": ("../../outside", True),
    "bad/absolute": ("/etc/passwd", True),
    "bad/root": ("..", True),
    "bad/specflow": ("../.specflow", True),
    "bad/runs-deep": ("../.SpecFlow/runs/x", True),
    "bad/git": ("../.git/config", True),
    "bad/loop-a": ("loop-b", True),
    "bad/loop-b": ("loop-a", True),
    ".specflow/runs": ("../../elsewhere", True),
    "docs/agents": ("../.specflow/agents", True),
}


def test_gitlinks_symlinks_and_git_dirs_are_read_from_the_branch_tree(tmp_path):
    """A branch built with plain git (symlinks, gitlinks and — through `mktree`, which skips
    the index's own refusal — a `.GIT` folder): each out-of-bounds entry is a finding with its
    path named, each harmless one is not."""
    root = init_repo(tmp_path / "r", {"src/a.py": "A = 1\n", "vendor/lib/x": "x\n"})
    base = run_git(root, "rev-parse", "HEAD")
    run_git(root, "switch", "-q", "-c", "work")
    for path, (target, _denied) in LINKS.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).symlink_to(target)
    run_git(root, "rm", "-rq", "--cached", "vendor/lib")
    run_git(root, "add", "-A", "--", ".", ":!vendor")
    for path in ("vendor/lib", "deps/new"):
        run_git(root, "update-index", "--add", "--cacheinfo", f"160000,{base},{path}")
    blob = _stdin(root, "", "hash-object", "-w", "--stdin")
    config = _stdin(root, f"100644 blob {blob}\tconfig\n", "mktree")
    nested = _stdin(root, f"040000 tree {config}\t.GIT\n", "mktree")
    listing = run_git(root, "ls-tree", run_git(root, "write-tree"))
    tree = _stdin(root, f"{listing}\n040000 tree {nested}\tnested\n", "mktree")
    commit = _stdin(root, "w", "commit-tree", tree, "-p", base)
    assert run_git(root, "ls-tree", commit, "deps/new").startswith("160000 ")  # all there
    assert run_git(root, "ls-tree", "-r", "--name-only", commit, "nested") == "nested/.GIT/config"

    rules = MergePolicy(spec_path=".specflow/specs/SPEC-1.md")
    found = {f.path: f for f in rules.check_changes(
        workspace.tree_changes(root, base, commit),
        lambda: workspace.symlinks_of(root, commit))}
    denied = {p for p, (_t, d) in LINKS.items() if d} | {"vendor/lib", "deps/new",
                                                         "nested/.GIT/config"}
    assert set(found) == denied
    assert all(f.kind == PATH_DENIED and not f.allowed for f in found.values())
    assert "a gitlink" in found["deps/new"].reason()
    assert "outside the repository" in found["bad/absolute"].reason()
    assert "outside the repository" in found["bad/through"].reason()
    assert "the repository's root" in found["bad/root"].reason()
    assert "a loop of symlinks" in found["bad/loop-a"].reason()
    assert "into a .git or .specflow folder" in found["docs/agents"].reason()
    assert found["docs/agents"].reason().startswith("path_denied: docs/agents (a symlink to")


def _stdin(root, text: str, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=root, input=text, capture_output=True, text=True,
                          check=True)
    return proc.stdout.strip()


def test_a_plan_from_another_tool_is_the_plans_to_mark_not_the_workers(tmp_path):
    """A worker cannot tick, untick or rewrite the plan it runs: spec-kit's tasks.md, or GSD's
    plan files and the ROADMAP.md a run ticks; other files under the same folders are work."""
    import shutil

    from agentrun.formats import load
    from agentrun.project import Project

    fixtures = Path(__file__).parent / "fixtures" / "formats"
    root = init_repo(tmp_path / "r", {"README.md": "x\n"})
    shutil.copytree(fixtures / "speckit" / "mock-auth", root / "specs" / "007-mock-auth")
    phase = root / ".planning" / "phases" / "01-foundation"
    shutil.copytree(fixtures / "gsd" / "01-foundation", phase)
    (root / ".planning" / "ROADMAP.md").write_text("- [ ] 01-01: foundation\n")
    speckit, _ = load(root / "specs" / "007-mock-auth" / "tasks.md", root)
    rules = MergePolicy.for_run(root, Project(root), speckit)
    assert rules.kind("specs/007-mock-auth/tasks.md") == PATH_DENIED
    assert rules.kind("specs/007-mock-auth/TASKS.md") == PATH_DENIED
    assert rules.kind("specs/007-mock-auth/notes.md") is None
    assert rules.kind(".planning/ROADMAP.md") is None  # not this plan's
    gsd, _ = load(phase, root)
    rules = MergePolicy.for_run(root, Project(root), gsd)
    plans = sorted(p.name for p in phase.glob("*-PLAN.md"))
    assert plans and all(rules.kind(f".planning/phases/01-foundation/{p}") == PATH_DENIED
                         for p in plans)
    assert rules.kind(".planning/ROADMAP.md") == PATH_DENIED
