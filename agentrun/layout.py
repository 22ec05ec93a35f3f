"""Where a project's code is imported from, so that commands in a worktree test that worktree.

A worker's worktree is a second checkout of the project. Python finds the project's packages
through `sys.path`: an editable install (`pip install -e .`) points it at the *main* checkout's
folder, so a worker's validation would import the main code, not the worker's change (and
in the sandbox, where the main checkout may be out of sight, nothing at all). Commands in a
worktree therefore get that worktree's source folders first on `PYTHONPATH` (before every
site-packages entry and `.pth` path): `src/` for a src layout, the folders `pyproject.toml`
or `setup.cfg` name, the worktree itself for a flat layout.

What cannot be arranged this way is found up front by `init` and `run`: an editable install
that maps packages to a folder of the checkout no rule here finds (`import_advice`), and a
JavaScript project whose `node_modules` the worktrees do not get (`node_advice`).

A worktree's files are the worker's: they are read bounded (a few hundred KB of
configuration at most), and only paths inside the worktree are ever put on the path.
"""

from __future__ import annotations

import ast
import configparser
import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

MAX_CONFIG_BYTES = 256 * 1024  # pyproject.toml / setup.cfg larger than this are not read
_PYTHON_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg")
_SRC = "src"


def python_source_roots(root: Path) -> list[str]:
    """The folders (relative to `root`, "." for root itself) that hold the project's
    importable Python code: named by `pyproject.toml` or `setup.cfg`, else a `src/` that holds
    a package or module, else the root of a Python project or one with a top-level package."""
    root = Path(root)
    found = _configured_roots(root)
    if not found and _holds_python(root / _SRC):
        found = [_SRC]
    if not found and (any(_is_file(root / m) for m in _PYTHON_MARKERS)
                      or _holds_python(root, packages_only=True)):
        found = ["."]
    return found


def import_env(worktree: Path, env: Mapping[str, str]) -> dict[str, str]:
    """The variables to add to `env` for a command run in `worktree`: PYTHONPATH with the
    worktree's source folders first (before whatever `env` had); empty for no Python code."""
    worktree = Path(worktree)
    roots = [str(worktree if r == "." else worktree / r) for r in python_source_roots(worktree)]
    if not roots:
        return {}
    kept = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in roots]
    return {"PYTHONPATH": os.pathsep.join([*roots, *kept])}


# -- what the project's configuration says ----------------------------------------------------

def _configured_roots(root: Path) -> list[str]:
    roots: list[str] = []
    data = _toml(root / "pyproject.toml")
    tool = _table(data, "tool")
    setuptools = _table(tool, "setuptools")
    package_dir = setuptools.get("package-dir")
    if isinstance(package_dir, dict) and isinstance(package_dir.get(""), str):
        roots.append(package_dir[""])
    roots += _strings(_table(_table(setuptools, "packages"), "find").get("where"))
    hatch = _table(_table(tool, "hatch"), "build")
    roots += _strings(hatch.get("dev-mode-dirs"))
    wheel = _table(_table(hatch, "targets"), "wheel")
    roots += [str(Path(p).parent) for p in _strings(wheel.get("packages"))]
    poetry = _table(tool, "poetry")
    listed = poetry.get("packages")
    packages: list[Any] = listed if isinstance(listed, list) else []
    roots += [p["from"] for p in packages if isinstance(p, dict) and isinstance(p.get("from"),
                                                                                  str)]
    pdm = _table(_table(tool, "pdm"), "build")
    if isinstance(pdm.get("package-dir"), str):
        roots.append(pdm["package-dir"])
    roots += _setup_cfg_roots(root / "setup.cfg")
    return [r for r in dict.fromkeys(_clean(r) for r in roots) if r is not None
            and (root / r).is_dir()]


def _setup_cfg_roots(path: Path) -> list[str]:
    text = _read(path)
    if not text:
        return []
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return []
    roots = []
    value = parser.get("options", "package_dir", fallback="")
    for line in value.splitlines():
        key, _, folder = line.partition("=")
        if not key.strip() and folder.strip():
            roots.append(folder.strip())
    where = parser.get("options.packages.find", "where", fallback="").strip()
    if where:
        roots.append(where)
    return roots


def _clean(folder: str) -> str | None:
    """`folder` as a relative path inside the project ("." for its root), or None when it
    is absolute or leaves it."""
    path = Path(folder.strip())
    if not folder.strip() or path.is_absolute() or ".." in path.parts:
        return None
    return path.as_posix() if path.parts else "."


