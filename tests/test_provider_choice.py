"""Resolving provider and model from flags, environment, config, agent and keys; construction."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from fake_model_server import Reply

from agentrun.core.errors import BadInput
from agentrun.provider_choice import (
    DEFAULT_MODELS,
    create_provider,
    implied_provider,
    provider_env,
    resolve_provider_config,
)
from agentrun.providers.anthropic_provider import AnthropicProvider
from agentrun.providers.base import Message, Request
from agentrun.providers.errors import NotConfigured
from agentrun.providers.openai_provider import OpenAIProvider
from agentrun.providers.recording import RecordingProvider
from agentrun.providers.scripted import ScriptedProvider

ANT = {"ANTHROPIC_API_KEY": "sk-ant-x"}
OAI = {"OPENAI_API_KEY": "sk-oai-x"}
BOTH = {**ANT, **OAI}


def resolve(**kw):
    kw.setdefault("env", {})
    return resolve_provider_config(**kw)


def test_importing_and_resolving_loads_no_sdk():
    code = textwrap.dedent("""
        import sys
        import agentrun.providers
        from agentrun.provider_choice import create_provider, resolve_provider_config
        env = {"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k"}
        for provider in ("anthropic", "openai"):
            cfg = resolve_provider_config(flag_provider=provider, env=env)
            create_provider(cfg, env=env)
        import agentrun.providers.pricing, agentrun.providers.tokens
        loaded = sorted(m for m in ("anthropic", "openai", "httpx2") if m in sys.modules)
        print(",".join(loaded) or "none")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "none"


def test_nothing_configured_names_every_way_to_configure():
    with pytest.raises(NotConfigured) as info:
        resolve()
    text = f"{info.value.message} {info.value.hint}"
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "AGENTRUN_PROVIDER",
                 "AGENTRUN_MODEL", "--provider scripted --script FILE"):
        assert name in text
    assert info.value.exit_code == 3


@pytest.mark.parametrize("env, provider, model", [
    (ANT, "anthropic", DEFAULT_MODELS["anthropic"]),
    (OAI, "openai", DEFAULT_MODELS["openai"]),
    (BOTH, "anthropic", DEFAULT_MODELS["anthropic"]),
    ({"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"}, "openai", DEFAULT_MODELS["openai"]),
])
def test_auto_detect_from_keys(env, provider, model):
    cfg = resolve(env=env)
    assert (cfg.provider, cfg.model) == (provider, model)
    assert cfg.request_retries == 6 and cfg.timeout_s == 600.0


@pytest.mark.parametrize("key", ["base_url", "OPENAI_BASE_URL", "api_key",
                                 "anthropic_api_key", "auth_token", "client_secret"])
def test_project_config_refuses_endpoints_and_keys(key):
    with pytest.raises(BadInput) as info:
        resolve(config={key: "http://127.0.0.1:8000/v1"})
    assert f"`{key}` does not belong in the repository" in info.value.message
    assert "agentrun/config.yaml" in info.value.hint and info.value.exit_code == 2


def test_user_level_config_supplies_the_server_and_the_environment_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "agentrun").mkdir()
    (tmp_path / "agentrun/config.yaml").write_text(
        "OPENAI_BASE_URL: http://127.0.0.1:11434/v1\n")
    cfg = resolve_provider_config(env=provider_env({}), config={"model": "qwen3"})
    assert (cfg.provider, cfg.model, cfg.base_url) == ("openai", "qwen3",
                                                        "http://127.0.0.1:11434/v1")
    env = provider_env({"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"})
    assert resolve_provider_config(env=env).base_url == "http://127.0.0.1:1/v1"


def test_user_level_config_with_an_unknown_key_is_bad_input(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "agentrun").mkdir()
    (tmp_path / "agentrun/config.yaml").write_text("base_uri: http://x\n")
    with pytest.raises(BadInput, match="unknown key `base_uri`"):
        provider_env({})


def test_resolved_base_url_is_shown_without_credentials():
    url = "https://user:pa55word@proxy.example:8443/v1?api-key=k-123456#x"
    cfg = resolve(env={"OPENAI_BASE_URL": url, "AGENTRUN_MODEL": "qwen3"})
    assert cfg.base_url == "https://proxy.example:8443/v1"


def test_base_url_only_openai_gets_the_url():
    cfg = resolve(env={"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1", "AGENTRUN_MODEL": "qwen3"})
    assert (cfg.provider, cfg.model, cfg.base_url) == ("openai", "qwen3",
                                                        "http://127.0.0.1:11434/v1")


