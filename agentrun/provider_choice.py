"""Decide which provider and model to use, and construct it.

Precedence, per layer, highest first: flags (`--provider`, `--model`), environment
(`AGENTRUN_PROVIDER`, `AGENTRUN_MODEL`), `.specflow/config.yaml`, the agent definition's `model`,
then auto-detection from the API keys present. A model name implies its provider
("claude-*" → anthropic, "gpt-*"/"o1".."o4" → openai, or an explicit "openai:gpt-4o" prefix); a
lower layer's model is only used when it fits the provider chosen above it.

Server URLs and keys come only from the environment or the user-level config file
(`~/.config/agentrun/config.yaml`, whose settings stand in for environment variables of the same
names), never from a file in the repository. A resolved `base_url` is what may be shown (no
credentials); `create_provider` finds the real one again in the process that makes the calls.

Nothing here imports a model SDK: adapters import theirs on their first call.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrun.config import ProjectConfig, parse_config
from agentrun.core.errors import BadInput
from agentrun.core.secrets import public_url, secret_values
from agentrun.project import user_settings
from agentrun.providers.base import Provider
from agentrun.providers.catalog import CATALOG, ProviderConfig, provider_names, provider_spec
from agentrun.providers.errors import NotConfigured
from agentrun.providers.recording import RecordingProvider

DEFAULT_MODELS = {spec.name: spec.default_model for spec in CATALOG.values()}
# Short names used in agent definitions (as in Claude Code sub-agent files).
MODEL_ALIASES = {"sonnet": "claude-sonnet-4-6", "opus": "claude-opus-4-6",
                 "haiku": "claude-haiku-4-5"}
_UNSET_MODELS = {"", "inherit", "default"}

NOTHING_CONFIGURED_HINT = (
    "Set ANTHROPIC_API_KEY, or OPENAI_API_KEY, or OPENAI_BASE_URL (an OpenAI-compatible server "
    "such as Ollama), in the environment or in ~/.config/agentrun/config.yaml; optionally choose "
    "with AGENTRUN_PROVIDER/AGENTRUN_MODEL or `provider:`/`model:` in .specflow/config.yaml. To "
    "run offline: --provider scripted --script FILE."
)


def provider_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables providers read: the user-level config's, overridden by the environment."""
    environ = os.environ if environ is None else environ
    return {**user_settings(), **environ}


def implied_provider(model: str | None) -> str | None:
    """The provider a model name implies, or None when it does not say."""
    if not model:
        return None
    if ":" in model:
        prefix = model.split(":", 1)[0].lower()
        if prefix in CATALOG:
            return prefix
    name = MODEL_ALIASES.get(model.lower(), model.lower())
    for spec in CATALOG.values():
        if spec.model_pattern is not None and spec.model_pattern.match(name):
            return spec.name
    return None


def _bare(model: str) -> str:
    """"anthropic:claude-x" → "claude-x"; "sonnet" → its full name."""
    if ":" in model and model.split(":", 1)[0].lower() in CATALOG:
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
                            env: Mapping[str, str] | None = None,
                            config: ProjectConfig | Mapping[str, Any] | None = None,
                            agent_model: str | None = None,
                            script: str | Path | None = None) -> ProviderConfig:
    """Resolve provider, model and connection settings; raise `NotConfigured` if impossible.

    `config` is the project's settings; a plain mapping is validated as the file would be.
    `env` defaults to `provider_env()`."""
    env = provider_env() if env is None else env
    if not isinstance(config, ProjectConfig):
        config = parse_config(config)
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
        _Layer(".specflow/config.yaml", config.provider, _model(config.model)),
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
        provider, provider_source = _auto_detect(env)

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

    spec = provider_spec(provider)
    script_path = str(script) if script else config.script
    base_url = _base_url(provider, env)
    if spec.needs_script and not script_path:
        raise NotConfigured(f"the {provider} provider needs a script file",
                            "Pass --script FILE (YAML/JSON), or set `script:` in "
                            ".specflow/config.yaml.")
    if spec.key_var and not env.get(spec.key_var) \
            and not (spec.keyless_with_base_url and base_url):
        raise NotConfigured(f"provider {provider} (from {provider_source}) needs "
                            f"{spec.key_var}, which is not set", spec.missing_key_hint)
    source = (f"provider from {provider_source}, model from {model_source}"
              if provider_source != model_source else f"from {provider_source}")
    return ProviderConfig(provider=provider, model=model,
                          base_url=public_url(base_url) if base_url else None,
                          request_retries=config.request_retries, timeout_s=config.timeout_s,
                          source=source, script=script_path if spec.needs_script else None)


def create_provider(cfg: ProviderConfig, *, script: Path | str | None = None,
                    record: Path | str | None = None,
                    env: Mapping[str, str] | None = None) -> Provider:
    """Construct the provider `cfg` names; with `record`, wrap it to record the session.

    A `base_url` that is the public form of the server URL configured here (environment or
    user-level config) means that URL, credentials included."""
    env = provider_env() if env is None else env
    real = _base_url(cfg.provider, env)
    if real and cfg.base_url == public_url(real):
        cfg = dataclasses.replace(cfg, base_url=real)
    provider: Provider = provider_spec(cfg.provider).factory(cfg, env, script)
    if record is not None:
        provider = RecordingProvider(provider, record, secrets=secret_values(env))
    return provider


# -- helpers ------------------------------------------------------------------------------------

def _auto_detect(env: Mapping[str, str]) -> tuple[str, str]:
    """The first provider whose key is set; else a server URL for one that needs no key."""
    specs = CATALOG.values()
    for spec in specs:
        if spec.key_var and env.get(spec.key_var):
            return spec.name, spec.key_var
    keyless = [spec for spec in specs if spec.keyless_with_base_url]
    for spec in keyless:
        if spec.base_url_var and env.get(spec.base_url_var):
            return spec.name, spec.base_url_var
    raise NotConfigured("no model provider is configured", NOTHING_CONFIGURED_HINT)


def _base_url(provider: str, env: Mapping[str, str]) -> str | None:
    var = provider_spec(provider).base_url_var
    return (env.get(var) or None) if var else None


def _clean(value: str | None, where: str) -> str | None:
    if value is None or not str(value).strip():
        return None
    name = str(value).strip().lower()
    if name not in CATALOG:
        raise BadInput(f"unknown provider {value!r} (from {where})",
                       f"Use one of: {', '.join(provider_names())}.")
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
