"""`agentrun --help` (and every command's start) stays fast: it loads no SDK, no validation
or parsing library and none of agentrun's heavier rooms; each is imported where it is used."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("anthropic", "openai", "pydantic", "yaml", "rich", "opentelemetry", "tiktoken",
         "jinja2", "markdown_it", "agentrun.spec", "agentrun.plan", "agentrun.core.events",
         "agentrun.run", "agentrun.agent", "agentrun.providers")

PROBE = """
import contextlib, io, json, sys
sys.argv = ["agentrun", *sys.argv[1:]]
from agentrun.cli.app import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main()
    except SystemExit:
        pass
print(json.dumps(sorted(sys.modules)))
"""


def loaded(*args: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True,
                          timeout=60, check=True)
    return json.loads(proc.stdout.splitlines()[-1])


def test_help_loads_nothing_heavy():
    modules = loaded("--help")
    assert "agentrun.cli.run_cmd" in modules  # the control: the commands were registered
    assert [m for m in modules if m.startswith(HEAVY)] == []