def test_precedence_flags_env_config_agent():
    config = {"provider": "anthropic", "model": "claude-haiku-4-5"}
    env = {**BOTH, "AGENTRUN_PROVIDER": "openai", "AGENTRUN_MODEL": "gpt-4o-mini"}
    assert resolve(env=BOTH, config=config, agent_model="claude-opus-4-1").model == \
        "claude-haiku-4-5"
    assert resolve(env=env, config=config).model == "gpt-4o-mini"
    flagged = resolve(env=env, config=config, flag_model="gpt-4.1-mini")
    assert (flagged.provider, flagged.model) == ("openai", "gpt-4.1-mini")
    assert flagged.source == "from --provider/--model"
    mixed = resolve(env={**BOTH, "AGENTRUN_PROVIDER": "openai"}, config={"model": "gpt-4o"})
    assert (mixed.provider, mixed.model) == ("openai", "gpt-4o")
    assert mixed.source == ("provider from AGENTRUN_PROVIDER/AGENTRUN_MODEL, "
                            "model from .specflow/config.yaml")
    assert resolve(env=BOTH, agent_model="claude-opus-4-1").model == "claude-opus-4-1"


@pytest.mark.parametrize("model, provider, bare", [
    ("claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5"),
    ("gpt-4o", "openai", "gpt-4o"),
    ("o3-mini", "openai", "o3-mini"),
    ("o4-mini", "openai", "o4-mini"),
    ("anthropic:claude-haiku-4-5", "anthropic", "claude-haiku-4-5"),
    ("openai:gpt-4o", "openai", "gpt-4o"),
    ("openai:llama3.1", "openai", "llama3.1"),
    ("sonnet", "anthropic", "claude-sonnet-4-6"),
])
def test_model_implies_provider(model, provider, bare):
    cfg = resolve(env=BOTH, flag_model=model)
    assert (cfg.provider, cfg.model) == (provider, bare)
    assert resolve(env=BOTH, agent_model=model).provider == provider


def test_implied_provider_leaves_unknown_names_alone():
    assert implied_provider("llama3.1:8b") is None
    assert implied_provider("omni-model") is None
    assert implied_provider("o3") == "openai"


def test_lower_layer_model_for_another_provider_is_skipped():
    cfg = resolve(env={**BOTH, "AGENTRUN_PROVIDER": "openai"}, agent_model="claude-opus-4-1")
    assert (cfg.provider, cfg.model) == ("openai", DEFAULT_MODELS["openai"])
    cfg = resolve(env=BOTH, flag_provider="anthropic", config={"model": "gpt-4o"})
    assert (cfg.provider, cfg.model) == ("anthropic", DEFAULT_MODELS["anthropic"])


def test_same_layer_provider_and_model_are_honoured_together():
    # e.g. a Claude model behind an OpenAI-compatible proxy
    cfg = resolve(env={"OPENAI_BASE_URL": "http://127.0.0.1:4000/v1"}, flag_provider="openai",
                  flag_model="claude-sonnet-4-5")
    assert (cfg.provider, cfg.model) == ("openai", "claude-sonnet-4-5")


def test_agent_inherit_means_no_model():
    assert resolve(env=ANT, agent_model="inherit").model == DEFAULT_MODELS["anthropic"]


def test_contradicting_prefix_and_unknown_provider_are_bad_input():
    with pytest.raises(BadInput, match="contradicts"):
        resolve(env=BOTH, flag_provider="anthropic", flag_model="openai:gpt-4o")
    with pytest.raises(BadInput, match="unknown provider 'gemini'") as info:
        resolve(env=BOTH, flag_provider="gemini")
    assert "anthropic, openai, scripted" in info.value.hint
    with pytest.raises(BadInput, match="AGENTRUN_PROVIDER"):
        resolve(env={**BOTH, "AGENTRUN_PROVIDER": "nope"})


@pytest.mark.parametrize("kw, var", [
    ({"flag_provider": "anthropic", "env": OAI}, "ANTHROPIC_API_KEY"),
    ({"flag_model": "claude-sonnet-4-5", "env": OAI}, "ANTHROPIC_API_KEY"),
    ({"flag_provider": "openai", "env": ANT}, "OPENAI_API_KEY"),
    ({"config": {"provider": "openai"}, "env": ANT}, "OPENAI_API_KEY"),
])
def test_missing_key_for_the_chosen_provider(kw, var):
    with pytest.raises(NotConfigured) as info:
        resolve_provider_config(**kw)
    assert var in info.value.message and var in info.value.hint


