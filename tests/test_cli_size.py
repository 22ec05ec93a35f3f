"""The CLI stays a thin face: no function in agentrun/cli/ is over 60 lines. A command parses
its arguments, calls one use case (agentrun/app/) and renders the result; logic that grows past
that belongs below the CLI (docs/ARCHITECTURE.md, "The packages and their seams")."""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[1] / "agentrun" / "cli"
LIMIT = 60


def function_lengths(path: Path) -> list[tuple[str, int]]:
    """Every function and method in `path` (nested ones too), with its length in lines from
    its `def` (decorators aside) to its last line."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(f"{path.name}:{node.lineno} {node.name}", node.end_lineno - node.lineno + 1)
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.end_lineno is not None]


def test_no_cli_function_is_over_60_lines() -> None:
    measured = [m for path in sorted(CLI.glob("*.py")) for m in function_lengths(path)]
    assert len(measured) > 50  # the whole CLI was measured, not an empty folder
    too_long = sorted((f"{name}: {lines} lines" for name, lines in measured if lines > LIMIT))
    assert too_long == [], "move the logic below the CLI (agentrun/app/): " + ", ".join(too_long)


def test_the_measure_counts_every_line_of_a_function(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(LIMIT))
    sample = tmp_path / "sample.py"
    sample.write_text(f"def long():\n{body}\n\nclass C:\n    def short(self):\n        pass\n",
                      encoding="utf-8")
    assert dict(function_lengths(sample)) == {"sample.py:1 long": LIMIT + 1,
                                              "sample.py:65 short": 2}
