"""Waves fanned out across CI jobs, simulated locally: a bare origin, one clone per matrix job
(`agentrun worker --spec ... --groups ...`, then `git push`), one clone per aggregate job
(`git fetch`, `agentrun aggregate`, `git push`)."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from clirun import agentrun
from gitutil import IDENTITY, run_git
from otlp_receiver import OtlpReceiver
from runkit import make_project, scripted, spec_text, submit, writes
from test_review_cli import met, review_turn

from agentrun.project import find_project
from agentrun.sandbox.choice import choose

FIVE = [("G1", [], "src/a.py"), ("G2", [], "src/b.py"), ("G3", ["G1", "G2"], "src/c.py"),
        ("G4", ["G1"], "src/d.py"), ("G5", ["G3", "G4"], "src/e.py")]
THREE = [("G1", [], "one.txt"), ("G2", [], "two.txt"), ("G3", ["G1"], "three.txt")]
FETCH = "+refs/heads/agentrun/*:refs/remotes/origin/agentrun/*"
MODEL = ("--provider", "scripted", "--script", ".specflow/script.yaml", "--json")
REVIEWER = MODEL[:-1]  # the last aggregate's reviewer, from the same script
APPROVE = review_turn([met(1, "src/a.py:1 and the others exist"),
                       met(2, "git diff --stat: only the spec's files")])


def five_script() -> dict:
    return {"groups": {gid: writes(path, f"# {gid}\nVALUE = {i}\n")
                       for i, (gid, _, path) in enumerate(FIVE, 1)},
            "agents": {"code-reviewer": [APPROVE]}}


def three_script(fail_g1: bool = False) -> dict:
    groups = {gid: writes(path, f"{gid}\n") for gid, _, path in THREE}
    if fail_g1:
        groups["G1"] = [submit("failed", "could not", error="compile error in one.txt")]
    return {"groups": groups}


def bare_origin(tmp_path: Path, spec_id: str, groups, script: dict) -> Path:
    seed = make_project(tmp_path / "seed", spec_id, spec_text(spec_id, groups), script)
    origin = tmp_path / "origin.git"
    run_git(tmp_path, "clone", "-q", "--bare", str(seed), str(origin))
    return origin


def clone(origin: Path, dest: Path) -> Path:
    run_git(origin.parent, "clone", "-q", str(origin), str(dest))
    for key, value in IDENTITY.items():
        run_git(dest, "config", key, value)
    return dest


def worker_job(origin: Path, tmp_path: Path, spec_id: str, entry: dict, results: Path,
               *extra: str, push: bool = True, env: dict[str, str] | None = None):
    """One matrix job: its own clone, the worker, then the job pushes the branch."""
    job = clone(origin, tmp_path / f"job-w{entry['wave']}-{entry['batch']}")
    out = results / f"{entry['batch']}.json"
    proc = agentrun("worker", "--spec", spec_id, "--groups", entry["groups"],
                    "--out", str(out), *MODEL, *extra, cwd=job, env=env)
    if push:
        run_git(job, "push", "-q", "--force", "origin", f"HEAD:refs/heads/{entry['branch']}")
    return proc, out


def aggregate_job(origin: Path, dest: Path, spec_id: str, results, *extra: str,
                  no_review: bool = True, env: dict[str, str] | None = None):
    """The aggregate job: clone the target branch, fetch the workers' branches, aggregate,
    push. `--no-review` unless `extra` names the reviewer's model or `no_review` is off."""
    agg = clone(origin, dest)
    run_git(agg, "fetch", "-q", "origin", FETCH)
    review = ("--no-review",) if no_review and "--provider" not in extra else ()
    proc = agentrun("aggregate", spec_id, *map(str, results), "--json", *review, *extra,
                    cwd=agg, env=env)
    if proc.returncode in (0, 1):
        run_git(agg, "push", "-q", "origin", "HEAD:main")
    return agg, proc


