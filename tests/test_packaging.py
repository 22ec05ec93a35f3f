"""The wheel carries the agent definitions, workflows, prompts and the demo project."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_includes_packaged_directories(tmp_path):
    from hatchling.build import build_wheel

    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        name = build_wheel(str(tmp_path))
    finally:
        os.chdir(cwd)
    names = set(zipfile.ZipFile(tmp_path / name).namelist())
    for kind in ("agents", "commands", "prompts"):
        for source in (ROOT / kind).glob("*.md"):
            assert f"agentrun/_bundled/{kind}/{source.name}" in names
    for rel in (".specflow/demo-script.yaml", ".specflow/specs/SPEC-002.md",
                ".specflow/STATE.md"):
        assert f"agentrun/_bundled/specflow-example/{rel}" in names
    assert "agentrun/cli/app.py" in names
    assert "agentrun/templates/spec.md" in names  # `agentrun new`
    assert not any("__pycache__" in n for n in names)
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "agentrun = agentrun.cli.app:main" in zipfile.ZipFile(tmp_path / name).read(
        entry).decode()


def test_packaged_dirs_resolve_from_a_source_checkout():
    from agentrun.resources import find_resource, packaged_dir

    assert (packaged_dir("agents") / "spec-executor-worker.md").is_file()
    assert find_resource("prompts", "retry.md") is not None
    assert (packaged_dir("example") / ".specflow" / "demo-script.yaml").is_file()


def test_project_overrides_packaged_agent(tmp_path):
    from agentrun.resources import find_resource

    local = tmp_path / ".specflow" / "agents" / "spec-executor-worker.md"
    local.parent.mkdir(parents=True)
    local.write_text("---\nname: spec-executor-worker\n---\nmine\n")
    assert find_resource("agents", "spec-executor-worker.md", tmp_path) == local
