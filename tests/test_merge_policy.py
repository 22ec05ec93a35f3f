"""The merge policy's path rules (`agentrun.run.policy`): which changed paths stop a merge."""

from __future__ import annotations

import pytest
from gitutil import init_repo, run_git

from agentrun.run.policy import CONTROL, OWNED, RUNS_CODE, MergePolicy


def policy(**kw) -> MergePolicy:
    return MergePolicy(spec_path=".specflow/specs/SPEC-1.md", **kw)


@pytest.mark.parametrize("path, kind", [
    (".specflow/config.yaml", CONTROL),
    (".specflow/prompts/worker_assignment.md", CONTROL),
    (".specflow/agents/spec-executor.md", CONTROL),
    (".specflow/commands/run.md", CONTROL),
    (".specflow/runs/20260101-000000-abcd/workers/G1/progress.ndjson", OWNED),
    (".specflow/execution/SPEC-1-state.json", OWNED),
    (".specflow/STATE.md", OWNED),
    (".specflow/specs/SPEC-1.md", OWNED),
    (".husky/pre-commit", RUNS_CODE),
    (".Husky/pre-commit", RUNS_CODE),
    (".githooks/pre-commit", RUNS_CODE),
    ("lefthook.yml", RUNS_CODE),
    (".lefthook.yml", RUNS_CODE),
    (".pre-commit-config.yaml", RUNS_CODE),
    (".github/workflows/ci.yml", RUNS_CODE),
    (".GITHUB/Workflows/ci.yml", RUNS_CODE),
    (".gitmodules", RUNS_CODE),
    ("sub/.GIT/config", OWNED),
    ("./.specflow//config.yaml", CONTROL),
])
def test_protected_paths(path, kind):
    assert policy().kind(path) == kind


@pytest.mark.parametrize("path", [
    "src/a.py", ".specflow/specs/SPEC-2.md", ".specflow/PROJECT.md", "docs/lefthook.yml",
    ".gitattributes", ".github/CODEOWNERS", "husky/pre-commit", ".specflow/config.yaml.bak",
])
def test_ordinary_paths(path):
    assert policy().kind(path) is None


def test_spec_named_paths_are_allowed_but_orchestrator_files_never():
    rules = policy(named=[".github/workflows/CI.yml", ".specflow/STATE.md",
                          "./.specflow/config.yaml"])
    found = {f.path: f.allowed for f in rules.check(
        [".github/workflows/ci.yml", ".specflow/STATE.md", ".specflow/config.yaml",
         ".husky/pre-commit", "src/a.py"])}
    assert found == {".github/workflows/ci.yml": True, ".specflow/STATE.md": False,
                     ".specflow/config.yaml": True, ".husky/pre-commit": False}


def test_project_in_a_subdirectory_and_hooks_path(tmp_path):
    rules = policy(control_root="app", hooks_dir="tools/hooks")
    assert rules.kind("app/.specflow/prompts/x.md") == CONTROL
    assert rules.kind(".specflow/prompts/x.md") is None
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
    assert rules.kind(".specflow/specs/SPEC-1.md") == OWNED