def normalise(text: str) -> str:
    """Drop what differs between two runs of the same work: run ids, dates, commit ids."""
    text = re.sub(r"\d{8}-\d{6}-[0-9a-f]{4}", "RUN", text)
    text = re.sub(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}( UTC)?", "DATE", text)
    return re.sub(r"\b[0-9a-f]{7}\b", "SHA", text)


def test_distributed_run_matches_a_local_run(tmp_path):
    origin = bare_origin(tmp_path, "SPEC-30", FIVE, five_script())
    planner = clone(origin, tmp_path / "plan-job")
    proc = agentrun("plan", "SPEC-30", "--matrix", cwd=planner)
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.strip().splitlines()) == 1  # one line, for $GITHUB_OUTPUT
    matrix = proc.json
    assert matrix["wave_count"] == 3 and matrix["mode"] == "orchestrated"
    assert [[e["groups"] for e in w["include"]] for w in matrix["waves"]] == \
        [["G1", "G2"], ["G3", "G4"], ["G5"]]
    assert all(set(w) == {"include"} for w in matrix["waves"])  # usable as a matrix as is
    assert matrix["waves"][1]["include"][0] == {
        "wave": 2, "label": "2", "batch": "G3", "groups": "G3",
        "branch": "agentrun/SPEC-30/G3"}

    run_ids, worker_commits = set(), {}
    with OtlpReceiver() as collector:  # every job traced, as the environment asks
        traced = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint}
        for number, wave in enumerate(matrix["waves"], 1):
            results = tmp_path / f"results-{number}"
            main_before = run_git(origin, "rev-parse", "main")
            for entry in wave["include"]:
                proc, out = worker_job(origin, tmp_path, "SPEC-30", entry, results, env=traced)
                assert proc.returncode == 0, proc.stderr
                result = json.loads(out.read_text())
                assert result["status"] == "complete" and result["branch"] == entry["branch"]
                assert result["base_commit"] == main_before  # started on the aggregated main
                assert len(result["commits"]) == 1
                worker_commits[entry["batch"]] = result["commits"][0]
            # every aggregate could be the last: each is given the reviewer's model
            agg, proc = aggregate_job(origin, tmp_path / f"aggregate-{number}", "SPEC-30",
                                      sorted(results.iterdir()), *REVIEWER, env=traced)
            assert proc.returncode == 0, proc.stderr
            summary = proc.json
            run_ids.add(summary["run_id"])
            if number < 3:
                assert summary["status"] == "running" and summary["next_wave"] == str(number + 1)
                assert summary["review"]["reviewed"] is False
            else:
                assert summary["status"] == "complete" and summary["next_wave"] is None
                assert summary["review"] == {"reviewed": True, "result": "APPROVED", "version": 1,
                                             "skipped": None}
            assert run_git(agg, "status", "--porcelain") == ""
    assert len(run_ids) == 1  # every wave continued the same execution state
    # ONE trace for the run across its eight jobs on machines that share nothing live: each
    # aggregate's span and each worker's attempts hang under the run's span (never sent)
    spans = collector.spans
    assert len({sp.trace_id for sp in spans}) == 1, {sp.trace_id for sp in spans}
    aggregates = sorted((sp for sp in spans if sp.name.startswith("agentrun aggregate")),
                        key=lambda sp: sp.name)
    assert [sp.name for sp in aggregates] == [f"agentrun aggregate SPEC-30 wave {n}"
                                              for n in (1, 2, 3)]
    run_span = aggregates[0].parent_id
    assert run_span and {sp.parent_id for sp in aggregates} == {run_span}
    attempts = [sp for sp in spans if sp.name.startswith("invoke_agent spec-executor")]
    assert sorted(sp["agentrun.batch"] for sp in attempts) == ["G1", "G2", "G3", "G4", "G5"]
    assert {sp.parent_id for sp in attempts} == {run_span}
    assert not [sp for sp in spans if sp.span_id == run_span]

    final = clone(origin, tmp_path / "final")
    for commit in worker_commits.values():
        run_git(final, "merge-base", "--is-ancestor", commit, "main")  # every group's work
    for gid, _, path in FIVE:
        assert (final / path).read_text().startswith(f"# {gid}")
    state = json.loads((final / ".specflow/execution/SPEC-30-state.json").read_text())
    assert state["status"] == "complete" and state["run_id"] in run_ids
    assert state["trace_id"] == spans[0].trace_id  # what each job summary names
    assert all(g["merge_commit"] for g in state["groups"].values())

    local = make_project(tmp_path / "local", "SPEC-30", spec_text("SPEC-30", FIVE),
                         five_script())
    proc = agentrun("run", "SPEC-30", *scripted(review=True), cwd=local)
    assert proc.returncode == 0, proc.stderr
    for rel in (".specflow/specs/SPEC-30.md", ".specflow/STATE.md"):
        ci_text, local_text = (final / rel).read_text(), (local / rel).read_text()
        assert normalise(ci_text) == normalise(local_text), rel
    spec = (final / ".specflow/specs/SPEC-30.md").read_text()
    assert "status: done" in spec and "### Review v1" in spec and "**Result:** APPROVED" in spec


