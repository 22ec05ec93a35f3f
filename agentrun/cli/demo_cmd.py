"""`agentrun demo`: the bundled example project, run end to end offline."""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import typer

from agentrun.cli.common import JSON_OPT, output

DEMO_SPEC = "SPEC-002"


def demo(
    directory: Path | None = typer.Option(None, "--dir",
                                          help="Where to create the demo project "
                                               "(default: a new temporary directory)."),
    spec: str = typer.Option(DEMO_SPEC, "--spec", help="Which example spec to run."),
    json_out: bool = JSON_OPT,
) -> None:
    """Copy the example project into a fresh git repository and run a spec with the bundled
    script (scripted provider: offline, no API key)."""
    from agentrun.app.requests import RunFlags
    from agentrun.cli.run_cmd import execute
    from agentrun.core.errors import BadInput
    from agentrun.gitcli import git
    from agentrun.resources import packaged_dir
    from agentrun.worktrees import stage_all

    out = output(json_out)
    target = (directory or Path(tempfile.mkdtemp(prefix="agentrun-demo-"))).resolve()
    if target.exists() and any(target.iterdir()):
        raise BadInput(f"demo directory is not empty: {target}",
                       hint="pass --dir with a new or empty directory")
    shutil.copytree(packaged_dir("example"), target, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache", ".keep"))
    identity = ["-c", "user.name=agentrun demo", "-c", "user.email=demo@agentrun.invalid",
                "-c", "commit.gpgsign=false"]
    git("init", "-q", "-b", "main", cwd=target)
    stage_all(target)
    git(*identity, "commit", "-q", "-m", "Example project", cwd=target)
    out.progress(f"demo project: {target}")
    validation = None
    if importlib.util.find_spec("pytest") is None:
        # The example validates with its pytest suite; without pytest installed the demo still
        # checks that every module compiles, and says so.
        validation = "python -m compileall -q textkit tests"
        out.warn("pytest is not installed here: the demo validates with `python -m compileall`"
                 " instead of the example's tests (`pip install pytest` for the real check)")

    cwd = Path.cwd()
    os.chdir(target)
    try:
        code = execute(f".specflow/specs/{spec}.md", out, RunFlags(
            yes=True, on_failure="continue", provider="scripted",
            script=Path(".specflow/demo-script.yaml"), validation_command=validation))
    finally:
        os.chdir(cwd)
    if out.mode != "json":
        log = git("log", "--oneline", "--graph", "-n", "20", cwd=target)
        out.stdout.print("\nCommits on main:\n" + log)
        out.stdout.print(f"Explore: cd {target} && git log --stat && "
                         f"cat .specflow/STATE.md .specflow/specs/{spec}.md")
    raise typer.Exit(code)
