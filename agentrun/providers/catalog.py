"""The providers agentrun knows, one record each: what configures it, how it is built, its prices.

Adding a provider means adding one `ProviderSpec` to `CATALOG`; resolution
(agentrun/provider_choice.py), the price table (pricing.py) and the worker pool's preloading
read everything from here. Factories
import their SDK adapter on call, so importing this module loads no model SDK.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from agentrun.core.errors import BadInput
from agentrun.providers.errors import NotConfigured

if TYPE_CHECKING:
    from agentrun.providers.base import Provider


@dataclass
class ProviderConfig:
    """The provider settings a run resolved (`provider_choice.py`), and where they came from."""

    provider: str
    model: str
    base_url: str | None
    request_retries: int  # agent/modelcall.py's retries of one request
    timeout_s: float
    source: str  # where provider and model came from, for display
    script: str | None = None  # scripted provider only


Factory = Callable[[ProviderConfig, Mapping[str, str], "Path | str | None"], "Provider"]


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cache_read: float
    cache_write: float


def _p(inp: float, out: float, read: float, write: float | None = None) -> Price:
    # OpenAI bills no cache writes separately: writing is plain input.
    return Price(inp, out, read, inp if write is None else write)


@dataclass(frozen=True)
class ProviderSpec:
    """Everything that differs between providers; the code around it is shared."""

    name: str
    default_model: str  # used when only a key is set: tool-capable, no extended thinking
    factory: Factory
    key_var: str | None = None  # the API key's environment variable
    base_url_var: str | None = None  # the environment variable naming another server
    keyless_with_base_url: bool = False  # a base URL alone means a local compatible server
    needs_script: bool = False  # replays a script file instead of calling a model
    missing_key_hint: str = ""
    model_pattern: re.Pattern[str] | None = None  # model names that imply this provider
    preload_modules: tuple[str, ...] = ()  # what a worker process needs imported up front
    # Published list prices (standard tier, 5-minute cache writes). Prices change: a project
    # can correct or add any model under `pricing:` in .specflow/config.yaml.
    prices: Mapping[str, Price] = field(default_factory=dict)


def _anthropic(cfg: ProviderConfig, env: Mapping[str, str], script: Path | str | None
               ) -> Provider:
    from agentrun.providers.anthropic_provider import AnthropicProvider

    return AnthropicProvider(cfg.model, base_url=cfg.base_url, timeout=cfg.timeout_s, env=env)


def _openai(cfg: ProviderConfig, env: Mapping[str, str], script: Path | str | None
            ) -> Provider:
    from agentrun.providers.openai_provider import OpenAIProvider

    return OpenAIProvider(cfg.model, base_url=cfg.base_url, timeout=cfg.timeout_s, env=env)


def _scripted(cfg: ProviderConfig, env: Mapping[str, str], script: Path | str | None
              ) -> Provider:
    from agentrun.providers.scripted import ScriptedProvider

    path = script or cfg.script
    if not path:
        raise NotConfigured("the scripted provider needs a script file",
                            "Pass --script FILE (YAML/JSON).")
    return ScriptedProvider.from_file(path, model=cfg.model)


ANTHROPIC = ProviderSpec(
    name="anthropic", default_model="claude-sonnet-4-6", factory=_anthropic,
    key_var="ANTHROPIC_API_KEY", base_url_var="ANTHROPIC_BASE_URL",
    missing_key_hint="Export ANTHROPIC_API_KEY=..., or choose another provider with "
                     "--provider / AGENTRUN_PROVIDER.",
    model_pattern=re.compile(r"^claude"),
    preload_modules=("anthropic", "agentrun.providers.anthropic_provider"),
    prices={
        "claude-opus-5-5": _p(4.0, 20.0, 0.20, 5.0),
        "claude-opus-5": _p(5.0, 25.0, 0.50, 6.25),
        "claude-sonnet-5-5": _p(2.0, 10.0, 0.20, 2.50),
        "claude-sonnet-5": _p(2.0, 10.0, 0.20, 2.50),
        "claude-opus-4-8": _p(5.0, 25.0, 0.50, 6.25),
        "claude-opus-4-7": _p(5.0, 25.0, 0.50, 6.25),
        "claude-opus-4-6": _p(5.0, 25.0, 0.50, 6.25),
        "claude-opus-4-5": _p(5.0, 25.0, 0.50, 6.25),
        "claude-opus-4-1": _p(15.0, 75.0, 1.50, 18.75),
        "claude-opus-4": _p(15.0, 75.0, 1.50, 18.75),
        "claude-sonnet-4": _p(3.0, 15.0, 0.30, 3.75),
        "claude-haiku-4": _p(1.0, 5.0, 0.10, 1.25),
        "claude-3-7-sonnet": _p(3.0, 15.0, 0.30, 3.75),
        "claude-3-5-sonnet": _p(3.0, 15.0, 0.30, 3.75),
        "claude-3-5-haiku": _p(0.80, 4.0, 0.08, 1.0),
        "claude-3-opus": _p(15.0, 75.0, 1.50, 18.75),
        "claude-3-haiku": _p(0.25, 1.25, 0.03, 0.30),
    })

OPENAI = ProviderSpec(
    name="openai", default_model="gpt-4.1", factory=_openai,
    key_var="OPENAI_API_KEY", base_url_var="OPENAI_BASE_URL", keyless_with_base_url=True,
    missing_key_hint="Export OPENAI_API_KEY=..., or OPENAI_BASE_URL=http://... for an "
                     "OpenAI-compatible server (Ollama, vLLM, LM Studio).",
    model_pattern=re.compile(r"^(gpt-|chatgpt-|o\d(\b|-|$)|text-|davinci|babbage)"),
    preload_modules=("openai", "agentrun.providers.openai_provider"),
    prices={  # cache_read = cached input
        "gpt-4o": _p(2.50, 10.0, 1.25),
        "gpt-4o-mini": _p(0.15, 0.60, 0.075),
        "gpt-4.1": _p(2.0, 8.0, 0.50),
        "gpt-4.1-mini": _p(0.40, 1.60, 0.10),
        "gpt-4.1-nano": _p(0.10, 0.40, 0.025),
        "gpt-5": _p(1.25, 10.0, 0.125),
        "gpt-5-mini": _p(0.25, 2.0, 0.025),
        "gpt-5-nano": _p(0.05, 0.40, 0.005),
        "gpt-5.1": _p(1.25, 10.0, 0.125),
        "gpt-5.2": _p(1.75, 14.0, 0.175),
        "gpt-5.4": _p(2.50, 15.0, 0.25),
        "gpt-5.4-mini": _p(0.75, 4.50, 0.075),
        "gpt-5.4-nano": _p(0.20, 1.25, 0.02),
        "gpt-5.5": _p(5.0, 30.0, 0.50),
        "o1": _p(15.0, 60.0, 7.50),
        "o1-mini": _p(1.10, 4.40, 0.55),
        "o3": _p(2.0, 8.0, 0.50),
        "o3-mini": _p(1.10, 4.40, 0.55),
        "o4-mini": _p(1.10, 4.40, 0.275),
    })

SCRIPTED = ProviderSpec(
    name="scripted", default_model="scripted", factory=_scripted, needs_script=True,
    prices={"scripted": _p(0.0, 0.0, 0.0, 0.0)})  # offline

# In the order auto-detection tries their keys.
CATALOG: Mapping[str, ProviderSpec] = {spec.name: spec for spec in (ANTHROPIC, OPENAI, SCRIPTED)}


def provider_names() -> tuple[str, ...]:
    return tuple(CATALOG)


def provider_spec(name: str) -> ProviderSpec:
    """The record of `name`; an unknown name is `BadInput` listing the known ones."""
    spec = CATALOG.get(name)
    if spec is None:
        raise BadInput(f"unknown provider {name!r}", f"Use one of: {', '.join(CATALOG)}.")
    return spec


def preload_modules(provider_name: str) -> list[str]:
    """Modules a worker process of `provider_name` imports before its first model call
    (the SDK and its adapter); none for an unknown or SDK-less provider."""
    spec = CATALOG.get(provider_name)
    return list(spec.preload_modules) if spec else []
