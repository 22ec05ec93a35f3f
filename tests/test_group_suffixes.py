"""Groups split in two (`G2a`, `G2b`) plan and run like any other group, through the CLI."""

from __future__ import annotations

from clirun import agentrun
from runkit import make_project, scripted, spec_text, writes

SPLIT = [("G1", [], "src/a.py"), ("G2a", [], "src/b1.py"), ("G2b", ["G2a"], "src/b2.py"),
         ("G3", ["G2b", "G1"], "src/c.py")]


def test_a_spec_with_suffixed_groups_plans_and_runs(tmp_path):
    script = {"groups": {gid: writes(path, f"# {gid}\n") for gid, _, path in SPLIT}}
    root = make_project(tmp_path / "p", "SPEC-40", spec_text("SPEC-40", SPLIT), script)

    plan = agentrun("plan", "SPEC-40", "--json", cwd=root)
    assert plan.returncode == 0, plan.stderr
    assert [w["groups"] for w in plan.json["plan"]["waves"]] == [["G1", "G2a"], ["G2b"], ["G3"]]

    run = agentrun("run", "SPEC-40", *scripted(), cwd=root)
    assert run.returncode == 0, run.stderr
    assert {gid: g["status"] for gid, g in run.json["groups"].items()} == {
        gid: "complete" for gid, _, _ in SPLIT}
    assert all((root / path).read_text() == f"# {gid}\n" for gid, _, path in SPLIT)