def _toml(path: Path) -> dict[str, Any]:
    text = _read(path)
    try:
        return tomllib.loads(text) if text else {}
    except tomllib.TOMLDecodeError:
        return {}


def _read(path: Path) -> str:
    """A small regular file's text ("" for anything else): the worker wrote it."""
    if not _is_file(path):
        return ""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError:
        return ""
    return "" if len(data) > MAX_CONFIG_BYTES else data.decode("utf-8", errors="replace")


def _is_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def _table(data: object, key: str) -> dict[str, Any]:
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, dict) else {}


def _strings(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _holds_python(folder: Path, packages_only: bool = False) -> bool:
    """A folder with a package (`*/__init__.py`) in it, or (unless `packages_only`) a
    module."""
    if not folder.is_dir() or folder.is_symlink():
        return False
    if any(folder.glob("*/__init__.py")):
        return True
    return not packages_only and any(p.suffix == ".py" for p in folder.iterdir())


# -- what `init` and `run` find out ------------------------------------------------------------

def editable_paths(root: Path, environs: Iterable[Path]) -> dict[str, list[Path]]:
    """The folders of `root` that editable installs in the virtualenvs `environs` put on
    Python's path, by the file that does it: a `.pth` line naming a folder, or a setuptools
    finder's package mapping (its packages' parent folders)."""
    root = Path(os.path.realpath(root))
    found: dict[str, list[Path]] = {}
    for site in (s for env in environs for s in Path(env).glob("lib/python*/site-packages")):
        for pth in site.glob("*.pth"):
            for line in _read(pth).splitlines():
                line = line.strip()
                if line.startswith("import "):
                    finder = re.match(r"import (__editable___\w+_finder)\b", line)
                    if finder:
                        found.setdefault(pth.name, []).extend(
                            Path(p).parent for p in _finder_mapping(site / f"{finder[1]}.py"))
                elif line and not line.startswith("#"):
                    found.setdefault(pth.name, []).append(Path(line))
    inside = {}
    for name, paths in found.items():
        kept = [p for p in (Path(os.path.realpath(p)) for p in paths) if p.is_relative_to(root)]
        if kept:
            inside[name] = list(dict.fromkeys(kept))
    return inside


def _finder_mapping(path: Path) -> list[str]:
    """The package folders a setuptools editable finder (`MAPPING = {...}`) maps to."""
    match = re.search(r"^MAPPING\s*(?::[^=]*)?=\s*(\{.*?\})\s*$", _read(path), re.M | re.S)
    try:
        mapping = ast.literal_eval(match[1]) if match else {}
    except (ValueError, SyntaxError):
        return []
    return [v for v in mapping.values() if isinstance(v, str)] if isinstance(mapping, dict) \
        else []


def virtualenvs(root: Path, environ: Mapping[str, str]) -> list[Path]:
    """The virtualenvs a project's commands may use: the active one, and `.venv` / `venv`
    inside the project."""
    found = [Path(environ["VIRTUAL_ENV"])] if environ.get("VIRTUAL_ENV") else []
    found += [Path(root) / name for name in (".venv", "venv")]
    return [p for p in dict.fromkeys(found) if (p / "pyvenv.cfg").is_file()]


def import_advice(root: Path, environ: Mapping[str, str], command: str | None) -> list[str]:
    """What the user must set so that workers' commands import their own worktree's code, one
    line each; empty when agentrun arranges it (or there is nothing to arrange)."""
    root = Path(os.path.realpath(root))
    covered = {root if r == "." else root / r for r in python_source_roots(root)}
    lines = []
    for name, paths in editable_paths(root, virtualenvs(root, environ)).items():
        for path in paths:
            if path in covered:
                continue
            rel = path.relative_to(root).as_posix() or "."
            shown = command or "python -m pytest -q"
            lines.append(f"the editable install in {name} imports {rel}/ from this checkout, "
                         f"not from each worker's worktree: set `validation_command: "
                         f"PYTHONPATH={rel} {shown}` in .specflow/config.yaml")
    return lines


def node_advice(root: Path, copies: Iterable[str], setup: str | None) -> list[str]:
    """A JavaScript project whose `node_modules` (npm workspaces link their packages there)
    the worktrees do not get: what to set, one line."""
    root = Path(root)
    if not (_is_file(root / "package.json") and (root / "node_modules").is_dir()):
        return []
    if setup or any(Path(c).parts[:1] == ("node_modules",) for c in copies):
        return []
    return ["a worktree holds tracked files only, so its commands would find no node_modules: "
            "set `worktree_copy: [node_modules]` (or a `setup_command` such as `npm ci "
            "--offline`) in .specflow/config.yaml"]