def test_failed_group_blocks_its_dependents_across_jobs(tmp_path):
    """Also: every job keeps the settings of the run's start commit (`--start-commit`), and
    the aggregate reports its outcome as step outputs of checked values (`--github-output`)."""
    origin = bare_origin(tmp_path, "SPEC-31", THREE, three_script(fail_g1=True))
    start = run_git(origin, "rev-parse", "main")
    pinned = ("--start-commit", start)
    outputs = tmp_path / "github-output"
    outputs.touch()
    matrix = agentrun("plan", "SPEC-31", "--matrix",
                      cwd=clone(origin, tmp_path / "plan-job")).json
    results1 = tmp_path / "results-1"
    codes = {}
    for entry in matrix["waves"][0]["include"]:
        proc, _ = worker_job(origin, tmp_path, "SPEC-31", entry, results1, "--max-retries", "0",
                             *pinned)
        codes[entry["batch"]] = proc.returncode
    assert codes == {"G1": 1, "G2": 0}
    agg, proc = aggregate_job(origin, tmp_path / "aggregate-1", "SPEC-31",
                              sorted(results1.iterdir()), "--events", "-", *pinned,
                              "--github-output", env={"GITHUB_OUTPUT": str(outputs)})
    assert proc.returncode == 1, proc.stderr  # a group failed; the run continues
    first = proc.json
    assert first["status"] == "running" and first["next_wave"] == "2"
    assert outputs.read_text() == f"status=running\ncommit={run_git(agg, 'rev-parse', 'HEAD')}\n"
    assert first["groups"]["G1"]["status"] == "failed"
    assert "compile error" in first["groups"]["G1"]["error"]
    assert first["groups"]["G2"]["status"] == "complete"
    events = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "run_start" and kinds[-1] == "wave_aggregated"
    assert {"worker_result", "merged", "wave_done"} <= set(kinds)

    # what a later wave's checkout would hold had a worker's config change been merged:
    # the sandbox off, and failures aborting the run (it is what the checkout says)
    later = clone(origin, tmp_path / "later-config")
    (later / ".specflow/config.yaml").write_text(
        "provider: scripted\nscript: .specflow/script.yaml\nsandbox:\n  mode: 'off'\n"
        "on_failure: abort\n", encoding="utf-8")
    run_git(later, "add", ".specflow/config.yaml")
    run_git(later, "commit", "-q", "-m", "a worker's config")
    run_git(later, "push", "-q", "origin", "HEAD:main")
    assert find_project(later).config.sandbox.mode == "off"
    # wave 2: G3 depends on the failed G1 and says so without calling the model, confined as
    # the run's start commit says: given (--start-commit), or as its execution state recorded
    entry = matrix["waves"][1]["include"][0]
    other, _ = worker_job(origin, tmp_path / "other", "SPEC-31", entry, tmp_path / "o",
                          "--start-commit", run_git(later, "rev-parse", "HEAD"), push=False)
    assert other.returncode == 3 and f"started at {start[:12]}" in other.stderr  # another run
    recorded, _ = worker_job(origin, tmp_path / "recorded", "SPEC-31", entry, tmp_path / "r",
                             push=False)
    results2 = tmp_path / "results-2"
    proc, out = worker_job(origin, tmp_path, "SPEC-31", entry, results2, *pinned)
    assert proc.returncode == 1
    blocked = json.loads(out.read_text())
    assert blocked["status"] == "blocked"
    assert blocked["error"] == "dependency G1 did not complete"
    assert blocked["steps"] == 0 and blocked["commits"] == []
    assert blocked["sandbox"] == recorded.json["sandbox"] == choose("auto").describe()
    junit = tmp_path / "junit.xml"
    # the last aggregate of a run that cannot complete needs no reviewer's model
    agg, proc = aggregate_job(origin, tmp_path / "aggregate-2", "SPEC-31", [out],
                              "--junit", str(junit), *pinned, "--github-output",
                              no_review=False, env={"GITHUB_OUTPUT": str(outputs)})
    assert proc.returncode == 1, proc.stderr
    final = proc.json
    assert final["status"] == "partial" and final["next_wave"] is None
    assert outputs.read_text().splitlines()[2:] == \
        ["status=partial", f"commit={run_git(agg, 'rev-parse', 'HEAD')}"]
    assert final["groups"]["G3"]["status"] == "blocked"
    cases = {c.get("name").split(":")[0]: c for c in ET.parse(junit).getroot().iter("testcase")}
    assert "compile error" in cases["G1"].find("failure").get("message")
    assert cases["G2"].find("failure") is None and cases["G2"].find("skipped") is None
    assert cases["G3"].find("skipped").get("message") == "dependency G1 did not complete"
    spec = (agg / ".specflow/specs/SPEC-31.md").read_text()
    assert "status: audited" in spec and "⛔ blocked" in spec and "❌ failed" in spec
    assert "Failed (Wave 1)" in (agg / ".specflow/STATE.md").read_text()
    assert run_git(origin, "rev-parse", "main") == run_git(agg, "rev-parse", "HEAD")


