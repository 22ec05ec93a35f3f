"""Decide which provider and model to use, and construct it.

Precedence, per layer, highest first: flags (`--provider`, `--model`), environment
(`AGENTRUN_PROVIDER`, `AGENTRUN_MODEL`), `.specflow/config.yaml`, the agent definition's `model`,
then auto-detection from the API keys present. A model name implies its provider
("claude-*" → anthropic, "gpt-*"/"o1".."o4" → openai, or an explicit "openai:gpt-4o" prefix); a
lower layer's model is only used when it fits the provider chosen above it.

Nothing here imports a model SDK: adapters import theirs on their first call.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrun.errors import BadInput
from agentrun.providers.base import Provider
from agentrun.providers.errors import NotConfigured

PROVIDERS = ("anthropic", "openai", "scripted")
# Defaults when only a key is set: tool-capable, not deprecated, no extended thinking by default.
DEFAULT_MODELS = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-4.1", "scripted": "scripted"}
DEFAULT_MAX_RETRIES = 2
DEFAULT_TIMEOUT_S = 600.0
KEY_VARS = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
BASE_URL_VARS = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}
# Short names used in agent definitions (as in Claude Code sub-agent files).
MODEL_ALIASES = {"sonnet": "claude-sonnet-4-6", "opus": "claude-opus-4-6",
                 "haiku": "claude-haiku-4-5"}
_UNSET_MODELS = {"", "inherit", "default"}
_OPENAI_MODEL = re.compile(r"^(gpt-|chatgpt-|o\d(\b|-|$)|text-|davinci|babbage)")

NOTHING_CONFIGURED_HINT = (
    "Set ANTHROPIC_API_KEY, or OPENAI_API_KEY, or OPENAI_BASE_URL (an OpenAI-compatible server "
    "such as Ollama); optionally choose with AGENTRUN_PROVIDER/AGENTRUN_MODEL or `provider:`/"
    "`model:` in .specflow/config.yaml. To run offline: --provider scripted --script FILE."
)


@dataclass
class ProviderConfig:
    provider: str
    model: str
    base_url: str | None
    max_retries: int
    timeout_s: float
    source: str  # where provider and model came from, for display
    script: str | None = None  # scripted provider only


def implied_provider(model: str | None) -> str | None:
    """The provider a model name implies, or None when it does not say."""
    if not model:
        return None
    if ":" in model:
        prefix = model.split(":", 1)[0].lower()
        if prefix in PROVIDERS:
            return prefix
    name = model.lower()
    if name.startswith("claude") or name in MODEL_ALIASES:
        return "anthropic"
    if _OPENAI_MODEL.match(name):
        return "openai"
    return None


def _bare(model: str) -> str:
    """"anthropic:claude-x" → "claude-x"; "sonnet" → its full name."""
    if ":" in model and model.split(":", 1)[0].lower() in PROVIDERS:
        model = model.split(":", 1)[1]
    return MODEL_ALIASES.get(model.lower(), model)


@dataclass
class _Layer:
    label: str  # shown in `source`
    provider: str | None
    model: str | None

    @property
    def effective_provider(self) -> str | None:
        return self.provider or implied_provider(self.model)


def resolve_provider_config(*, flag_provider: str | None = None, flag_model: str | None = None,
                            env: Mapping[str, str] = os.environ,
                            config: Mapping[str, Any] | None = None,
                            agent_model: str | None = None,
                            script: str | Path | None = None) -> ProviderConfig:
    """Resolve provider, model and connection settings; raise `NotConfigured` if impossible."""
    config = config or {}
    if not isinstance(config, Mapping):
        raise BadInput(".specflow/config.yaml must be a mapping",
                       "Write `key: value` lines (provider, model, base_url, ...).")
    flag_provider = _clean(flag_provider, "--provider")
    if script and flag_provider is None:
        flag_provider = "scripted"  # `--script FILE` alone means "replay this script"
    elif script and flag_provider != "scripted":
        raise BadInput(f"--script only applies to the scripted provider, not {flag_provider!r}",
                       "Drop --script, or use --provider scripted (use --record to record).")
    layers = [
        _Layer("--provider/--model", flag_provider, _model(flag_model)),
        _Layer("AGENTRUN_PROVIDER/AGENTRUN_MODEL", _clean(env.get("AGENTRUN_PROVIDER"),
                                                          "AGENTRUN_PROVIDER"),
               _model(env.get("AGENTRUN_MODEL"))),
        _Layer(".specflow/config.yaml", _clean(_cfg_str(config, "provider"),
                                               "config `provider`"),
               _model(_cfg_str(config, "model"))),
        _Layer("agent definition", None, _model(agent_model)),
    ]
    for layer in layers:
        _check_consistent(layer)

    provider, provider_source = None, ""
    for layer in layers:
        if layer.effective_provider:
            provider, provider_source = layer.effective_provider, layer.label
            break
    if provider is None:
        provider, provider_source = _auto_detect(env, config)

    model, model_source = None, ""
    for layer in layers:
        if not layer.model:
            continue
        fits = implied_provider(layer.model) in (None, provider)
        same_layer = layer.label == provider_source
        if fits or same_layer:
            model, model_source = _bare(layer.model), layer.label
            break
    if model is None:
        model, model_source = DEFAULT_MODELS[provider], "default"

    script_path = str(script) if script else _cfg_str(config, "script")
    base_url = _base_url(provider, env, config)
    if provider == "scripted":
        if not script_path:
            raise NotConfigured("the scripted provider needs a script file",
                                "Pass --script FILE (YAML/JSON), or set `script:` in "
                                ".specflow/config.yaml.")
    elif provider == "anthropic":
        if not env.get(KEY_VARS["anthropic"]):
            raise NotConfigured(f"provider anthropic (from {provider_source}) needs "
                                f"ANTHROPIC_API_KEY, which is not set",
                                "Export ANTHROPIC_API_KEY=..., or choose another provider "
                                "with --provider / AGENTRUN_PROVIDER.")
    elif not env.get(KEY_VARS["openai"]) and not base_url:
        raise NotConfigured(f"provider openai (from {provider_source}) needs OPENAI_API_KEY, "
                            f"which is not set",
                            "Export OPENAI_API_KEY=..., or OPENAI_BASE_URL=http://... for an "
                            "OpenAI-compatible server (Ollama, vLLM, LM Studio).")
    source = (f"provider from {provider_source}, model from {model_source}"
              if provider_source != model_source else f"from {provider_source}")
    return ProviderConfig(provider=provider, model=model, base_url=base_url,
                          max_retries=_cfg_int(config, "max_retries", DEFAULT_MAX_RETRIES),
                          timeout_s=_cfg_float(config, "timeout_s", DEFAULT_TIMEOUT_S),
                          source=source, script=script_path if provider == "scripted" else None)


def create_provider(cfg: ProviderConfig, *, script: Path | str | None = None,
                    record: Path | str | None = None,
                    env: Mapping[str, str] | None = None) -> Provider:
    """Construct the provider `cfg` names; with `record`, wrap it to record the session."""
    env = os.environ if env is None else env
    provider: Provider
    if cfg.provider == "scripted":
        from agentrun.providers.scripted import ScriptedProvider

        path = script or cfg.script
        if not path:
            raise NotConfigured("the scripted provider needs a script file",
                                "Pass --script FILE (YAML/JSON).")
        provider = ScriptedProvider.from_file(path, model=cfg.model)
    elif cfg.provider == "anthropic":
        from agentrun.providers.anthropic_provider import AnthropicProvider

        provider = AnthropicProvider(cfg.model, base_url=cfg.base_url,
                                     max_retries=cfg.max_retries, timeout=cfg.timeout_s, env=env)
    elif cfg.provider == "openai":
        from agentrun.providers.openai_provider import OpenAIProvider

        provider = OpenAIProvider(cfg.model, base_url=cfg.base_url,
                                  max_retries=cfg.max_retries, timeout=cfg.timeout_s, env=env)
    else:
        raise BadInput(f"unknown provider {cfg.provider!r}",
                       f"Use one of: {', '.join(PROVIDERS)}.")
    if record is not None:
        from agentrun.providers.recording import RecordingProvider

        provider = RecordingProvider(provider, record)
    return provider


# -- helpers ------------------------------------------------------------------------------------

def _auto_detect(env: Mapping[str, str], config: Mapping[str, Any]) -> tuple[str, str]:
    if env.get("ANTHROPIC_API_KEY"):
        return "anthropic", "ANTHROPIC_API_KEY"
    if env.get("OPENAI_API_KEY"):
        return "openai", "OPENAI_API_KEY"
    if env.get("OPENAI_BASE_URL"):
        return "openai", "OPENAI_BASE_URL"
    if _cfg_str(config, "base_url"):  # a server URL with no provider: OpenAI-compatible
        return "openai", ".specflow/config.yaml base_url"
    raise NotConfigured("no model provider is configured", NOTHING_CONFIGURED_HINT)


def _base_url(provider: str, env: Mapping[str, str], config: Mapping[str, Any]) -> str | None:
    if provider not in BASE_URL_VARS:
        return None
    from_env = env.get(BASE_URL_VARS[provider])
    if from_env:
        return from_env
    # The config's base_url belongs to the config's provider (e.g. a local Ollama for openai).
    cfg_provider = _cfg_str(config, "provider") or implied_provider(_cfg_str(config, "model"))
    if cfg_provider in (None, provider):
        return _cfg_str(config, "base_url")
    return None


def _clean(value: str | None, where: str) -> str | None:
    if value is None or not str(value).strip():
        return None
    name = str(value).strip().lower()
    if name not in PROVIDERS:
        raise BadInput(f"unknown provider {value!r} (from {where})",
                       f"Use one of: {', '.join(PROVIDERS)}.")
    return name


def _model(value: str | None) -> str | None:
    if value is None:
        return None
    value = str(value).strip()
    return None if value.lower() in _UNSET_MODELS else value


def _check_consistent(layer: _Layer) -> None:
    prefixed = implied_provider(layer.model) if layer.model and ":" in layer.model else None
    if layer.provider and prefixed and prefixed != layer.provider:
        raise BadInput(f"provider {layer.provider!r} contradicts model {layer.model!r} "
                       f"(both from {layer.label})",
                       "Drop the provider prefix from the model, or change the provider.")


def _cfg_str(config: Mapping[str, Any], key: str) -> str | None:
    value = config.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadInput(f".specflow/config.yaml: `{key}` must be a string, got {value!r}",
                       f"Quote the value of `{key}`.")
    return value.strip() or None


def _cfg_int(config: Mapping[str, Any], key: str, default: int) -> int:
    value = config.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadInput(f".specflow/config.yaml: `{key}` must be a non-negative integer, "
                       f"got {value!r}", f"Set e.g. `{key}: {default}`.")
    return value


def _cfg_float(config: Mapping[str, Any], key: str, default: float) -> float:
    value = config.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise BadInput(f".specflow/config.yaml: `{key}` must be a positive number, "
                       f"got {value!r}", f"Set e.g. `{key}: {default:g}`.")
    return float(value)
