"""No module of the package imports, directly or through others, a module that imports it
back: arrows point one way. Nor does any package (a folder of agentrun, or a module at its top
level): the layers of docs/ARCHITECTURE.md. Imports inside functions and under TYPE_CHECKING
count too, since they hide a cycle rather than break it."""

from __future__ import annotations

import ast
import functools
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


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (a package's own parents left out: importing
    `agentrun.tools.policy` runs `agentrun.tools` first whoever asks)."""
    modules = _module_names()
    return {name: {m for m in _imports(path, modules)
                   if m != name and not name.startswith(m + ".")}
            for name, path in modules.items()}


def package_of(module: str) -> str:
    """`agentrun.run.land` -> `run`; `agentrun.worker` -> `worker`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, imported in import_graph().items():
        mine = package_of(module)
        graph.setdefault(mine, set()).update(
            p for p in map(package_of, imported) if p != mine)
    return graph


def test_the_graph_sees_the_package():
    graph = import_graph()
    assert "agentrun.tools.agent_tools" in graph["agentrun.tools.registry"]
    assert "agentrun.agent.subagent" in graph["agentrun.agent.conversation"]
    packages = package_graph()
    assert {"agent", "providers", "core"} <= packages["executors"]
    assert packages["core"] == set()  # the bottom of the picture


def test_no_import_cycles():
    try:
        tuple(graphlib.TopologicalSorter(import_graph()).static_order())
    except graphlib.CycleError as exc:
        raise AssertionError(f"import cycle: {' -> '.join(exc.args[1])}") from None


def test_no_package_import_cycles():
    try:
        tuple(graphlib.TopologicalSorter(package_graph()).static_order())
    except graphlib.CycleError as exc:
        raise AssertionError(f"package import cycle: {' -> '.join(exc.args[1])}") from None


def test_the_architecture_picture_is_true():
    """docs/ARCHITECTURE.md draws the packages in rows, arrows pointing down: every package is
    in it, and none imports a package of a row above its own."""
    text = (PACKAGE.parent / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    picture = text.split("## The packages and their seams", 1)[1].split("```")[1]
    rows = [line.split("  ")[0].split(" · ") for line in picture.strip().splitlines()]
    row_of = {name.strip(): i for i, names in enumerate(rows) for name in names}
    graph = package_graph()
    assert set(graph) - {"agentrun", "__main__"} <= set(row_of), "packages missing from the picture"
    upward = [f"{a} -> {b}" for a, imported in graph.items() for b in imported
              if a in row_of and row_of[b] < row_of[a]]
    assert not upward, f"imports up the picture: {upward}"
