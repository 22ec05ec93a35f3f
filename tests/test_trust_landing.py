"""What a sandboxed worker commits runs nothing outside the sandbox, writes nothing of
agentrun's, and clobbers nothing of the user's — through `agentrun run`, the scripted model,
the real bubblewrap and real git (the variants one by one: test_git_fixed_config.py,
test_merge_policy.py, test_landing_guard.py)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from clirun import agentrun
from gitutil import run_git
from runkit import command, make_project, scripted, spec_text, writes

GROUPS = [("G1", [], "src/a.py"), ("G2", [], ".env"), ("G3", [], "src/c.py"),
          ("G4", [], "src/d.py"), ("G5", [], "src/e.py")]


def python(script: str) -> dict:
    """A command that does what the command policy (a guardrail for accidents, not the
    boundary) would refuse if spelled as `ln` or a redirection."""
    return command(f"python3 -c {shlex.quote(script)}")


def test_a_workers_tree_runs_nothing_of_its_own_and_clobbers_nothing(tmp_path):
    """One run, one door per group. G1's plain work lands. G2 un-ignores `.env` and commits
    one where the user keeps an ignored `.env`: the merge is refused, the user's file kept.
    G3 commits a symlink named `.specflow/runs` (which a merge would put where the live run
    record is): path_denied. G4 checks out a repository where the user's submodule goes, its
    config running a command on `git status`/`git add`, and adds a repository of its own:
    agentrun commits without running it, the new gitlink is path_denied. G5 commits a symlink
    out of the repository and a nested `.specflow/config.yaml`: path_denied, both named.
    Then plain git shows each attack was live: its status runs G4's command, its merges
    overwrite `.env` and replace the run record."""
    marker = tmp_path / "payload-ran"
    evil = f"sh -c 'echo ran >> {marker}; cat'"
    nested = ("sha=$(git rev-parse HEAD:vendor/lib) && "  # the commit the submodule records
              "git clone -q --no-checkout . vendor/lib && cd vendor/lib && "
              "git checkout -q --detach $sha && "
              f"git config filter.evil.clean {shlex.quote(evil)} && "
              f"git config core.fsmonitor {shlex.quote(evil)} && "
              "echo '* filter=evil' > .gitattributes && echo '# fixturE' > README.md && "
              "cd ../.. && git init -q tools/x && cd tools/x && echo y > y && git add y && "
              "git -c user.name=w -c user.email=w@x commit -q -m x")
    script = {"groups": {
        "G1": writes("src/a.py", "A = 1\n"),
        "G2": [writes(".gitignore", ".specflow/runs/\n")[0],
               *writes(".env", "EVIL=1\n")],
        "G3": [python("import os; os.makedirs('.specflow', exist_ok=True); "
                      "os.symlink('../../elsewhere', '.specflow/runs')"),
               *writes("src/c.py", "C = 3\n")],
        "G4": [command(nested), *writes("src/d.py", "D = 4\n")],
        "G5": [python("import os; os.symlink('../../../../../../etc', 'etc-link'); "
                      "os.makedirs('docs/.specflow'); "
                      "open('docs/.specflow/config.yaml', 'w').write('sandbox: off')"),
               *writes("src/e.py", "E = 5\n")],
    }}
    root = make_project(tmp_path / "p", "SPEC-90", spec_text("SPEC-90", GROUPS), script,
                        files={".gitignore": ".specflow/runs/\n.env\n"})
    sha = run_git(root, "rev-parse", "HEAD")
    run_git(root, "update-index", "--add", "--cacheinfo", f"160000,{sha},vendor/lib")
    run_git(root, "commit", "-q", "-m", "a submodule")
    (root / "vendor/lib").mkdir(parents=True)  # not initialised, as after a plain clone
    (root / ".env").write_text("SECRET=mine\n")

    proc = agentrun("run", "SPEC-90", *scripted("--retries", "0"), cwd=root)
    assert proc.returncode == 1, proc.stderr
    assert "groups" in proc.json, (proc.stdout, proc.stderr)
    groups = proc.json["groups"]
    run_dir = Path(proc.json["run_dir"])
    assert groups["G1"]["status"] == "complete"
    assert run_git(root, "show", "HEAD:src/a.py") == "A = 1"
    # G2: not merged, the user's ignored file untouched
    assert groups["G2"]["status"] == "failed"
    assert "writes .env, which the checkout holds untracked or ignored" in groups["G2"]["error"]
    assert (root / ".env").read_text() == "SECRET=mine\n"
    # G3: path_denied; the run record is where it was, whole
    assert groups["G3"]["error"].startswith("not merged: path_denied: .specflow/runs (")
    assert not (root / ".specflow/runs").is_symlink()
    events = [json.loads(line) for line in (run_dir / "events.ndjson").read_text().splitlines()]
    assert [e["type"] for e in events][::len(events) - 1] == ["run_start", "run_done"]
    # G4: nothing ran; its own repository is refused by name, the submodule left alone
    assert not marker.exists()
    assert "path_denied: tools/x (a gitlink" in groups["G4"]["error"]
    # G5: both named (the group's error names the first and counts the rest)
    assert "path_denied: docs/.specflow/config.yaml (under .specflow/" in groups["G5"]["error"]
    assert "(and 1 more)" in groups["G5"]["error"]
    assert any("path_denied: etc-link (a symlink to '../../../../../../etc', outside" in d
               for d in groups["G5"]["deviations"])
    denied = {e["path"] for e in events if e["type"] == "protected_change"
              and e["kind"] == "path_denied"}
    assert denied == {".specflow/runs", "tools/x", "etc-link", "docs/.specflow/config.yaml"}
    summary = (root / ".specflow/specs/SPEC-90.md").read_text().split("## Execution Summary")[1]
    assert "path_denied: .specflow/runs" in summary and "path_denied: tools/x" in summary

    # the positive controls: each attack was live
    run_git(Path(groups["G4"]["worktree"]), "status", "--porcelain")
    assert marker.exists()
    run_git(root, "merge", "--no-ff", "-q", "-m", "plain", groups["G2"]["branch"])
    assert (root / ".env").read_text() == "EVIL=1\n"
    run_git(root, "merge", "--no-ff", "-q", "-m", "plain", groups["G3"]["branch"])
    assert (root / ".specflow/runs").is_symlink() and not run_dir.exists()
