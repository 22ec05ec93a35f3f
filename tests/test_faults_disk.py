"""A nearly full disk, for real: the project lives on a small tmpfs (bubblewrap `--size`), a
filler file takes the space, and agentrun meets ENOSPC wherever it happens to write.

Whatever write fails, the user sees one line naming the file (and the space needed where it is
known), exit 2, no traceback; the checkpoint is never left saying `running`; and once the
filler is gone the run goes on (`--resume`, or afresh when it never started).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from clirun import ENTRY_POINT, cli_env
from runkit import make_project, scripted, spec_text, writes

from agentrun.sandbox.jail import unavailable_reason

REASON = unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None or shutil.which("bwrap") is None,
                                reason=f"bubblewrap unusable: {REASON}")

DISK_BYTES = 4 << 20
FILL = """python3 -c "import os, sys; st = os.statvfs('.'); n = st.f_bavail * st.f_frsize - $1
open('$DISK/filler', 'wb').write(b'x' * max(n, 0))" """


def script(latency: float = 0.0) -> dict:
    return {"groups": {"G1": writes("one.txt", "1\n", latency=latency),
                       "G2": writes("two.txt", "2\n", latency=latency)}}


def project(root: Path, latency: float = 0.0) -> Path:
    groups = [("G1", [], "one.txt"), ("G2", [], "two.txt")]
    return make_project(root, "SPEC-1", spec_text("SPEC-1", groups), script(latency))


def on_small_disk(tmp_path: Path, src: Path, steps: str) -> Path:
    """Copy `src` onto a fresh small tmpfs and run the shell `steps` there (cwd: the copy;
    `fill N` leaves N bytes free, `run ARGS` runs agentrun into out/<n>.{out,err,rc});
    returns the folder with what the steps saved. The tmpfs is gone afterwards."""
    disk, out = tmp_path / "disk", tmp_path / "out"
    disk.mkdir()
    out.mkdir()
    script = f"""
DISK={disk}; OUT={out}; n=0
fill() {{ {FILL}; }}
run() {{ n=$((n+1)); {ENTRY_POINT} "$@" > $OUT/$n.out 2> $OUT/$n.err; echo $? > $OUT/$n.rc; }}
save() {{ cp .specflow/execution/SPEC-1-state.json $OUT/$1.json 2>/dev/null
          cp .specflow/STATE.md $OUT/$1.md 2>/dev/null; true; }}
cp -a {src} $DISK/p && cd $DISK/p
{steps}
git log --format=%s > $OUT/log
git worktree list > $OUT/worktrees
ls > $OUT/ls
"""
    subprocess.run(["bwrap", "--die-with-parent", "--dev-bind", "/", "/", "--size",
                    str(DISK_BYTES), "--tmpfs", str(disk), "sh", "-c", script], env=cli_env(),
                   check=True, timeout=300)
    return out


def result(out: Path, n: int) -> tuple[int, str]:
    return int((out / f"{n}.rc").read_text()), (out / f"{n}.err").read_text()


def assert_no_space(code: int, err: str, *words: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err and "internal error" not in err, err
    assert "error: no space left on device" in err, err
    for word in words:
        assert word in err, err


def test_too_little_space_refuses_to_start_and_a_disk_filling_mid_run_stops_cleanly(tmp_path):
    """On one small disk: run 1 meets too little space to start and is refused before any
    worktree; with the space back, run 2 starts afresh, and its disk fills up while its
    workers run: it stops cleanly; with the space back again, run 3 (`--resume`) finishes."""
    src = project(tmp_path / "src", latency=2.0)
    args = " ".join(scripted())
    # the resume needs no latency: the same turns without it, from a script outside the disk
    fast = tmp_path / "fast.yaml"
    fast.write_text(yaml.safe_dump(script(), sort_keys=False))
    fast_args = args.replace(".specflow/script.yaml", str(fast))
    out = on_small_disk(tmp_path, src, f"""
fill 65536
run run SPEC-1 {args}
save zero
git worktree list > $OUT/worktrees-zero
rm $DISK/filler
{ENTRY_POINT} run SPEC-1 {args} > $OUT/2.out 2> $OUT/2.err &
pid=$!
for i in $(seq 600); do  # until a worker runs (at most a minute)
    ls .git/agentrun/runs/*/workers/*/progress* >/dev/null 2>&1 && touch $OUT/started && break
    sleep 0.1
done
fill 0
wait $pid; echo $? > $OUT/2.rc; n=2
save first
rm $DISK/filler
run run SPEC-1 {fast_args} --resume
save second
""")
    # run 1: refused before any worktree, no checkpoint written
    assert_no_space(*result(out, 1), "space-reserve", "KB needed")
    assert not (out / "zero.json").exists()
    assert len((out / "worktrees-zero").read_text().splitlines()) == 1
    # run 2: started afresh (the refusal left nothing in its way), then the disk filled up
    assert (out / "started").exists()
    code, err = result(out, 2)
    assert_no_space(code, err)
    assert err.strip().splitlines()[-1].startswith("hint: free some space"), err
    first = json.loads((out / "first.json").read_text())
    assert first["status"] == "interrupted", first["status"]
    assert all(g["status"] != "running" for g in first["groups"].values()), first["groups"]
    assert "Status:** interrupted" in (out / "first.md").read_text()
    # run 3: resumed and finished
    code, err = result(out, 3)
    assert code == 0, err
    assert json.loads((out / "second.json").read_text())["status"] == "complete"
    assert sorted((out / "ls").read_text().split()) == ["README.md", "one.txt", "two.txt"]
    assert (out / "log").read_text().startswith("SPEC-1: execution summary")
