"""The example GitHub Actions workflow: valid YAML whose job graph runs audit, plan, each wave's
matrix jobs and its aggregate, in that order, then one job that publishes; and the trust
boundary it keeps (one job may write, and it runs nothing a worker wrote)."""

from __future__ import annotations

import copy
import functools
import graphlib
import re
from pathlib import Path

import yaml

WORKFLOW = Path(__file__).resolve().parent.parent / "examples" / "ci" / "github-actions.yml"
CHECKOUT, UPLOAD, DOWNLOAD = "actions/checkout@", "actions/upload-artifact@", \
    "actions/download-artifact@"


LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load(text: str | None = None) -> dict:
    if text is not None:
        return yaml.load(text, Loader=LOADER)  # noqa: S506 - a safe loader
    return copy.deepcopy(_shipped())


@functools.cache
def _shipped() -> dict:
    return yaml.load(WORKFLOW.read_text(encoding="utf-8"), Loader=LOADER)  # noqa: S506


def needs(job: dict) -> list[str]:
    value = job.get("needs", [])
    return [value] if isinstance(value, str) else list(value)


def ancestors(graph: dict[str, set[str]], name: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph[name])
    while todo:
        job = todo.pop()
        if job not in seen:
            seen.add(job)
            todo += graph[job]
    return seen


def script(job: dict) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def steps_of(data: dict):
    for name, job in data["jobs"].items():
        for step in job["steps"]:
            yield name, job, step


def waves(jobs: dict) -> list[int]:
    return sorted(int(m.group(1)) for name in jobs if (m := re.fullmatch(r"wave-(\d+)", name)))


# --- the trust boundary, as checks that name what breaks it ----------------------------------

RUNS_WORKER_CODE = ("agentrun worker", "agentrun aggregate")  # the model, validation, setup


def permissions(data: dict, name: str) -> dict:
    """What the job's token may do: its own `permissions:`, else the workflow's."""
    job = data["jobs"][name]
    return job["permissions"] if "permissions" in job else data.get("permissions", "write-all")


def trust_problems(data: dict) -> list[str]:
    """What lets a worker's code reach a token that can write, or a value it chose reach a
    script: [] when the workflow keeps the boundary."""
    problems = []
    writers = [n for n in data["jobs"] if permissions(data, n) != {"contents": "read"}]
    if len(writers) != 1 or permissions(data, writers[0]) != {"contents": "write"}:
        problems.append(f"jobs whose token may do more than read: {writers} (want exactly one, "
                        "with contents: write only)")
    for name in writers:
        job = data["jobs"][name]
        text = yaml.safe_dump(job)
        for what in (*RUNS_WORKER_CODE, "agentrun ", "pip ", CHECKOUT, "secrets."):
            if what in text:
                problems.append(f"{name} can write and has {what.strip()!r}")
        if any(w in yaml.safe_dump(j) for n, j in data["jobs"].items() if n in needs(job)
               for w in ("${{ env.", "GITHUB_ENV")):
            problems.append(f"{name} can write and depends on a job's environment")
    for name, _, step in steps_of(data):
        run = step.get("run", "")
        if "${{" in run:
            problems.append(f"{name}: `${{{{ }}}}` in a run: script ({step.get('name', run[:40])})")
        if step.get("uses", "").startswith(CHECKOUT) and \
                step.get("with", {}).get("persist-credentials") is not False:
            problems.append(f"{name}: a checkout keeps the token (persist-credentials)")
        if any(w in run for w in RUNS_WORKER_CODE) and re.search(
                r"GITHUB_(OUTPUT|ENV|PATH)", run):
            problems.append(f"{name}: a step that runs worker code writes the runner's files")
        if any(w in run for w in RUNS_WORKER_CODE) and '--start-commit "$START"' not in run:
            problems.append(f"{name}: agentrun runs without the run's start commit")
        if any(w in run for w in RUNS_WORKER_CODE) and \
                '--sandbox "$AGENTRUN_SANDBOX"' not in run:
            problems.append(f"{name}: agentrun runs without the workflow's sandbox mode")
    if data.get("env", {}).get("AGENTRUN_SANDBOX") != "${{ vars.AGENTRUN_SANDBOX || 'on' }}":
        problems.append("the sandbox is not on unless the repository says otherwise")
    for name, job in data["jobs"].items():
        if not any(w in script(job) for w in RUNS_WORKER_CODE):
            continue
        if job.get("env", {}).get("START") != "${{ needs.plan.outputs.sha }}":
            problems.append(f"{name}: START is not the commit the plan job planned on")
        runs = [s.get("run", "") for s in job["steps"]]
        first = next(i for i, r in enumerate(runs) if any(w in r for w in RUNS_WORKER_CODE))
        if not any("apt-get install -y -q bubblewrap" in r for r in runs[:first]):
            problems.append(f"{name}: bubblewrap is not installed before agentrun runs")
    return problems


