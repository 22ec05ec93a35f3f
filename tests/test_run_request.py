"""The run request: every setting from its flag, else the config file where it sets it, else
the agent definition, else the default — and each value knows which (app/requests.py)."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from agentrun.app.requests import RunFlags, Source, resolve_run, run_options
from agentrun.config import parse_config
from agentrun.core.errors import BadInput
from agentrun.core.limits import DEFAULT_RETRIES, DEFAULT_TOKEN_BUDGET, DEFAULT_WORKER_TIMEOUT_S
from agentrun.protocol import ProviderSettings, SandboxSettings

CONFIG = {"max_parallel": 3, "on_failure": "abort", "token_budget": 50_000, "retries": 5,
          "validation_command": "make test", "max_cost_usd": 2.5, "setup_command": "make deps",
          "executor": "codex", "sandbox": {"mode": "off", "network": True}}


def test_nothing_given_is_every_default() -> None:
    request = resolve_run(RunFlags(), parse_config({}))
    assert set(request.sources.values()) == {Source.DEFAULT}
    assert (request.max_parallel, request.on_failure, request.max_steps) == (None, "continue",
                                                                           None)
    assert (request.token_budget, request.worker_timeout_s, request.retries) == (
        DEFAULT_TOKEN_BUDGET, DEFAULT_WORKER_TIMEOUT_S, DEFAULT_RETRIES)
    assert (request.executor, request.sandbox_mode, request.allow_network) == ("builtin",
                                                                              "auto", False)
    assert request.fix_cycles == 0  # no terminal to ask in
    assert request.validation_command is request.max_cost_usd is request.setup_command is None


def test_the_config_file_gives_what_it_sets_and_only_that() -> None:
    # on_failure: continue is the default value, yet the file set it: its source is the file
    request = resolve_run(RunFlags(), parse_config({**CONFIG, "on_failure": "continue"}))
    from_file = {name for name, src in request.sources.items() if src == Source.CONFIG}
    assert from_file == {"max_parallel", "on_failure", "token_budget", "retries",
                         "validation_command", "max_cost_usd", "setup_command", "executor",
                         "sandbox_mode", "allow_network"}
    assert request.source("max_steps") == request.source("worker_timeout_s") == Source.DEFAULT
    assert (request.max_parallel, request.token_budget, request.retries) == (3, 50_000, 5)
    assert (request.executor, request.sandbox_mode, request.allow_network) == ("codex", "off",
                                                                              True)
    assert request.provenance()["setup_command"] == {"value": "make deps",
                                                     "source": ".specflow/config.yaml"}


def test_flags_win_over_the_file() -> None:
    flags = RunFlags(max_parallel=1, on_failure="continue", max_steps=7, token_budget=9_000,
                     worker_timeout=30, retries=0, validation_command="pytest", max_cost=1.0,
                     setup=" npm ci ", executor="builtin", sandbox="on", allow_network=True,
                     fix_cycles=2)
    request = resolve_run(flags, parse_config(CONFIG))
    assert set(request.sources.values()) == {Source.FLAG}
    # --retries 0 is given (no fresh attempts), not "unset"
    assert (request.retries, request.max_steps, request.worker_timeout_s) == (0, 7, 30)
    assert (request.on_failure, request.setup_command, request.executor) == (
        "continue", "npm ci", "builtin")
    assert (request.sandbox_mode, request.max_cost_usd, request.fix_cycles) == ("on", 1.0, 2)
    # a blank --setup is not given: the file's command applies
    blank = resolve_run(RunFlags(setup="  "), parse_config(CONFIG))
    assert (blank.setup_command, blank.source("setup_command")) == ("make deps", Source.CONFIG)


def test_the_agent_definition_chooses_the_executor_only_when_nothing_else_does() -> None:
    request = resolve_run(RunFlags(), parse_config({}), agent_executor="claude-code")
    assert (request.executor, request.source("executor")) == ("claude-code", Source.AGENT)
    by_file = resolve_run(RunFlags(), parse_config({"executor": "codex"}),
                          agent_executor="claude-code")
    assert (by_file.executor, by_file.source("executor")) == ("codex", Source.CONFIG)


def test_fix_cycles_are_asked_only_in_a_terminal_without_yes() -> None:
    asked = resolve_run(RunFlags(), parse_config({}), can_ask=True)
    assert (asked.fix_cycles, asked.source("fix_cycles")) == (None, Source.ASKED)
    answered = asked.with_fix_cycles(3)
    assert (answered.fix_cycles, answered.source("fix_cycles")) == (3, Source.ASKED)
    assert asked.fix_cycles is None  # the request is frozen: answering makes a new one
    with pytest.raises(dataclasses.FrozenInstanceError):
        asked.fix_cycles = 1  # type: ignore[misc]
    yes = resolve_run(RunFlags(yes=True), parse_config({}), can_ask=True)
    assert (yes.fix_cycles, yes.source("fix_cycles")) == (0, Source.DEFAULT)


@pytest.mark.parametrize("flags, named", [(RunFlags(mode="fast"), "--mode"),
                                          (RunFlags(on_failure="stop"), "--on-failure"),
                                          (RunFlags(executor="vim"), "--executor"),
                                          (RunFlags(max_cost=0.0), "--max-cost 0"),
                                          (RunFlags(max_cost=-1.0), "--max-cost -1")])
def test_a_flag_outside_its_values_is_bad_input(flags: RunFlags, named: str) -> None:
    with pytest.raises(BadInput, match=named):
        resolve_run(flags, parse_config({}))


def test_the_options_a_run_reads_come_from_the_request() -> None:
    request = resolve_run(RunFlags(max_steps=4, no_review=True, sequential=True),
                          parse_config(CONFIG))
    options = run_options(request, parse_config(CONFIG),
                          provider=ProviderSettings(provider="scripted", model="m"),
                          sandbox=SandboxSettings(), sandbox_description="off", tty=False)
    assert (options.max_parallel, options.on_failure, options.max_cost_usd) == (3, "abort", 2.5)
    assert (options.limits.max_steps, options.limits.token_budget, options.limits.retries) \
        == (4, 50_000, 5)
    assert (options.use_processes, options.review_skipped) == (False, "--no-review")
    left = run_options(request, parse_config(CONFIG), provider=options.provider,
                       sandbox=SandboxSettings(), sandbox_description="", max_cost_usd=None)
    assert left.max_cost_usd is None and left.max_parallel == 3


def test_run_options_are_built_in_one_place() -> None:
    """`run`, `fix`, `worker` and `aggregate` all get their options from `run_options`."""
    package = Path(__file__).resolve().parents[1] / "agentrun"
    texts = {path: path.read_text(encoding="utf-8") for path in package.rglob("*.py")}
    builders = sorted(
        str(path.relative_to(package)) for path, text in texts.items() if "RunOptions" in text
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "RunOptions")
    assert builders == ["app/requests.py"]
