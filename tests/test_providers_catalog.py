"""One record per provider: what registry, pricing and the worker pool read from it."""

from __future__ import annotations

import importlib.util

import pytest

from agentrun.core.errors import BadInput
from agentrun.provider_choice import implied_provider
from agentrun.providers.catalog import CATALOG, preload_modules, provider_spec
from agentrun.providers.pricing import PRICES, price_for


def test_preload_modules_name_the_sdk_and_its_adapter():
    assert preload_modules("anthropic") == ["anthropic", "agentrun.providers.anthropic_provider"]
    assert preload_modules("openai") == ["openai", "agentrun.providers.openai_provider"]
    assert preload_modules("scripted") == [] and preload_modules("nope") == []
    for spec in CATALOG.values():
        for module in spec.preload_modules:
            assert importlib.util.find_spec(module) is not None, module


@pytest.mark.parametrize("name", list(CATALOG))
def test_every_provider_prices_its_default_model(name):
    spec = CATALOG[name]
    assert price_for(spec.default_model) is not None
    assert set(spec.prices) <= set(PRICES)


@pytest.mark.parametrize("name", [n for n, s in CATALOG.items() if s.model_pattern])
def test_a_providers_default_model_implies_the_provider(name):
    assert implied_provider(CATALOG[name].default_model) == name


def test_no_model_name_is_priced_by_two_providers():
    names = [model for spec in CATALOG.values() for model in spec.prices]
    assert len(names) == len(set(names))


def test_an_unknown_provider_lists_the_known_ones():
    with pytest.raises(BadInput) as info:
        provider_spec("gemini")
    assert info.value.hint == "Use one of: anthropic, openai, scripted."