def test_the_shipped_workflow_keeps_the_trust_boundary():
    assert trust_problems(load()) == []


def test_the_trust_check_names_each_way_through_it():
    """The check fails on the shape the workflow had: the worker pushing with a token in its
    own job, an output interpolated into a script, a kept token, no start commit."""
    bad = load("""
permissions: {contents: read}
jobs:
  plan: {steps: [{run: git rev-parse HEAD}]}
  wave-1:
    permissions: {contents: write}
    needs: plan
    env: {START: "${{ needs.plan.outputs.sha }}"}
    steps:
      - uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683
        with: {persist-credentials: true}
      - id: batch
        run: |
          agentrun worker --spec "$SPEC" --groups G1 --out r.json
          echo "code=$?" >> "$GITHUB_OUTPUT"
      - env: {TOKEN: "${{ github.token }}"}
        run: git push origin HEAD
      - run: exit ${{ steps.batch.outputs.code }}
  aggregate-1:
    permissions: {contents: write}
    steps: [{run: 'agentrun aggregate "$SPEC" r.json --start-commit "$START"'}]
""")
    problems = "\n".join(trust_problems(bad))
    assert "jobs whose token may do more than read: ['wave-1', 'aggregate-1']" in problems
    assert "wave-1 can write and has 'agentrun worker'" in problems
    assert "aggregate-1 can write and has 'agentrun aggregate'" in problems
    assert "wave-1: `${{ }}` in a run: script" in problems
    assert "wave-1: a checkout keeps the token" in problems
    assert "wave-1: a step that runs worker code writes the runner's files" in problems
    assert "wave-1: agentrun runs without the run's start commit" in problems
    assert "wave-1: agentrun runs without the workflow's sandbox mode" in problems
    assert "the sandbox is not on unless the repository says otherwise" in problems
    assert "aggregate-1: START is not the commit the plan job planned on" in problems
    assert "wave-1: bubblewrap is not installed before agentrun runs" in problems


# --- the job graph -----------------------------------------------------------------------------

def test_job_graph_runs_audit_plan_then_each_wave_and_its_aggregate_then_publish():
    jobs = load()["jobs"]
    numbers = waves(jobs)
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 2
    for name, job in jobs.items():
        assert set(needs(job)) <= set(jobs), name  # every dependency exists
    graph = {n: set(needs(j)) for n, j in jobs.items()}
    list(graphlib.TopologicalSorter(graph).static_order())  # raises on a cycle
    expected = ["audit", "plan"] + [f"{kind}-{n}" for n in numbers
                                    for kind in ("wave", "aggregate")] + ["publish"]
    assert sorted(jobs) == sorted(expected)
    for before, after in zip(expected, expected[1:], strict=False):
        assert before in ancestors(graph, after), (before, after)  # runs strictly later
    assert needs(jobs["plan"]) == ["audit"]
    for n in numbers:
        wave, agg = jobs[f"wave-{n}"], jobs[f"aggregate-{n}"]
        # strict chain: a wave waits for the previous aggregate, its aggregate for the wave
        assert (f"aggregate-{n - 1}" if n > 1 else "plan") in needs(wave)
        assert f"wave-{n}" in needs(agg)
        # descendants of the previous aggregate only, so no wave can overtake another
        assert all(int(d.split("-")[1]) < n for d in needs(wave) if "-" in d)
    # publish waits for every aggregate, and runs after a failed one (what merged is kept)
    assert set(needs(jobs["publish"])) == {"plan", *(f"aggregate-{n}" for n in numbers)}
    assert "!cancelled()" in jobs["publish"]["if"]


