"""No module of agentrun is over 400 lines. A module that grows past that does more than one
job: split it by job, each part named for what it does (docs/ARCHITECTURE.md, "The packages
and their seams")."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "agentrun"
LIMIT = 400


def too_long(root: Path, limit: int = LIMIT) -> list[str]:
    """Every Python module under `root` with more than `limit` lines, with its count."""
    found = []
    for path in sorted(root.rglob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            found.append(f"{path.relative_to(root).as_posix()}: {lines} lines")
    return found


def test_the_measure_flags_a_module_one_line_over_the_limit(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "long.py").write_text("x = 1\n" * (LIMIT + 1), encoding="utf-8")
    (tmp_path / "full.py").write_text("x = 1\n" * LIMIT, encoding="utf-8")
    assert too_long(tmp_path) == [f"pkg/long.py: {LIMIT + 1} lines"]


def test_no_module_is_over_400_lines() -> None:
    assert len(list(PACKAGE.rglob("*.py"))) > 100  # the whole package was measured
    over = too_long(PACKAGE)
    assert over == [], "split these modules by job: " + ", ".join(over)
