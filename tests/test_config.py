""".specflow/config.yaml: validated once when the project loads, through the real CLI."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml
from clirun import agentrun
from gitutil import run_git
from runkit import make_project, scripted, spec_text, writes

from agentrun.cli.init_cmd import CONFIG_YAML, NO_TEST_COMMAND
from agentrun.config import ProjectConfig, parse_config
from agentrun.core.errors import BadInput
from agentrun.core.limits import DEFAULT_TOKEN_BUDGET

EXAMPLE = Path(__file__).resolve().parents[1] / ".specflow-example"
TWO = [("G1", [], "src/a.py"), ("G2", [], "src/b.py")]
KEY = {"ANTHROPIC_API_KEY": "sk-ant-test"}  # a dry run never calls the model


def project(tmp_path: Path, config: str) -> Path:
    script = {"groups": {gid: writes(path, f"# {gid}\n") for gid, _, path in TWO}}
    return make_project(tmp_path / "p", "SPEC-1", spec_text("SPEC-1", TWO), script,
                        files={".specflow/config.yaml": config})


def budget_line(stderr: str) -> str:
    match = re.search(r"token budget \S+/worker · timeout \S+/worker", stderr)
    assert match, stderr
    return match.group(0)


def test_wrong_type_stops_the_run_before_any_worktree(tmp_path):
    root = project(tmp_path, "validation_command: 5\n")
    proc = agentrun("run", "SPEC-1", *scripted(), cwd=root)
    assert proc.returncode == 2, proc.stderr
    error = proc.json["error"]
    assert error["message"] == "invalid config .specflow/config.yaml: `validation_command` " \
                               "must be a string (got 5)"
    assert "validation_command" in error["hint"] and "Traceback" not in proc.stderr
    assert len(run_git(root, "worktree", "list").splitlines()) == 1
    assert run_git(root, "branch", "--list", "agentrun/*") == ""
    assert not (root / ".specflow/runs").exists()


def test_unknown_key_suggests_the_known_one(tmp_path):
    root = project(tmp_path, "max_paralel: 2\n")
    proc = agentrun("plan", "SPEC-1", cwd=root)
    assert proc.returncode == 2
    assert "unknown key `max_paralel` — did you mean `max_parallel`?" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_unknown_key_in_a_section_is_named_with_its_section(tmp_path):
    root = project(tmp_path, "audit:\n  group_context_mx: 0.2\n")
    proc = agentrun("audit", "SPEC-1", "--static", cwd=root)
    assert proc.returncode == 2
    assert "unknown key `audit.group_context_mx` — did you mean `audit.group_context_max`?" \
        in proc.stderr


def test_bad_price_is_refused_at_load_not_when_a_worker_finishes(tmp_path):
    root = project(tmp_path, "pricing:\n  my-model: {output: 2.0}\n")
    proc = agentrun("run", "SPEC-1", *scripted(), cwd=root)
    assert proc.returncode == 2
    assert "`pricing.my-model.input` is missing" in proc.stderr


def test_every_key_init_writes_is_accepted_and_used(tmp_path):
    root = project(tmp_path, "")
    (root / ".specflow/config.yaml").unlink()
    assert agentrun("init", cwd=root).returncode == 0
    written = (root / ".specflow/config.yaml").read_text()
    assert written == CONFIG_YAML.format(validation_line=NO_TEST_COMMAND)  # no tests here
    # every commented-out setting, switched on
    enabled = re.sub(r"^# (\w+:)", r"\1", written, flags=re.M)
    keys = set(yaml.safe_load(enabled))
    assert {"provider", "model", "command_env", "validation_command", "max_parallel",
            "token_budget", "worker_timeout_s", "on_failure", "retries", "request_retries"} <= keys
    (root / ".specflow/config.yaml").write_text(enabled.replace("token_budget: 100000",
                                                                "token_budget: 123456"))
    proc = agentrun("run", "SPEC-1", "--dry-run", "--json", env=KEY, cwd=root)
    assert proc.returncode == 0, proc.stderr
    doc = yaml.safe_load(proc.stdout)
    assert (doc["provider"], doc["model"]) == ("anthropic", "claude-sonnet-4-6")
    assert budget_line(proc.stderr) == "token budget 123,456/worker · timeout 1800s/worker"


def test_the_example_projects_config_is_accepted_and_flags_win(tmp_path):
    root = tmp_path / "example"
    shutil.copytree(EXAMPLE, root)
    run_git(root, "init", "-q")
    proc = agentrun("run", "SPEC-001", "--dry-run", "--json", env=KEY, cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert budget_line(proc.stderr) == "token budget 200,000/worker · timeout 900s/worker"
    flagged = agentrun("run", "SPEC-001", "--dry-run", "--json", "--token-budget",
                           "5000", "--worker-timeout", "60", env=KEY, cwd=root)
    assert flagged.returncode == 0, flagged.stderr
    assert budget_line(flagged.stderr) == "token budget 5,000/worker · timeout 60s/worker"
    # each setting says where it came from: the flag, the file, or the default
    given = yaml.safe_load(proc.stdout)["settings"]
    by_flag = yaml.safe_load(flagged.stdout)["settings"]
    assert given["token_budget"] == {"value": 200000, "source": ".specflow/config.yaml"}
    assert by_flag["token_budget"] == {"value": 5000, "source": "flag"}
    assert by_flag["worker_timeout_s"] == {"value": 60, "source": "flag"}
    assert given["max_parallel"] == {"value": 3, "source": ".specflow/config.yaml"}
    assert given["retries"] == {"value": 3, "source": "default"}


def test_without_a_config_file_the_defaults_apply(tmp_path):
    root = project(tmp_path, "")
    (root / ".specflow/config.yaml").unlink()
    proc = agentrun("run", "SPEC-1", *scripted("--dry-run"), cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert budget_line(proc.stderr) == \
        f"token budget {DEFAULT_TOKEN_BUDGET:,}/worker · timeout 1800s/worker"


@pytest.mark.parametrize("data, message", [
    ({"max_parallel": 0}, "`max_parallel` must be greater than or equal to 1 (got 0)"),
    ({"token_budget": "lots"}, "`token_budget` must be a whole number (got 'lots')"),
    ({"retries": True}, "`retries` must be a whole number (got True)"),
    ({"worker_timeout_s": "fast"}, "`worker_timeout_s` must be a number (got 'fast')"),
    ({"on_failure": "stop"}, "`on_failure` must be 'continue' or 'abort' (got 'stop')"),
    ({"provider": "nope"}, "`provider` must be one of anthropic, openai, scripted"),
    ({"audit": [1]}, "`audit` must be a mapping of settings"),
    ({"audit": {"total_context_max": 2}}, "`audit.total_context_max` must be less than"),
    ({"pricing": {"m": {"input": 1, "output": 1, "per_call": 2}}},
     "unknown key `pricing.m.per_call`"),
])
def test_each_problem_names_the_key(data, message):
    with pytest.raises(BadInput) as info:
        parse_config(data, "cfg.yaml")
    assert info.value.message.startswith("invalid config cfg.yaml: ")
    assert message in info.value.message and info.value.hint


def test_a_key_without_a_value_means_the_default():
    config = parse_config({"token_budget": None, "model": "  ", "audit": {"max_steps": None},
                           "provider": " OpenAI "})
    assert config.token_budget == DEFAULT_TOKEN_BUDGET and config.model is None
    assert config.audit.max_steps is None and config.provider == "openai"
    assert parse_config(None) == ProjectConfig()


def test_price_overrides_are_what_a_worker_reads():
    from agentrun.core.usage import Usage
    from agentrun.providers.pricing import cost_usd

    config = parse_config({"pricing": {"local-model": {"input": 1, "output": 2}}})
    overrides = config.price_overrides()
    assert overrides == {"local-model": {"input": 1.0, "output": 2.0}}
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    assert cost_usd("local-model", usage, overrides) == pytest.approx(3.0)


@pytest.mark.parametrize("data, key, keys", [
    ({"sandbox": {"limits": {"procesess": 10}}}, "sandbox.limits.processes",
     "file_size_mb, processes, memory_mb"),
    ({"sandbox": {"mod": "on"}}, "sandbox.mode", "mode, network"),
    ({"pricing": {"m": {"input": 1, "output": 1, "cache_reed": 1}}}, "pricing.m.cache_read",
     "input, output, cache_read, cache_write"),
])
def test_an_unknown_key_at_any_depth_names_its_neighbours(data, key, keys):
    with pytest.raises(BadInput) as info:
        parse_config(data, "cfg.yaml")
    assert f"did you mean `{key}`?" in info.value.message
    assert keys in (info.value.hint or "")