def test_bad_results_are_refused_before_anything_changes(tmp_path):
    origin = bare_origin(tmp_path, "SPEC-32", THREE, three_script())
    waves = agentrun("plan", "SPEC-32", "--matrix",
                     cwd=clone(origin, tmp_path / "plan-job")).json["waves"]
    g1, g2 = waves[0]["include"]
    results = tmp_path / "results"
    proc, g1_out = worker_job(origin, tmp_path, "SPEC-32", g1, results)
    assert proc.returncode == 0, proc.stderr
    proc, g2_out = worker_job(origin, tmp_path, "SPEC-32", g2, results, push=False)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(g1_out.read_text())
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({**data, "group": "G9", "groups": ["G9"]}))
    later = tmp_path / "g3.json"
    later.write_text(json.dumps({**data, "group": "G3", "groups": ["G3"],
                                 "branch": "agentrun/SPEC-32/G3"}))
    agg = clone(origin, tmp_path / "aggregate")
    run_git(agg, "fetch", "-q", "origin", FETCH)
    head = run_git(agg, "rev-parse", "HEAD")

    cases = [
        ([g1_out, tmp_path / "missing.json"], ["result file not found", "missing.json"]),
        ([g1_out, g2_out], ["branch agentrun/SPEC-32/G2", "not in this repository",
                            "git push origin"]),
        ([g1_out, foreign], ["G9, which is not in the plan of SPEC-32"]),
        ([g1_out], ["no result for batch G2 of wave 1", "--allow-missing"]),
        ([later], ["wave 2 needs wave 1 aggregated first"]),
        ([g1_out, later], ["the results span waves 1, 2"]),
    ]
    for paths, words in cases:
        proc = agentrun("aggregate", "SPEC-32", *map(str, paths), cwd=agg)
        assert proc.returncode == 2, (paths, proc.stderr)
        for word in words:
            assert word in proc.stderr, (word, proc.stderr)
        assert "Traceback" not in proc.stderr
    assert run_git(agg, "rev-parse", "HEAD") == head
    assert run_git(agg, "status", "--porcelain") == ""
    assert not (agg / ".specflow/execution").exists()

    # --allow-missing counts the batch without a result as failed, by the failure rules
    proc = agentrun("aggregate", "SPEC-32", str(g1_out), "--allow-missing", "--json", cwd=agg)
    assert proc.returncode == 1, proc.stderr
    groups = proc.json["groups"]
    assert groups["G1"]["status"] == "complete"
    assert groups["G2"]["status"] == "failed" and "no result file" in groups["G2"]["error"]