def test_wave_jobs_use_the_plan_matrix_and_hand_on_bundles():
    jobs = load()["jobs"]
    plan = script(jobs["plan"])
    assert "agentrun plan" in plan and "--matrix" in plan and "GITHUB_OUTPUT" in plan
    assert jobs["plan"]["outputs"]["matrix"] == "${{ steps.plan.outputs.matrix }}"
    assert "agentrun audit" in script(jobs["audit"])
    for n in waves(jobs):
        wave, agg = jobs[f"wave-{n}"], jobs[f"aggregate-{n}"]
        matrix = wave["strategy"]["matrix"]
        assert matrix == f"${{{{ fromJSON(needs.plan.outputs.matrix).waves[{n - 1}] }}}}"
        assert wave["strategy"]["fail-fast"] is False  # siblings finish when one fails
        run = script(wave)
        assert "agentrun worker --spec" in run and "--groups" in run and "--out" in run
        # the batch's commits leave the job as a bundle of its own branch, never as a push
        assert 'git bundle create -q "$RUNNER_TEMP/agentrun/$BATCH.bundle" ' \
               '"refs/heads/$BRANCH" "^$BASE"' in run
        assert "push" not in run
        uploads = [s for s in wave["steps"] if s.get("uses", "").startswith(UPLOAD)]
        assert uploads and uploads[0]["if"] == "always()"
        assert uploads[0]["with"]["name"] == f"agentrun-wave{n}-${{{{ matrix.batch }}}}"
        downloads = [s["with"] for s in agg["steps"] if s.get("uses", "").startswith(DOWNLOAD)]
        assert {"pattern": f"agentrun-wave{n}-*", "path": "${{ runner.temp }}/results",
                "merge-multiple": True} in downloads
        run = script(agg)
        # each batch's branch only from its own bundle, named by the plan (not the bundle)
        assert f".waves[{n - 1}].include[]" in run
        assert 'git fetch -q --no-tags "$bundle" "+refs/heads/$branch:refs/remotes/origin/' \
               '$branch"' in run
        assert "agentrun aggregate" in run and "--github-output" in run and "push" not in run
        assert f"--junit \"$RUNNER_TEMP/junit/agentrun-wave{n}.xml\"" in run
        junit = [s for s in agg["steps"] if s.get("uses", "").startswith(UPLOAD)
                 and "junit" in s["with"]["name"]]
        assert junit[0]["with"] == {"name": f"agentrun-junit-wave{n}",
                                    "path": "${{ runner.temp }}/junit/",
                                    "if-no-files-found": "ignore"}
        assert junit[0]["if"] == "always()"
        assert "!cancelled()" in agg["if"]  # aggregates even when a worker job failed
        for step in wave["steps"] + agg["steps"]:
            if step.get("uses", "").startswith(CHECKOUT):  # the start commit, full history
                assert step["with"]["fetch-depth"] == 0
                assert step["with"]["ref"] == "${{ needs.plan.outputs.sha }}"
        for job in (wave, agg):
            base = job["env"]["BASE"]
            if n == 1:  # wave 1 runs on the commit the plan job planned
                assert base == "${{ needs.plan.outputs.sha }}"
            else:  # later waves start from the commit the previous aggregate made
                assert base == f"${{{{ needs.aggregate-{n - 1}.outputs.commit }}}}"
                got = [s["with"]["name"] for s in job["steps"]
                       if s.get("uses", "").startswith(DOWNLOAD) and "name" in s["with"]]
                assert f"agentrun-aggregate-{n - 1}" in got
                assert 'git checkout -q --detach "$BASE"' in script(job)
                assert '[[ "$BASE" =~ ^[0-9a-f]{40}([0-9a-f]{24})?$ ]]' in script(job)
                assert f"needs.aggregate-{n - 1}.outputs.status == 'running'" in job["if"]


def test_secrets_only_reach_the_steps_where_the_model_runs():
    """The workers, and each aggregate (the last one reviews); never a step with the token."""
    data = load()
    assert "secrets." not in yaml.safe_dump(data.get("env", {}))
    keyed = []
    for name, _, step in steps_of(data):
        text = yaml.safe_dump(step)
        if "secrets." in text:
            keyed.append(name)
            assert step["env"] == {"ANTHROPIC_API_KEY": "${{ secrets.ANTHROPIC_API_KEY }}",
                                   "OPENAI_API_KEY": "${{ secrets.OPENAI_API_KEY }}"}, name
            assert "github.token" not in text, name
            if name.startswith("wave-"):
                assert "agentrun worker" in step["run"], name
            else:
                assert name.startswith("aggregate-") and "agentrun aggregate" in \
                    step["run"], name
    assert sorted(keyed) == sorted(n for n in data["jobs"] if n.startswith(("wave-",
                                                                         "aggregate-")))


