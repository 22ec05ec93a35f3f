"""Where a worktree's commands import the project's code from (`agentrun.layout`): the common
Python layouts, what the configuration names, and what `init`/`run` say cannot be arranged."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentrun.layout import (
    import_advice,
    import_env,
    node_advice,
    python_source_roots,
)


def tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize(("files", "roots"), [
    ({"src/calc/__init__.py": "", "tests/test_calc.py": ""}, ["src"]),  # the src layout
    ({"src/calc.py": "", "pyproject.toml": "[project]\nname = 'calc'\n"}, ["src"]),
    ({"calc/__init__.py": "", "tests/test_calc.py": ""}, ["."]),  # flat
    ({"pyproject.toml": "[project]\nname = 'x'\n", "x.py": ""}, ["."]),
    ({"lib/calc/__init__.py": "", "pyproject.toml":
      "[tool.setuptools]\npackage-dir = {'' = 'lib'}\n"}, ["lib"]),
    ({"code/calc/__init__.py": "", "pyproject.toml":
      "[tool.setuptools.packages.find]\nwhere = ['code']\n"}, ["code"]),
    ({"py/calc/__init__.py": "", "pyproject.toml":
      "[tool.hatch.build.targets.wheel]\npackages = ['py/calc']\n"}, ["py"]),
    ({"pkgs/calc/__init__.py": "", "pyproject.toml":
      "[tool.poetry]\npackages = [{include = 'calc', from = 'pkgs'}]\n"}, ["pkgs"]),
    ({"source/calc/__init__.py": "", "setup.cfg":
      "[options]\npackage_dir =\n    =source\n"}, ["source"]),
    # a worktree's configuration is the worker's: nothing outside it goes on the path
    ({"pyproject.toml": "[tool.setuptools]\npackage-dir = {'' = '/etc'}\n"
      "[tool.hatch.build]\ndev-mode-dirs = ['../..']\n"}, ["."]),
    ({"package.json": "{}", "index.js": ""}, []),  # no Python at all
])
def test_source_roots_of_the_common_layouts(tmp_path, files, roots):
    root = tree(tmp_path / "p", files)
    assert python_source_roots(root) == roots
    env = import_env(root, {"PYTHONPATH": "/elsewhere"})
    expected = [str(root if r == "." else root / r) for r in roots]
    assert env == ({"PYTHONPATH": os.pathsep.join([*expected, "/elsewhere"])} if roots else {})


def test_what_cannot_be_arranged_is_named_with_the_setting_to_use(tmp_path):
    root = tree(tmp_path / "p", {"lib/calc/__init__.py": "", "pyproject.toml": "[project]\n",
                                 ".venv/pyvenv.cfg": "home = /usr\n"})
    site = root / ".venv/lib/python3.11/site-packages"
    site.mkdir(parents=True)
    (site / "_calc.pth").write_text(f"{root / 'lib'}\n")  # an editable install of lib/
    [advice] = import_advice(root, {}, "python -m pytest -q")
    assert "imports lib/ from this checkout" in advice
    assert "`validation_command: PYTHONPATH=lib python -m pytest -q`" in advice
    # a setuptools finder mapping the src layout's package: agentrun arranges that one
    (root / "src/calc").mkdir(parents=True)
    (root / "src/calc/__init__.py").write_text("")
    (site / "_calc.pth").write_text("import __editable___calc_0_1_finder; "
                                    "__editable___calc_0_1_finder.install()\n")
    (site / "__editable___calc_0_1_finder.py").write_text(
        f"MAPPING: dict[str, str] = {{'calc': '{root / 'src/calc'}'}}\n")
    assert import_advice(root, {}, None) == []

    js = tree(tmp_path / "js", {"package.json": "{}", "node_modules/.keep": ""})
    [node] = node_advice(js, [], None)
    assert "`worktree_copy: [node_modules]`" in node
    assert node_advice(js, ["node_modules"], None) == node_advice(js, [], "npm ci") == []