def test_worker_refuses_what_it_cannot_run(tmp_path):
    origin = bare_origin(tmp_path, "SPEC-33", THREE, three_script())
    job = clone(origin, tmp_path / "job")
    proc = agentrun("worker", "--spec", "SPEC-33", "--groups", "G3", "--out",
                    str(tmp_path / "r.json"), *MODEL, cwd=job)
    assert proc.returncode == 3
    assert "wave 2 needs wave 1 aggregated first" in proc.stderr
    proc = agentrun("worker", "--spec", "SPEC-33", "--groups", "G1,G7", "--out",
                    str(tmp_path / "r.json"), *MODEL, cwd=job)
    assert proc.returncode == 2 and "G1,G7 is not a worker batch" in proc.stderr
    proc = agentrun("worker", "--assignment", "a.json", "--spec", "SPEC-33", cwd=job)
    assert proc.returncode == 2 and "cannot be combined" in proc.stderr
    # a folder at --out is refused before the work, not found when the result is written
    (tmp_path / "out").mkdir()
    proc = agentrun("worker", "--spec", "SPEC-33", "--groups", "G1", "--out",
                    str(tmp_path / "out"), *MODEL, cwd=job)
    assert proc.returncode == 2 and "is a folder; agentrun writes the result there" in \
        proc.stderr and "pass a file path to --out" in proc.stderr
    assert "agentrun/SPEC-33/G1" not in run_git(job, "branch", "--list", "agentrun/*")
    assert not (tmp_path / "r.json").exists()
    assert run_git(job, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert run_git(job, "status", "--porcelain") == ""


def test_spec_without_groups_is_one_job_and_merges_from_a_local_branch(tmp_path):
    """Its aggregate is the last one: it needs the reviewer's model before it merges, and the
    run is complete only if the review approves."""
    finding = {"severity": "major", "file": "hello.py:1", "issue": "greets nobody",
               "fix": "print the name"}
    changes = review_turn([met(1, "hello.py:1 exists"), met(2, "git diff --stat: 1 file")],
                          findings=[finding])
    root = make_project(tmp_path / "p", "SPEC-34", spec_text("SPEC-34", []),
                        {"agents": {"spec-executor": writes("hello.py", "print('hi')\n"),
                                    "code-reviewer": [changes]}})
    matrix = agentrun("plan", "SPEC-34", "--matrix", cwd=root).json
    assert matrix["mode"] == "single" and matrix["wave_count"] == 1
    assert matrix["waves"] == [{"include": [{"wave": 1, "label": "1", "batch": "single",
                                             "groups": "single",
                                             "branch": "agentrun/SPEC-34/single"}]}]
    # the worker and the aggregate in one repository: the branch is a local one, no remote
    out = tmp_path / "single.json"
    proc = agentrun("worker", "--spec", "SPEC-34", "--groups", "single", "--out",
                    str(out), *MODEL, cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert run_git(root, "rev-parse", "--abbrev-ref", "HEAD") == "agentrun/SPEC-34/single"
    run_git(root, "switch", "-q", "main")
    head = run_git(root, "rev-parse", "HEAD")
    proc = agentrun("aggregate", "SPEC-34", str(out), "--json", cwd=root)
    assert proc.returncode == 3, proc.stderr
    assert proc.json["error"]["message"].startswith("the last wave's review needs a model")
    assert "--no-review" in proc.json["error"]["hint"]
    assert run_git(root, "rev-parse", "HEAD") == head and not (root / "hello.py").exists()
    assert not (root / ".specflow/execution").exists()
    junit = tmp_path / "junit.xml"
    proc = agentrun("aggregate", "SPEC-34", str(out), *REVIEWER, "--json", "--junit",
                    str(junit), cwd=root, env={"GITHUB_ACTIONS": "true"})
    assert proc.returncode == 1, proc.stderr
    review = next(c for c in ET.parse(junit).getroot().iter("testcase")
                  if c.get("name") == "review")
    assert review.find("failure").get("message").startswith("CHANGES_REQUESTED (Review v1")
    assert "title=SPEC-34 review::CHANGES_REQUESTED" in proc.stderr
    result = proc.json
    assert result["mode"] == "single" and result["status"] == "partial"
    assert result["stop_reason"] == "review"
    assert result["review"] == {"reviewed": True, "result": "CHANGES_REQUESTED", "version": 1,
                                "skipped": None}
    assert (root / "hello.py").read_text() == "print('hi')\n"
    spec = (root / ".specflow/specs/SPEC-34.md").read_text()
    assert "status: review" in spec and "greets nobody" in spec
    assert run_git(root, "status", "--porcelain") == ""


def test_aggregate_checks_the_merged_result_with_the_validation_command(tmp_path):
    """The check passes on the worker's branch (no merge commit there) and fails on the
    merged result, so only the aggregate's integration check can catch it."""
    check = 'test -z "$(git log --merges --oneline -1)"'
    root = make_project(tmp_path / "p", "SPEC-35", spec_text("SPEC-35", []),
                        {"agents": {"spec-executor": writes("hello.py", "print('hi')\n")}},
                        files={".specflow/config.yaml": f"validation_command: '{check}'\n"})
    out = tmp_path / "single.json"
    proc = agentrun("worker", "--spec", "SPEC-35", "--groups", "single", "--out",
                    str(out), *MODEL, cwd=root)
    assert proc.returncode == 0, proc.stderr
    run_git(root, "switch", "-q", "main")
    before = run_git(root, "rev-parse", "HEAD")
    proc = agentrun("aggregate", "SPEC-35", str(out), "--json", "--no-review", cwd=root)
    assert proc.returncode == 1, proc.stderr
    result = proc.json
    assert result["status"] == "failed" and result["stop_reason"] == "integration"
    assert not (root / "hello.py").exists()
    assert run_git(root, "rev-list", f"{before}..HEAD", "--merges") == ""


def test_a_ci_worker_runs_the_set_up_command_in_its_checkout(tmp_path):
    """A CI job's checkout is its worker's worktree: `setup_command` makes it ready before
    the model is called (here the validation command needs what set-up made)."""
    script = {"groups": {"G1": writes("one.txt", "G1\n")}}
    seed = make_project(tmp_path / "seed", "SPEC-31", spec_text("SPEC-31", THREE[:1]), script,
                        {".specflow/config.yaml": "setup_command: echo ready > .ready\n"
                                                  "validation_command: test -f .ready\n",
                         ".gitignore": ".specflow/runs/\n.ready\n"})
    origin = tmp_path / "origin.git"
    run_git(tmp_path, "clone", "-q", "--bare", str(seed), str(origin))
    entry = {"wave": 1, "batch": "G1", "groups": "G1", "branch": "agentrun/SPEC-31/G1"}
    proc, out = worker_job(origin, tmp_path, "SPEC-31", entry, tmp_path / "results",
                           push=False)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert result["status"] == "complete" and result["files_created"] == ["one.txt"]
