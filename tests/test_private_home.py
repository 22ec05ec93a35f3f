"""A worker's private HOME for its commands is removed when the worker ends."""

from __future__ import annotations

from pathlib import Path

from clirun import agentrun
from runkit import command, make_project, scripted, spec_text, writes

USE_HOME = ("echo \"$HOME\" > home.txt; "
            "python3 -c \"import os; open(os.environ['HOME'] + '/x', 'w')\"")


def test_the_private_home_is_gone_after_the_run(tmp_path):
    write, *finish = writes("src/a.py", "A = 1\n")
    script = {"groups": {"G1": [write, command(USE_HOME), *finish]}}
    spec = spec_text("SPEC-76", [("G1", [], "src/a.py")])
    root = make_project(tmp_path / "p", "SPEC-76", spec, script)
    proc = agentrun("run", "SPEC-76", *scripted("--sandbox", "off"), cwd=root)
    assert proc.returncode == 0, proc.stderr
    home = Path((root / "home.txt").read_text().strip())
    assert home.name.startswith("agentrun-home-") and not home.exists()
