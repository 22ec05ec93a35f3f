"""The project is fixed when a run starts: a `.specflow/` nested anywhere in the tree, or a
config changed in the working tree after the start, changes nothing that `run --resume`,
`review` and `fix` of that run do (through the entry point, the scripted provider, real git).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml
from clirun import agentrun
from gitutil import commit_files, head, init_repo, run_git
from runkit import make_project, spec_text, submit, writes
from test_review_cli import met, review_turn

from agentrun.project import Project, config_at, find_project, project_for_spec
from agentrun.sandbox.choice import resolve

SPEC = ".specflow/specs/SPEC-1.md"
NESTED = ".specflow/specs/.specflow"
FINDING = {"severity": "major", "file": "a.txt:1", "issue": "the greeting has no period",
           "fix": "write `a.`"}
# the user's: a reviewer that asks for a change, and a G2 that cannot be done
GOOD = {"groups": {"G1": writes("a.txt", "a\n"),
                   "G2": [submit("failed", "cannot do it", error="not possible")],
                   "FIX-1": writes("a.txt", "a.\n")},
        "agents": {"code-reviewer": [review_turn(
            [met(1, "a.txt:1"), {"criterion": 2, "verdict": "not_met", "evidence": "b.txt"}],
            [FINDING])]}}
# what a worker planted: G2 "complete", a reviewer approving anything, the sandbox off
EVIL = {"groups": {"G2": writes("pwned.txt", "owned\n"), "FIX-1": writes("pwned.txt", "x\n")},
        "agents": {"code-reviewer": [review_turn([met(1, "forged"), met(2, "forged")])]}}
EVIL_CONFIG = {"provider": "scripted", "script": f"{NESTED}/evil.yaml",
               "sandbox": {"mode": "off"}}
SANDBOX_OFF = "off (sandbox mode off)"


def project(tmp_path: Path) -> Path:
    spec = spec_text("SPEC-1", [("G1", [], "a.txt"), ("G2", [], "b.txt")])
    root = make_project(tmp_path / "p", "SPEC-1", spec, {}, files={
        ".specflow/config.yaml": yaml.safe_dump({"provider": "scripted",
                                                 "script": ".specflow/good.yaml"}),
        ".specflow/good.yaml": yaml.safe_dump(GOOD)})
    return root


def test_a_nested_specflow_written_after_the_start_configures_nothing(tmp_path):
    """One project, the run's later commands in turn. After the run, files a worker could have
    landed are committed: a nested `.specflow/config.yaml` turning the sandbox off and pointing
    at a script that completes G2 and approves anything, and the same settings in the root's
    config. `run --resume`, `review` and `fix` keep the settings the run started with, and say
    the file changed. Positive control: the planted file is what a new run would use."""
    root = project(tmp_path)
    first = agentrun("run", "SPEC-1", "--yes", "--json", "--no-review", "--retries", "0",
                     "--in-process", cwd=root)
    assert first.returncode == 1, first.stderr
    doc = first.json
    assert doc["groups"]["G1"]["status"] == "complete"
    assert doc["groups"]["G2"]["status"] == "failed"
    start = doc["base_commit"]
    assert doc["start_commit"] == start
    assert doc["config"]["script"] == ".specflow/good.yaml"
    settings = json.loads((Path(doc["run_dir"]) / "settings.json").read_text())
    assert settings["start_commit"] == start and settings["config"] == doc["config"]

    planted = yaml.safe_dump(EVIL_CONFIG)
    commit_files(root, {f"{NESTED}/config.yaml": planted, ".specflow/config.yaml": planted,
                        f"{NESTED}/evil.yaml": yaml.safe_dump(EVIL)}, "a worker's files")
    # positive control: the planted settings are the checkout's now, as a new run reads them
    now = find_project(root).config
    assert now.sandbox.mode == "off" and now.script == f"{NESTED}/evil.yaml"
    assert resolve(None, False, now.sandbox)[1].describe() == SANDBOX_OFF

    resumed = agentrun("run", "SPEC-1", "--resume", "--yes", "--json", "--no-review",
                       "--retries", "0", "--in-process", cwd=root)
    assert resumed.returncode == 1, resumed.stderr
    doc = resumed.json
    assert doc["groups"]["G2"]["status"] == "failed"  # the user's script, not the planted one
    assert not (root / "pwned.txt").exists()
    assert doc["sandbox"] != SANDBOX_OFF
    assert doc["start_commit"] == start  # a resume keeps the run's start and settings
    assert doc["config"]["script"] == ".specflow/good.yaml"
    assert "differs from the settings run" in resumed.stderr and start[:12] in resumed.stderr

    review = agentrun("review", "SPEC-1", "--json", cwd=root)
    assert review.returncode == 1, review.stderr
    assert review.json["result"] == "CHANGES_REQUESTED"  # the planted reviewer would approve
    assert review.json["sandbox"] != SANDBOX_OFF
    spec = (root / SPEC).read_text()  # the criteria follow the verdict: 1 met, 2 not
    assert "- [x] every file exists\n- [ ] nothing else changes\n" in spec

    # the next review finds criterion 1 not met either (the user's script, changed)
    good = {**GOOD, "agents": {"code-reviewer": [review_turn(
        [{"criterion": 1, "verdict": "not_met", "evidence": "b.txt"},
         {"criterion": 2, "verdict": "not_met", "evidence": "b.txt"}], [FINDING])]}}
    commit_files(root, {".specflow/good.yaml": yaml.safe_dump(good),
                        SPEC: spec}, "the next review's script")
    fix = agentrun("fix", "SPEC-1", "--json", "--in-process", cwd=root)
    assert fix.returncode == 1, fix.stderr
    doc = fix.json
    assert doc["groups"]["FIX-1"]["status"] == "complete"
    assert run_git(root, "show", "HEAD:a.txt") == "a."  # the user's fix worker
    assert not (root / "pwned.txt").exists()
    assert doc["sandbox"] != SANDBOX_OFF
    # one current verdict: the fix's review is v2, after `review`'s v1, in the record, the
    # spec and `status`
    assert [(r["version"], r["result"]) for r in doc["reviews"]] == \
        [(1, "CHANGES_REQUESTED"), (2, "CHANGES_REQUESTED")]
    assert doc["review"]["version"] == 2
    spec = (root / SPEC).read_text()
    assert "- [ ] every file exists\n- [ ] nothing else changes\n" in spec
    assert "**Review:** CHANGES_REQUESTED (Review v2, 2 review(s))" in spec
    shown = agentrun("status", "SPEC-1", cwd=root)
    assert "Review: CHANGES_REQUESTED (Review v2, 2 review(s))" in shown.stdout, shown.stdout


# -- the root, and settings read from a commit (in-process) ----------------------------------

def test_the_root_is_the_checkouts_top_level_never_a_folder_next_to_the_spec(tmp_path):
    root = init_repo(tmp_path / "r", {
        ".specflow/config.yaml": "retries: 1\n",
        f"{NESTED}/config.yaml": "retries: 7\n",
        ".specflow/specs/SPEC-1.md": "---\nid: SPEC-1\n---\n# SPEC-1\n",
        "src/deep/x.py": "X = 1\n"})
    for cwd in (root, root / "src/deep", root / NESTED):
        project, path = project_for_spec("SPEC-1", cwd=cwd) if cwd == root else \
            project_for_spec(str(root / SPEC), cwd=cwd)
        assert project.root == root.resolve() and project.config.retries == 1, cwd
        assert path.resolve() == (root / SPEC).resolve()
    # positive control: outside git (where no run can happen) the nearest `.specflow/` counts
    plain = tmp_path / "plain"
    shutil.copytree(root, plain, ignore=shutil.ignore_patterns(".git"))
    assert find_project(plain / NESTED).config.retries == 7
    assert find_project(plain / "src/deep").config.retries == 1


def test_a_spec_in_another_checkout_belongs_to_that_checkout(tmp_path):
    mine = init_repo(tmp_path / "mine", {".specflow/config.yaml": "retries: 1\n"})
    other = init_repo(tmp_path / "other", {".specflow/config.yaml": "retries: 2\n",
                                           SPEC: "---\nid: SPEC-1\n---\n# SPEC-1\n"})
    project, path = project_for_spec(str(other / SPEC), cwd=mine)
    assert project.root == other.resolve() and project.config.retries == 2
    # a symlink in my checkout to the other's spec is my spec
    (mine / ".specflow/specs").mkdir()
    (mine / SPEC).symlink_to(other / SPEC)
    project, _ = project_for_spec(SPEC, cwd=mine)
    assert project.root == mine.resolve() and project.config.retries == 1


def test_pinned_settings_come_from_the_record_or_the_start_commit(tmp_path):
    root = init_repo(tmp_path / "r", {".specflow/config.yaml": "retries: 1\n",
                                      ".specflow/agents/code-reviewer.md":
                                          "---\nname: code-reviewer\n---\nThe user's.\n"})
    start = head(root)
    commit_files(root, {".specflow/config.yaml": "retries: 5\nsandbox: {mode: 'off'}\n",
                        ".specflow/agents/code-reviewer.md":
                            "---\nname: code-reviewer\n---\nPLANTED\n"})
    now = find_project(root)
    assert now.config.retries == 5  # a new run reads the checkout's file
    pinned = now.pinned(start, None)  # a record without settings: the start commit's file
    assert pinned.config.retries == 1 and pinned.config.sandbox.mode == "auto"
    assert config_at(root, start).retries == 1
    recorded = now.pinned(start, {"retries": 2})
    assert recorded.config.retries == 2
    from agentrun.review.reviewer import reviewer_agent

    assert reviewer_agent(pinned.overrides_root).system_prompt == "The user's.\n"
    assert reviewer_agent(Project(root).overrides_root).system_prompt == "PLANTED\n"  # HEAD's
    # the working tree is never read: an uncommitted edit does not count either
    (root / ".specflow/agents/code-reviewer.md").write_text(
        "---\nname: code-reviewer\n---\nUNCOMMITTED\n")
    assert "UNCOMMITTED" not in reviewer_agent(pinned.overrides_root).system_prompt
