"""Fuzzed specs: any text gives a Spec or a SpecError, and edits stay lossless."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentrun.core.errors import SpecError
from agentrun.spec import load_spec, parse_spec
from agentrun.spec.markdown import norm_title
from agentrun.spec.writeback import (
    append_to_section,
    next_audit_version,
    set_frontmatter_value,
    upsert_section,
)

FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

TITLES = ["Context", "Task", "Requirements", "Acceptance Criteria", "Implementation Tasks",
          "Task Groups", "Execution Plan", "Audit History", "Execution Summary",
          "Files to Create", "Files to Modify", "Files to Create/Modify", "Audit v1",
          "Audit v12 (2026-01-01)", "Wave 1", "Wave 2: G3, G4", "G1: Models (depends on G2)",
          "Group 3 — Parser (depends on G1-G5)", "G2-S1: part", "g04: Docs", "Constraints",
          "G2a: first half", "G2b: second half (depends on G2a)", "G3B: Docs (depends on G2b)"]
CELLS = ["G1", "G2", "g3", "G02", "Group 4", "G2-S1", "G3-S2", "—", "–", "--", "-", "None",
         "N/A", "", "G1, G2", "G1-G5", "G1–G99999999", "G1..G3", "G2 and G3", "G2; G4", "S1",
         "1", "2", "Wave 3", "~20%", "`src/a.py`", "**bold** `x/y.md`<br>two; three",
         "<br>", "\\|", "`;`", "é漢字🙂", "G1-3", "0", "G000000000000000001", "G2a", "G2b",
         "g2B", "G2a, G2b", "G2b-S1", "G2abc", "G2a-G2c"]
HEADERS = ["Group", "Wave", "Tasks", "Dependencies", "Est. Context", "Cumulative", "Segment",
           "Groups", "Parallel?", "Depends on", "ID", "Title", "File", "Action", "#", ""]
LINES = ["---", "```", "~~~", "```yaml", "````", "id: SPEC-F", "status: [draft", "key: value",
         ": :", "- a", "created: 2026-13-45", "loop: &a [*a]", "title: x", "- [ ] criterion",
         "- [x] done", "1. **Name**: text", "* bullet", "  - nested", "> quote", "> ## quoted",
         "**Dependencies:** G1", "Depends on: G1-G3", "**Wave:** 2", "Est. Context: ~5%",
         "Wave 1: [G1, G2]", "Wave 2: G3 (needs G1), G4", "**Files to Create:**",
         "**Files to Modify:** `a/b.py`", "=====", "-----", "    indented code", "<details>",
         "| a | b |", "|---|---|", "\t\tG1", "\ufeff", "\x00", "\u2028", "[x]: http://x"]

heading = st.builds(lambda n, t: "#" * n + " " + t, st.integers(1, 6),
                    st.one_of(st.sampled_from(TITLES), st.text(max_size=20)))
row = st.lists(st.one_of(st.sampled_from(CELLS), st.text(max_size=8)), min_size=1, max_size=7)


@st.composite
def table(draw):
    header = draw(st.lists(st.sampled_from(HEADERS), min_size=1, max_size=7))
    rows = draw(st.lists(row, max_size=5))
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


@st.composite
def fence(draw):
    marker = draw(st.sampled_from(["```", "~~~", "````"]))
    info = draw(st.sampled_from(["", "yaml", "yml", "markdown", "text"]))
    body = draw(st.lists(st.one_of(st.sampled_from(LINES), heading, table()), max_size=4))
    close = draw(st.booleans())
    return "\n".join([marker + info, *body] + ([marker] if close else []))


piece = st.one_of(
    heading, table(), fence(), st.sampled_from(LINES), st.sampled_from([""] * 3),
    st.text(max_size=30),
    st.binary(max_size=30).map(lambda b: b.decode("utf-8", "replace")),
    st.binary(max_size=30).map(lambda b: b.decode("latin-1")),
)


@st.composite
def spec_text(draw):
    text = "\n".join(draw(st.lists(piece, max_size=25)))
    return text.replace("\n", draw(st.sampled_from(["\n", "\n", "\r\n", "\r"])))


def check_spec(spec) -> None:
    data = json.loads(json.dumps(spec.to_dict()))
    n = len(re.split(r"\r\n?|\n", spec.text))
    for sec in spec.sections:
        assert sec.level in (2, 3) and 0 <= sec.start < sec.end <= n
    for g in spec.groups:
        assert re.fullmatch(r"G\d+[a-z]?", g.id) and g.line and g.line >= 1
        assert g.id not in g.dependencies
        assert all(re.fullmatch(r"G\d+[a-z]?", d) for d in g.dependencies)
        assert g.declared_wave == spec.declared_waves.get(g.id)
    assert len({g.id for g in spec.groups}) == len(spec.groups)
    assert all(isinstance(w, int) for w in data["declared_waves"].values())
    assert all(c.line and c.line >= 1 for c in spec.acceptance_criteria)


@FUZZ
@given(spec_text())
def test_any_text_gives_a_spec_or_a_spec_error(text):
    try:
        spec = parse_spec(text, "SPEC-F.md")
    except SpecError as exc:
        assert exc.message and exc.hint
        return
    check_spec(spec)


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.binary(max_size=200), spec_text().map(lambda t: t.encode("utf-8"))))
def test_any_file_gives_a_spec_or_a_spec_error(data):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "SPEC-F.md"
        path.write_bytes(data)
        try:
            spec = load_spec(path)
        except SpecError as exc:
            assert exc.message and exc.hint and exc.path == str(path)
            return
        assert spec.text.encode("utf-8") == data
        check_spec(spec)


def _lines(text: str) -> list[str]:
    return re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z", text)


@FUZZ
@given(spec_text(), st.text(max_size=40))
def test_section_edits_never_crash_and_keep_other_bytes(text, body):
    version = next_audit_version(text)
    assert version >= 1
    out = upsert_section(text, "Execution Summary", body)
    appended = append_to_section(text, "Audit History", f"### Audit v{version}\n{body}")
    assert isinstance(appended, str)
    try:
        spec = parse_spec(text)
    except SpecError:
        return
    existing = [s for s in spec.sections
                if s.level == 2 and norm_title(s.title) == "execution summary"]
    lines = _lines(text)
    if not existing:
        kept = lines
        while kept and not kept[-1].strip():
            kept = kept[:-1]
        assert out.startswith("".join(kept).rstrip("\r\n"))
        return
    sec = existing[0]
    head = "".join(lines[:sec.start]) + lines[sec.start].rstrip("\r\n")
    assert out.startswith(head)
    if sec.end < len(lines):  # the next heading and everything after it are untouched
        assert out.endswith("".join(lines[sec.end:]))


SAFE_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="`\x00",
                                           exclude_categories=("Cs",)), max_size=30)
# PyYAML's own dumper does not round-trip these, so they appear only in the value we write
DUMPABLE = SAFE_TEXT.filter(lambda s: not any(c in s for c in "\x85\u2028\u2029"))


@FUZZ
@given(
    extra=st.dictionaries(st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True),
                          st.one_of(st.integers(), st.booleans(), DUMPABLE,
                                    st.lists(DUMPABLE, max_size=3)), max_size=4),
    style=st.sampled_from(["leading", "after_heading", "fenced"]),
    key=st.sampled_from(["status", "priority", "todo"]),
    value=SAFE_TEXT,
    body=st.lists(st.one_of(heading, table(), st.sampled_from(LINES[15:])), max_size=10),
    eol=st.sampled_from(["\n", "\r\n"]),
)
def test_set_frontmatter_value_round_trips_in_every_style(extra, style, key, value, body, eol):
    meta = {"id": "SPEC-F", **{k: v for k, v in extra.items() if k != "id"}}
    dumped = yaml.safe_dump(meta, allow_unicode=True, sort_keys=False)
    opener, closer = {"leading": ("---\n", "---\n"),
                      "after_heading": ("# Title\n\n> blurb\n\n---\n", "---\n"),
                      "fenced": ("# Title\n\n```yaml\n", "```\n")}[style]
    rest = "\n## Context\n\n" + "\n".join(body) + "\n"
    text = (opener + dumped + closer + rest).replace("\n", eol)
    before = parse_spec(text)
    assert before.frontmatter_style == style and before.frontmatter == meta
    out = set_frontmatter_value(text, key, value)
    after = parse_spec(out)
    assert after.frontmatter_style == style
    assert after.frontmatter == {**meta, key: value}
    assert out.startswith(opener.replace("\n", eol))
    assert out.endswith((closer + rest).replace("\n", eol))


# --- group ids with suffixes, in every shape a spec may use ----------------------------------

def _ids(draw) -> list[str]:
    """G1, G2, ... where some groups are split in two or three (`G2a`, `G2b`)."""
    ids: list[str] = []
    for n in range(1, draw(st.integers(1, 5)) + 1):
        parts = draw(st.integers(0, 3))
        ids += [f"G{n}"] if parts < 2 else [f"G{n}{chr(97 + i)}" for i in range(parts)]
    return ids


def _shape(ids: list[str], deps: dict[str, list[str]], shape: str, case) -> str:
    def cell(d: list[str]) -> str:
        return ", ".join(case(x) for x in d) if d else "—"

    if shape == "table":
        rows = [f"| {case(g)} | Do {g} in `src/{g}.py` | {cell(deps[g])} |" for g in ids]
        return "\n".join(["### Task Groups", "", "| Group | Tasks | Dependencies |",
                          "|---|---|---|", *rows])
    blocks = []
    for g in ids:
        if shape == "heading":
            tail = f" (depends on {cell(deps[g])})" if deps[g] else ""
            blocks.append(f"### {case(g)}: Part {g}{tail}\n\n- [ ] Do {g} in `src/{g}.py`\n")
        else:
            blocks.append(f"### {case(g)}: Part {g}\n\n**Dependencies:** {cell(deps[g])}\n\n"
                          f"- [ ] Do {g} in `src/{g}.py`\n")
    return "\n".join(blocks)


@FUZZ
@given(st.data(), st.sampled_from(["table", "heading", "line"]),
       st.sampled_from([str, str.upper, lambda g: g.replace("G", "Group ")]))
def test_suffixed_group_ids_parse_the_same_in_every_shape(data, shape, case):
    ids = _ids(data.draw)
    deps = {g: sorted(data.draw(st.sets(st.sampled_from(ids[:i]))) if i else set(),
                      key=ids.index) for i, g in enumerate(ids)}
    text = (f"---\nid: SPEC-F\n---\n# Fuzz\n\n## Task\n\nWork.\n\n"
            f"## Implementation Tasks\n\n{_shape(ids, deps, shape, case)}\n")
    spec = parse_spec(text, Path("SPEC-F.md"))
    assert [g.id for g in spec.groups] == ids
    assert {g.id: g.dependencies for g in spec.groups} == deps
