"""Reading the small notations inside cells and lines: group ids, dependency lists, wave
numbers and file paths. Real specs mix `G2, G3`, `G1-G5`, `Group 2`, `G-2`, `G2-S1`, `G2a`/`G2b` (a
group split in two), `—` and `None`."""

from __future__ import annotations

import re

MAX_RANGE = 200  # a wider `G1-G99999` range is taken as its two ends, not expanded

# a group id: its number and an optional one-letter suffix (`G2a`); a letter followed by more
# letters or digits is not a suffix (`G2s1` is segment 1 of G2, `G2abc` is G2 then text). One
# space, `-` or `_` may follow the G (`G 2`, `G-2`, `G_2`), and `Grp 2` is `Group 2`: each is
# plainly group 2, and a row whose id is not read would be work nobody does.
_GID = r"(?:group[\s_-]*|grp[\s_-]*|g[\s_-]?)0*(\d{1,6})(?!\d)(?:([a-z])(?![a-z0-9]))?"
_SEG = r"(?:\s*[-–_./]\s*|\s*\(\s*)?(?:segment|seg|s)\s*0*(\d{1,6})(?!\d)\)?"
_REF = re.compile(rf"(?<![A-Za-z0-9_]){_GID}(?:{_SEG})?", re.I)
_CELL = re.compile(rf"^[\s*_\[(#]*{_GID}(?:{_SEG})?(?![A-Za-z0-9])", re.I)
_MORE_GROUPS = re.compile(rf"\s*(?:[-–—,&/+]|\.\.|and\b|to\b)\s*{_GID}", re.I)
_RANGE_SEP = re.compile(r"\s*(?:-|–|—|\.\.\.?|to|through|thru)\s*", re.I)
_SHORT_RANGE = re.compile(r"\s*(?:-|–|\.\.)\s*0*(\d{1,6})(?![\d\w])")
_INT = re.compile(r"(?<!\d)(\d{1,6})(?!\d)")
_NONE_WORDS = {"", "-", "--", "---", "—", "–", "none", "n/a", "na", "nothing", "no",
               "independent", "no dependencies", "no deps", "(none)"}

_EXT_WORDS = """
py pyi pyx md mdx txt rst adoc json jsonl json5 yaml yml toml ini cfg conf env lock ts tsx js
jsx mjs cjs css scss sass less html htm vue svelte astro rs go mod sum java kt kts scala groovy
cs fs vb c h cc cpp cxx hpp hh hxx m mm swift rb erb php pl pm sh bash zsh fish ps1 bat cmd sql
graphql gql proto xml xsd csv tsv ipynb tf tfvars hcl gradle properties lua r dart ex exs erl
hrl hs ml mli clj cljs edn elm zig nim jl sol cmake mk mak svg png jpg jpeg gif webp ico pdf
j2 jinja jinja2 tpl tmpl hbs mustache liquid ejs pug twig sqlite db pem crt key pub patch diff
log out snap http feature spec nix dockerfile gitignore editorconfig plist xcconfig
"""
_EXTS = frozenset(_EXT_WORDS.split())
_NAMES = frozenset({"Makefile", "Dockerfile", "Containerfile", "Procfile", "Gemfile",
                    "Rakefile", "Justfile", "Vagrantfile", "Jenkinsfile", "README", "LICENSE",
                    "CHANGELOG", "CODEOWNERS", "Brewfile", "Pipfile"})
_NOT_IN_PATH = set(" \t\n:\"'<>|,;=(){}")


def group_id(number: str, suffix: str | None = None) -> str:
    return f"G{int(number)}{(suffix or '').lower()}"


def parse_group_cell(text: str) -> tuple[str, str | None, str] | None:
    """`G2`, `**G02**`, `Group 2`, `G2-S1`, `G2: Title` -> (id, segment or None, rest)."""
    m = _CELL.match(text)
    if m is None or _MORE_GROUPS.match(text, m.end()):
        return None  # `G1-G3`, `G1, G2`: several groups, not one
    segment = f"S{int(m.group(3))}" if m.group(3) else None
    rest = text[m.end():].strip().lstrip("*_").strip()
    rest = re.sub(r"^[:\-–—.)\]]+\s*", "", rest).strip()
    return group_id(m.group(1), m.group(2)), segment, rest


def is_none(text: str) -> bool:
    """Whether a dependency cell says "no dependency" (`—`, `None`, `N/A`, empty, ...)."""
    t = re.sub(r"[*_`]", "", text).strip().lower().rstrip(".")
    return t in _NONE_WORDS or t.split(" ", 1)[0] in {"none", "n/a", "—", "–", "-", "--"}


def _span(a: int, b: int) -> list[int]:
    if a <= b and b - a <= MAX_RANGE:
        return list(range(a, b + 1))
    return [a, b]


def dependency_refs(text: str) -> list[str]:
    """Group ids named in `text`: lists (`G2, G3`, `G2 and G3`, `G2; G3`, `G2 G3`), ranges
    (`G1-G5`, `G1–G5`, `G1..G5`, `G1-5`), suffixed ids (`G2b`) and segments (`G2-S1` means
    G2); de-duplicated. A range is between plain numbers: `G2a-G2b` names its two ends."""
    if is_none(text):
        return []
    ids: list[str] = []
    matches = list(_REF.finditer(text))
    for n, m in enumerate(matches):
        first, suffix = int(m.group(1)), m.group(2)
        plain_end = suffix is None and m.group(3) is None
        nxt = matches[n + 1] if n + 1 < len(matches) else None
        between = text[m.end():nxt.start()] if nxt else ""
        short = _SHORT_RANGE.match(text, m.end()) if plain_end else None
        if nxt is not None and plain_end and nxt.group(2) is None \
                and _RANGE_SEP.fullmatch(between):
            ids.extend(f"G{num}" for num in _span(first, int(nxt.group(1))))
        elif short is not None and (nxt is None or short.end() <= nxt.start()):
            ids.extend(f"G{num}" for num in _span(first, int(short.group(1))))
        else:
            ids.append(group_id(m.group(1), suffix))
    return unique(ids)


def wave_refs(text: str) -> list[str]:
    """Group ids of a wave declaration's list, ignoring parenthetical notes (`G4 (needs G1)`)."""
    kept: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
            kept.append(" ")
        elif depth == 0:
            kept.append(ch)
    return dependency_refs("".join(kept))


def first_int(text: str) -> int | None:
    m = _INT.search(text)
    return int(m.group(1)) if m else None


def looks_like_path(text: str) -> bool:
    """Whether a code span names a file or directory (`src/a.py`, `README.md`, `.env`), as
    opposed to code, a command (`/sf:run`) or a value."""
    s = text.strip()
    if not s or len(s) > 300 or any(c in _NOT_IN_PATH for c in s) or "\\" in s:
        return False
    if s.startswith("-") or not any(c.isalnum() for c in s):
        return False
    if "/" in s:
        return True
    if s.startswith(".") and len(s) > 1 and "." not in s[1:]:
        return s[1:].replace("-", "").replace("_", "").isalnum()
    if "." in s:
        stem, ext = s.rsplit(".", 1)
        return bool(stem) and ext.lower() in _EXTS
    return s in _NAMES


def unique(items: list[str]) -> list[str]:
    out: list[str] = []
    for item in items:
        if item and item not in out:
            out.append(item)
    return out
