"""No module of the package imports, directly or through others, a module that imports it
back: arrows point one way. Imports inside functions and under TYPE_CHECKING count too, since
they hide a cycle rather than break it."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "agentrun"


def _module_names() -> dict[str, Path]:
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m in modules}


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (a package's own parents left out: importing
    `agentrun.tools.policy` runs `agentrun.tools` first whoever asks)."""
    modules = _module_names()
    return {name: {m for m in _imports(path, modules)
                   if m != name and not name.startswith(m + ".")}
            for name, path in modules.items()}


def test_the_graph_sees_the_package():
    graph = import_graph()
    assert "agentrun.tools.agent_tools" in graph["agentrun.tools.registry"]
    assert "agentrun.agent.subagent" in graph["agentrun.agent.conversation"]


def test_no_import_cycles():
    try:
        tuple(graphlib.TopologicalSorter(import_graph()).static_order())
    except graphlib.CycleError as exc:
        raise AssertionError(f"import cycle: {' -> '.join(exc.args[1])}") from None
