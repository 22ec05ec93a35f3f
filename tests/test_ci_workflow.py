"""The example GitHub Actions workflow: valid YAML whose job graph runs audit, plan, each wave's
matrix jobs and its aggregate, in that order."""

from __future__ import annotations

import graphlib
import re
from pathlib import Path

import yaml

WORKFLOW = Path(__file__).resolve().parent.parent / "examples" / "ci" / "github-actions.yml"


def load() -> dict:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


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


def test_job_graph_runs_audit_plan_then_each_wave_and_its_aggregate():
    jobs = load()["jobs"]
    waves = sorted(int(m.group(1)) for name in jobs if (m := re.fullmatch(r"wave-(\d+)", name)))
    assert waves == list(range(1, len(waves) + 1)) and len(waves) >= 2
    for name, job in jobs.items():
        assert set(needs(job)) <= set(jobs), name  # every dependency exists
    graph = {n: set(needs(j)) for n, j in jobs.items()}
    list(graphlib.TopologicalSorter(graph).static_order())  # raises on a cycle
    expected = ["audit", "plan"] + [f"{kind}-{n}" for n in waves
                                    for kind in ("wave", "aggregate")]
    assert sorted(jobs) == sorted(expected)
    for before, after in zip(expected, expected[1:], strict=False):
        assert before in ancestors(graph, after), (before, after)  # runs strictly later
    assert needs(jobs["plan"]) == ["audit"]
    for n in waves:
        wave, agg = jobs[f"wave-{n}"], jobs[f"aggregate-{n}"]
        # strict chain: a wave waits for the previous aggregate, its aggregate for the wave
        assert (f"aggregate-{n - 1}" if n > 1 else "plan") in needs(wave)
        assert f"wave-{n}" in needs(agg)
        # descendants of the previous aggregate only, so no wave can overtake another
        assert all(int(d.split("-")[1]) < n for d in needs(wave) if "-" in d)


def test_wave_jobs_use_the_plan_matrix_and_push_their_branch():
    jobs = load()["jobs"]
    plan = script(jobs["plan"])
    assert "agentrun plan" in plan and "--matrix" in plan and "GITHUB_OUTPUT" in plan
    assert jobs["plan"]["outputs"]["matrix"] == "${{ steps.plan.outputs.matrix }}"
    assert "agentrun audit" in script(jobs["audit"])
    n = 1
    while f"wave-{n}" in jobs:
        wave, agg = jobs[f"wave-{n}"], jobs[f"aggregate-{n}"]
        matrix = wave["strategy"]["matrix"]
        assert matrix == f"${{{{ fromJSON(needs.plan.outputs.matrix).waves[{n - 1}] }}}}"
        assert wave["strategy"]["fail-fast"] is False  # siblings finish when one fails
        run = script(wave)
        assert "agentrun worker --spec" in run and "--groups" in run and "--out" in run
        # the batch's branch carries the workflow run's id: dispatches never share one
        assert re.search(r"push .*\n.*refs/heads/agentrun/\$GITHUB_RUN_ID/\$\{BRANCH#agentrun/\}",
                         run)
        uploads = [s for s in wave["steps"] if "upload-artifact" in s.get("uses", "")]
        assert uploads and uploads[0]["if"] == "always()"
        assert uploads[0]["with"]["name"] == f"agentrun-wave{n}-${{{{ matrix.batch }}}}"
        downloads = [s["with"] for s in agg["steps"] if "download-artifact" in s.get("uses", "")]
        assert {"pattern": f"agentrun-wave{n}-*", "path": "${{ runner.temp }}/results",
                "merge-multiple": True} in downloads
        run = script(agg)
        assert '"+refs/heads/agentrun/$GITHUB_RUN_ID/*:refs/remotes/origin/agentrun/*"' in run
        assert "agentrun aggregate" in run and "git -c" in run and "push" in run
        assert f"--junit \"$RUNNER_TEMP/junit/agentrun-wave{n}.xml\"" in run
        junit = [s for s in agg["steps"] if "upload-artifact" in s.get("uses", "")]
        assert junit[0]["with"] == {"name": f"agentrun-junit-wave{n}",
                                    "path": "${{ runner.temp }}/junit/",
                                    "if-no-files-found": "ignore"}
        assert junit[0]["if"] == "always()"
        assert "!cancelled()" in agg["if"]  # aggregates even when a worker job failed
        for step in wave["steps"] + agg["steps"]:
            if "checkout" in step.get("uses", ""):
                assert step["with"]["fetch-depth"] == 0
        first = next(s for s in wave["steps"] if "checkout" in s.get("uses", ""))
        if n == 1:  # wave 1 runs on the commit the plan job planned
            assert first["with"]["ref"] == "${{ needs.plan.outputs.sha }}"
        if n > 1:  # later waves start from the commit the previous aggregate pushed
            checkout = next(s for s in wave["steps"] if "checkout" in s.get("uses", ""))
            assert checkout["with"]["ref"] == \
                f"${{{{ needs.aggregate-{n - 1}.outputs.commit }}}}"
            assert f"needs.aggregate-{n - 1}.outputs.status == 'running'" in wave["if"]
        n += 1