def test_scripted_needs_a_script(tmp_path):
    with pytest.raises(NotConfigured, match="script") as info:
        resolve(flag_provider="scripted")
    assert "--script" in info.value.hint
    cfg = resolve(flag_provider="scripted", script=tmp_path / "s.yaml")
    assert (cfg.provider, cfg.model, cfg.script) == ("scripted", "scripted",
                                                    str(tmp_path / "s.yaml"))
    implied = resolve(env=BOTH, config={"provider": "anthropic"}, script="replay.yaml")
    assert (implied.provider, implied.script) == ("scripted", "replay.yaml")
    with pytest.raises(BadInput, match="--script only applies"):
        resolve(env=BOTH, flag_provider="openai", script="replay.yaml")
    from_config = resolve(config={"provider": "scripted", "script": "run.yaml"})
    assert from_config.script == "run.yaml"
    # a worker's agent model does not turn a scripted run into a real one
    assert resolve(flag_provider="scripted", script="x", agent_model="claude-opus-4-1").model \
        == "scripted"


def test_base_url_belongs_to_its_provider_and_config_sets_limits():
    config = {"provider": "openai", "model": "qwen3", "max_retries": 5, "timeout_s": 30}
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"}
    cfg = resolve(env=env, config=config)  # no key needed: the base URL says "local server"
    assert (cfg.provider, cfg.model, cfg.base_url, cfg.request_retries, cfg.timeout_s) == (
        "openai", "qwen3", "http://127.0.0.1:11434/v1", 5, 30.0)
    other = resolve(env={**ANT, **env}, config=config, flag_provider="anthropic")
    assert other.base_url is None
    assert resolve(env={**ANT, "ANTHROPIC_BASE_URL": "http://127.0.0.1:2"}).base_url == \
        "http://127.0.0.1:2"


@pytest.mark.parametrize("config, key", [
    ({"max_retries": -1}, "max_retries"), ({"max_retries": "3"}, "max_retries"),
    ({"timeout_s": 0}, "timeout_s"), ({"timeout_s": "fast"}, "timeout_s"),
    ({"model": 4}, "model"), ({"provider": ["openai"]}, "provider"),
])
def test_bad_config_values_name_the_key(config, key):
    with pytest.raises(BadInput) as info:
        resolve(env=ANT, config=config)
    assert f"`{key}`" in info.value.message and ".specflow/config.yaml" in info.value.message


def test_create_scripted_and_recorded(tmp_path):
    script = tmp_path / "s.yaml"
    script.write_text("- text: hi\n")
    cfg = resolve(flag_provider="scripted", script=script)
    provider = create_provider(cfg)
    assert isinstance(provider, ScriptedProvider)
    assert provider.complete(Request("", [])).text == "hi"
    recorded = create_provider(cfg, record=tmp_path / "rec.yaml")
    assert isinstance(recorded, RecordingProvider) and recorded.name == "scripted"


def test_create_sdk_providers_carry_settings():
    env = {**BOTH, "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    ant = create_provider(resolve(env=env, config={"max_retries": 4, "timeout_s": 12}), env=env)
    assert isinstance(ant, AnthropicProvider)
    assert (ant.model, ant.base_url, ant.timeout) == (
        DEFAULT_MODELS["anthropic"], "http://127.0.0.1:9", 12.0)
    oai = create_provider(resolve(env=env, flag_provider="openai"), env=env)
    assert isinstance(oai, OpenAIProvider) and oai.base_url is None
    assert "sk-" not in repr(ant) + repr(oai)


def test_resolved_anthropic_provider_talks_to_the_configured_base_url(fake_model_server):
    env = {"ANTHROPIC_API_KEY": "sk-ant-e2e", "ANTHROPIC_BASE_URL":
           fake_model_server.anthropic_base_url}
    fake_model_server.queue(Reply(text="hello from the fake"))
    provider = create_provider(resolve(env=env, config={"max_retries": 0}), env=env)
    turn = provider.complete(Request(system="s", messages=[Message("user", "hi")]))
    assert turn.text == "hello from the fake"
    assert fake_model_server.bodies()[0]["model"] == DEFAULT_MODELS["anthropic"]
