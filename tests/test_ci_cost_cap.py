"""The run's spending cap in a CI fan-out, where the jobs of a wave share no live counter: each
job's worker may spend an equal share of what the earlier waves left, and stops there; the
aggregate merges every result of the wave, whatever its job spent, counts what every wave
spent, and stops the run once the cap is reached."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from clirun import agentrun
from gitutil import run_git
from runkit import make_project, spec_text, writes
from test_ci_fanout import THREE, aggregate_job, clone, worker_job

CALL_USD = 0.11  # a worker's first call: 1,000 input + 100 output tokens at $100 per million
WORKER_USD = 0.235  # both of its calls (the second: 1,200 input + 50 output)
PRICING = {"scripted": {"input": 100.0, "output": 100.0}}


def origin_with(tmp_path: Path, config: dict) -> Path:
    script = {"groups": {gid: writes(path, f"{gid}\n") for gid, _, path in THREE}}
    seed = make_project(tmp_path / "seed", "SPEC-C", spec_text("SPEC-C", THREE), script, {
        ".specflow/config.yaml": yaml.safe_dump(config)})
    origin = tmp_path / "origin.git"
    run_git(tmp_path, "clone", "-q", "--bare", str(seed), str(origin))
    return origin


def matrix(origin: Path, tmp_path: Path) -> list[list[dict]]:
    proc = agentrun("plan", "SPEC-C", "--matrix", cwd=clone(origin, tmp_path / "plan-job"))
    assert proc.returncode == 0, proc.stderr
    return [wave["include"] for wave in proc.json["waves"]]


def wave_jobs(origin: Path, tmp_path: Path, entries: list[dict], results: Path,
              *extra: str) -> dict[str, tuple[dict, str]]:
    """Each job of a wave: its result, and what it told the user."""
    done = {}
    for entry in entries:
        proc, out = worker_job(origin, tmp_path, "SPEC-C", entry, results, *extra)
        done[entry["batch"]] = (json.loads(out.read_text()), proc.stderr)
    return done


def allowance(tmp_path: Path, entry: dict) -> dict:
    job = tmp_path / f"job-w{entry['wave']}-{entry['batch']}"
    return json.loads((job / ".git" / "agentrun" / "SPEC-C" / entry["batch"] /
                       "allowance.json").read_text())


def test_without_a_cap_a_ci_job_spends_what_its_worker_needs(tmp_path):
    """The control for the tests below: the same jobs, no cap, complete at their full cost."""
    origin = origin_with(tmp_path, {"pricing": PRICING})
    waves = matrix(origin, tmp_path)
    done = wave_jobs(origin, tmp_path, waves[0], tmp_path / "results-1")
    for result, said in done.values():
        assert result["status"] == "complete" and result["cost_usd"] == WORKER_USD
        assert "spending cap" not in said
    assert not (tmp_path / "job-w1-G1" / ".git" / "agentrun" / "SPEC-C" / "G1" /
                "allowance.json").exists()


def test_each_job_stops_at_its_share_and_the_aggregate_merges_them_all_then_stops(tmp_path):
    """A cap of $0.10 shared by wave 1's two jobs: each may spend $0.05, makes its first call
    ($0.11) and no second. G1's cost alone reaches the cap, yet G2's work, already done and
    paid for, is merged too; the run stops before wave 2."""
    origin = origin_with(tmp_path, {"pricing": PRICING, "max_cost_usd": 0.1})
    waves = matrix(origin, tmp_path)
    done = wave_jobs(origin, tmp_path, waves[0], tmp_path / "results-1")
    for entry in waves[0]:
        result, said = done[entry["batch"]]
        assert result["stop_reason"] == "cost_cap", result
        assert result["cost_usd"] == CALL_USD  # one call, not the second
        assert result["commits"]  # the file its one call wrote is committed
        assert "this job may spend $0.0500 of the run's $0.1" in said
        assert allowance(tmp_path, entry) == {"usd": 0.05, "final": True, "stop": False}
    agg, proc = aggregate_job(origin, tmp_path / "aggregate-1", "SPEC-C",
                              sorted((tmp_path / "results-1").iterdir()))
    assert proc.returncode == 1, proc.stderr
    doc = proc.json
    assert doc["status"] == "partial" and doc["stop_reason"] == "cost_cap"
    assert abs(doc["spent_usd"] - 2 * CALL_USD) < 1e-9
    groups = doc["groups"]
    assert {g: (v["status"], v["stop_reason"]) for g, v in groups.items()} == {
        "G1": ("partial", "cost_cap"), "G2": ("partial", "cost_cap"),
        "G3": ("blocked", "cost_cap")}
    assert (agg / "one.txt").read_text() == "G1\n" and (agg / "two.txt").read_text() == "G2\n"
    # wave 2's job, started all the same, runs no model: the run has ended
    proc, out = worker_job(origin, tmp_path, "SPEC-C", waves[1][0], tmp_path / "results-2")
    assert proc.returncode == 1 and json.loads(out.read_text())["status"] == "blocked"


def test_a_later_waves_job_gets_what_the_earlier_waves_left_and_the_run_counts_every_wave(
        tmp_path):
    origin = origin_with(tmp_path, {"pricing": PRICING, "max_cost_usd": 1.0})
    waves = matrix(origin, tmp_path)
    done = wave_jobs(origin, tmp_path, waves[0], tmp_path / "results-1")
    assert all(r["status"] == "complete" for r, _ in done.values())  # $0.50 each: enough
    assert allowance(tmp_path, waves[0][0])["usd"] == 0.5
    _, proc = aggregate_job(origin, tmp_path / "aggregate-1", "SPEC-C",
                            sorted((tmp_path / "results-1").iterdir()))
    assert proc.returncode == 0 and proc.json["status"] == "running", proc.stderr
    assert abs(proc.json["spent_usd"] - 2 * WORKER_USD) < 1e-9
    done = wave_jobs(origin, tmp_path, waves[1], tmp_path / "results-2")
    left = 1.0 - 2 * WORKER_USD
    assert abs(allowance(tmp_path, waves[1][0])["usd"] - left) < 1e-9
    assert f"this job may spend ${left:.4f}" in done["G3"][1]
    _, proc = aggregate_job(origin, tmp_path / "aggregate-2", "SPEC-C",
                            sorted((tmp_path / "results-2").iterdir()))
    assert proc.returncode == 0 and proc.json["status"] == "complete", proc.stderr
    # the run's total is every wave's, not the last aggregate's alone
    assert abs(proc.json["spent_usd"] - 3 * WORKER_USD) < 1e-9


def test_a_cap_the_earlier_waves_spent_blocks_the_job_without_a_model_call(tmp_path):
    """A job given a lower cap than the run's earlier waves spent (`--max-cost`) starts no
    worker: its result is blocked by the cap."""
    origin = origin_with(tmp_path, {"pricing": PRICING})
    waves = matrix(origin, tmp_path)
    wave_jobs(origin, tmp_path, waves[0], tmp_path / "results-1")
    _, proc = aggregate_job(origin, tmp_path / "aggregate-1", "SPEC-C",
                            sorted((tmp_path / "results-1").iterdir()))
    assert proc.returncode == 0, proc.stderr
    done = wave_jobs(origin, tmp_path, waves[1], tmp_path / "results-2", "--max-cost", "0.3")
    result, said = done["G3"]
    assert (result["status"], result["stop_reason"]) == ("blocked", "cost_cap")
    assert "spending cap ($0.3) was spent by its earlier waves" in result["error"]
    assert result["commits"] == [] and result["usage"]["input_tokens"] == 0


def test_a_rate_limited_job_does_not_keep_the_waves_other_results_from_merging(tmp_path):
    """A job whose model met a rate limit stops the run after its wave, as locally; the other
    jobs of the wave have done their work, and it is merged."""
    origin = origin_with(tmp_path, {})
    waves = matrix(origin, tmp_path)
    wave_jobs(origin, tmp_path, waves[0], tmp_path / "results-1")
    first = tmp_path / "results-1" / "G1.json"
    result = json.loads(first.read_text())
    result.update(status="partial", stop_reason="rate_limited",
                  error="anthropic rate limit (HTTP 429): the server asks to wait 3600 s")
    first.write_text(json.dumps(result))
    agg, proc = aggregate_job(origin, tmp_path / "aggregate-1", "SPEC-C",
                              sorted((tmp_path / "results-1").iterdir()))
    assert proc.returncode == 1, proc.stderr
    doc = proc.json
    assert doc["stop_reason"] == "rate_limited"  # the control: the limit was met and heeded
    assert doc["groups"]["G2"]["status"] == "complete"
    assert (agg / "two.txt").read_text() == "G2\n"
    assert doc["groups"]["G3"]["status"] == "blocked"
