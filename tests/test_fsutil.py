"""Atomic writes and what a killed write leaves behind."""

from __future__ import annotations

from pathlib import Path

from agentrun.core.fsutil import atomic_write_text, remove_stale_temps


def test_stale_temps_of_a_killed_write_go_and_nothing_else_does(tmp_path):
    state = tmp_path / "SPEC-1-state.json"
    atomic_write_text(state, "{}\n")
    stale = [tmp_path / ".SPEC-1-state.json.z91d9fx3.tmp",
             tmp_path / ".SPEC-1-state.json.a_b0c1d2.tmp"]
    kept = [tmp_path / ".SPEC-1-state.json.draft.tmp",       # not a temp name of ours
            tmp_path / ".SPEC-2-state.json.z91d9fx3.tmp",    # another file's
            tmp_path / ".SPEC-1-state.json.z91d9fx3.tmp.bak",
            tmp_path / "SPEC-1-state.json.z91d9fx3.tmp"]
    for path in stale + kept:
        path.write_text("half")
    assert sorted(remove_stale_temps(state)) == sorted(stale)
    assert not any(p.exists() for p in stale)
    assert all(p.read_text() == "half" for p in kept)
    assert state.read_text() == "{}\n"


def test_a_linked_file_has_its_stale_temps_beside_the_target(tmp_path):
    target = tmp_path / "shared" / "STATE.md"
    target.parent.mkdir()
    target.write_text("# State\n")
    link = tmp_path / "STATE.md"
    link.symlink_to(target)
    (target.parent / ".STATE.md.00000000.tmp").write_text("half")
    (tmp_path / ".STATE.md.11111111.tmp").write_text("not beside the file we write")
    assert remove_stale_temps(Path(link)) == [target.parent / ".STATE.md.00000000.tmp"]
    assert (tmp_path / ".STATE.md.11111111.tmp").exists()