def test_secrets_only_reach_the_steps_where_the_model_runs():
    """The workers, and each aggregate (the last one reviews); never a step with the token."""
    data = load()
    assert "secrets." not in yaml.safe_dump(data.get("env", {}))
    keyed = []
    for name, job in data["jobs"].items():
        for step in job["steps"]:
            text = yaml.safe_dump(step)
            if "secrets." in text:
                keyed.append(name)
                assert "github.token" not in text, name
                if name.startswith("wave-"):
                    assert "agentrun worker" in step["run"], name
                else:
                    assert name.startswith("aggregate-") and "agentrun aggregate" in \
                        step["run"], name
    assert sorted(keyed) == sorted(n for n in data["jobs"] if n.startswith(("wave-",
                                                                         "aggregate-")))


def steps_of(data: dict):
    for name, job in data["jobs"].items():
        for step in job["steps"]:
            yield name, job, step


def test_least_privilege_token_and_pinned_actions():
    data, text = load(), WORKFLOW.read_text(encoding="utf-8")
    assert data["permissions"] == {"contents": "read"}
    for name, job in data["jobs"].items():
        assert isinstance(job.get("timeout-minutes"), int), name
        pushes = "push" in script(job) and "git -c" in script(job)
        assert job.get("permissions") == ({"contents": "write"} if pushes else None), name
    # every action pinned by commit, its version in a comment
    uses = re.findall(r"uses: (\S+)(.*)", text)
    assert uses
    for action, comment in uses:
        assert re.fullmatch(r"actions/[\w-]+@[0-9a-f]{40}", action), action
        assert re.fullmatch(r"\s+# v\d+(\.\d+)*", comment), (action, comment)
    for name, _, step in steps_of(data):
        if "checkout" in step.get("uses", ""):  # no token left behind where a model runs
            assert step["with"]["persist-credentials"] is False, name
        dumped = yaml.safe_dump(step)
        if "github.token" in dumped or "GITHUB_TOKEN" in dumped:
            # the token reaches only steps that run no agentrun command, and come after it
            assert "agentrun " not in step["run"], (name, step.get("name"))
        if "agentrun worker" in step.get("run", "") or "agentrun aggregate" in \
                step.get("run", ""):
            assert not re.search(r"github\.token|GITHUB_TOKEN|\$TOKEN", dumped), name


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


def test_a_wave_runs_on_only_after_its_aggregate_pushed():
    jobs = load()["jobs"]
    n = 1
    while f"aggregate-{n}" in jobs:
        agg = jobs[f"aggregate-{n}"]
        assert agg["outputs"]["status"] == "${{ steps.push.outputs.status }}"
        push = next(s for s in agg["steps"] if s.get("id") == "push")
        run = push["run"]
        # the status output is written only after the push succeeded
        assert run.index('"FETCH_HEAD:$GITHUB_REF"') < run.index('echo "status=')
        assert "set +e" not in run and "|| true" not in run.split("FETCH_HEAD:$GITHUB_REF")[0]
        n += 1
