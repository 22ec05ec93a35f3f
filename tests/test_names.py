"""Each type name means one thing across the package: a class (or a type alias) is defined in
one module only, so that `Verdict` in one room is never another `Verdict` in the next.

The commands' option declarations (`Annotated[..., typer.Option(...)]` in agentrun/cli/) are
exempt: each command declares its own flags, and two commands' `--start-commit` are the same
flag with help text of their own.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "agentrun"


def is_option_declaration(path: Path, value: ast.expr | None) -> bool:
    """`Opt = typer.Option`, or an alias whose value calls typer's Option or Argument."""
    if path.parent.name != "cli" or value is None:
        return False
    calls = {ast.unparse(node.func) for node in ast.walk(value) if isinstance(node, ast.Call)}
    return ast.unparse(value).startswith("typer.") or bool(
        calls & {"Opt", "CIOpt", "typer.Option", "typer.Argument"})


def type_names(path: Path, tree: ast.Module) -> list[str]:
    """The public classes and capitalised module-level aliases a module defines."""
    names = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if isinstance(target, ast.Name) and target.id[:1].isupper() \
                    and not target.id.isupper() \
                    and not is_option_declaration(path, node.value):
                names.append(target.id)
    return [name for name in names if not name.startswith("_")]


def definitions(files: list[Path]) -> dict[str, list[str]]:
    where: dict[str, list[str]] = defaultdict(list)
    for path in files:
        for name in type_names(path, ast.parse(path.read_text(encoding="utf-8"))):
            where[name].append(str(path.relative_to(PACKAGE.parent)))
    return where


def test_every_type_name_is_defined_once(tmp_path):
    # the measure finds a name defined twice (and skips a command's option declaration)
    (tmp_path / "cli").mkdir()
    (tmp_path / "a.py").write_text("class Verdict:\n    pass\nMode = str\n")
    (tmp_path / "b.py").write_text("from typing import Literal\nVerdict = Literal['x']\n")
    (tmp_path / "cli" / "c.py").write_text("Start = Annotated[str, typer.Option('--s')]\n")
    (tmp_path / "cli" / "d.py").write_text("Start = Annotated[str, Opt('--s')]\n")
    control: dict[str, int] = defaultdict(int)
    for path in sorted(tmp_path.rglob("*.py")):
        for name in type_names(path, ast.parse(path.read_text())):
            control[name] += 1
    assert control == {"Verdict": 2, "Mode": 1}

    twice = {name: paths for name, paths in definitions(sorted(PACKAGE.rglob("*.py"))).items()
             if len(paths) > 1}
    assert twice == {}