def test_pinned_actions_and_the_token_only_where_it_pushes():
    data, text = load(), WORKFLOW.read_text(encoding="utf-8")
    assert data["permissions"] == {"contents": "read"}
    for name, job in data["jobs"].items():
        assert isinstance(job.get("timeout-minutes"), int), name
    # every action pinned by commit, its version in a comment
    uses = re.findall(r"uses: (\S+)(.*)", text)
    assert uses
    for action, comment in uses:
        assert re.fullmatch(r"actions/[\w-]+@[0-9a-f]{40}", action), action
        assert re.fullmatch(r"\s+# v\d+(\.\d+)*", comment), (action, comment)
    tokened = [(name, step) for name, _, step in steps_of(data)
               if re.search(r"github\.token|GITHUB_TOKEN", yaml.safe_dump(step))]
    assert [name for name, _ in tokened] == ["publish"]
    push = tokened[0][1]["run"]
    # data only: an empty repository with hooks off, the bundle checked before the push
    assert 'git init -q --bare "$RUNNER_TEMP/publish"' in push
    assert "git config core.hooksPath /dev/null" in push
    assert "git config transfer.fsckObjects true" in push  # malformed objects refused
    assert push.index("merge-base --is-ancestor \"$START\"") < push.index(" push ")
    assert '"$commit:$GITHUB_REF"' in push and "--force" not in push and "+$commit" not in push


def test_installs_agentrun_from_its_repository_never_by_the_pypi_name():
    data = load()
    assert data["env"]["AGENTRUN_SOURCE"] == \
        "${{ inputs.agentrun || vars.AGENTRUN_SOURCE }}"
    assert "agentrun" in data[True]["workflow_dispatch"]["inputs"]  # `on:` parses as True
    installs = [step["run"] for _, _, step in steps_of(data)
                if "pip install" in step.get("run", "")]
    assert installs
    for run in installs:
        for line in run.splitlines():
            if "pip install" in line:
                assert re.search(r'pip install "\$RUNNER_TEMP"/wheel/agentrun_specflow-\*\.whl',
                                 line), line
    audit = script(data["jobs"]["audit"])
    assert 'pip wheel --no-deps "$AGENTRUN_SOURCE"' in audit


def test_the_next_wave_runs_only_on_what_agentrun_reported():
    """`status` and `commit` come from `agentrun aggregate --github-output` (checked values),
    and the bundle handed on holds exactly that commit."""
    jobs = load()["jobs"]
    for n in waves(jobs):
        agg = jobs[f"aggregate-{n}"]
        assert agg["outputs"] == {"status": "${{ steps.aggregate.outputs.status }}",
                                  "commit": "${{ steps.aggregate.outputs.commit }}"}
        step = next(s for s in agg["steps"] if s.get("id") == "aggregate")
        assert "--github-output" in step["run"] and "GITHUB_OUTPUT" not in step["run"]
        bundle = next(s for s in agg["steps"] if "git bundle create" in s.get("run", ""))
        assert bundle["env"]["COMMIT"] == "${{ steps.aggregate.outputs.commit }}"
        assert 'test "$(git rev-parse HEAD)" = "$COMMIT"' in bundle["run"]
    publish = jobs["publish"]["steps"][-1]
    for n in waves(jobs):
        assert publish["env"][f"COMMIT_{n}"] == f"${{{{ needs.aggregate-{n}.outputs.commit }}}}"
    assert "^[0-9a-f]{40}([0-9a-f]{24})?$" in publish["run"]  # a commit id, or nothing


def test_wave_jobs_install_the_coding_agent_cli_the_repository_names():
    """A config with `executor: claude-code` runs that CLI in each worker job (the worker
    refuses to start without it): the job installs the package the variable pins, before the
    worker runs, and installs nothing when the variable is unset."""
    data = load()
    assert data["env"]["AGENTRUN_AGENT_CLI"] == "${{ vars.AGENTRUN_AGENT_CLI }}"
    for name in (n for n in data["jobs"] if n.startswith("wave-")):
        runs = [s.get("run", "") for s in data["jobs"][name]["steps"]]
        install = next(i for i, r in enumerate(runs) if "npm install -g" in r)
        step = data["jobs"][name]["steps"][install]
        assert step["if"] == "env.AGENTRUN_AGENT_CLI != ''", name
        assert step["run"] == 'npm install -g "$AGENTRUN_AGENT_CLI"', name
        assert install < next(i for i, r in enumerate(runs) if "agentrun worker" in r), name
