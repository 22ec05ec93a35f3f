"""Model prices: lookup by exact name and prefix, config overrides, unknown models."""

from __future__ import annotations

import pytest

from agentrun.core.errors import BadInput
from agentrun.core.usage import Usage
from agentrun.providers.pricing import PRICES, Price, cost_usd, price_for

M = 1_000_000


def test_each_token_kind_is_priced():
    usage = Usage(input_tokens=1000, output_tokens=2000, cache_read_tokens=3000,
                  cache_write_tokens=4000)
    expected = (1000 * 3.0 + 2000 * 15.0 + 3000 * 0.30 + 4000 * 3.75) / M
    assert cost_usd("claude-sonnet-4-6", usage) == pytest.approx(expected)


@pytest.mark.parametrize("model, usage, usd", [
    ("claude-sonnet-4-5", Usage(input_tokens=M), 3.0),
    ("claude-opus-4-1", Usage(output_tokens=M), 75.0),
    ("claude-opus-4-6", Usage(output_tokens=M), 25.0),
    ("claude-haiku-4-5", Usage(cache_read_tokens=M), 0.10),
    ("gpt-4o", Usage(input_tokens=M, output_tokens=M), 12.5),
    ("gpt-4o-mini", Usage(input_tokens=M), 0.15),
    ("gpt-4.1-nano", Usage(cache_read_tokens=M), 0.025),
    ("o4-mini", Usage(output_tokens=M), 4.40),
    ("gpt-5", Usage(input_tokens=M), 1.25),
    ("gpt-5.4-mini", Usage(output_tokens=M), 4.50),
])
def test_exact_names(model, usage, usd):
    assert cost_usd(model, usage) == pytest.approx(usd)


@pytest.mark.parametrize("model, family", [
    ("claude-sonnet-4-5-20250929", "claude-sonnet-4"),
    ("claude-3-5-sonnet-20241022", "claude-3-5-sonnet"),
    ("claude-3-7-sonnet-latest", "claude-3-7-sonnet"),
    ("claude-haiku-4-5@20251001", "claude-haiku-4"),
    ("gpt-4o-2024-08-06", "gpt-4o"),
    ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),  # the longest prefix wins
    ("gpt-4.1-mini-2025-04-14", "gpt-4.1-mini"),
    ("o3-mini-2025-01-31", "o3-mini"),
    ("openai:gpt-4o", "gpt-4o"),
    ("anthropic:claude-opus-4-1", "claude-opus-4-1"),
    ("GPT-4o", "gpt-4o"),
])
def test_prefix_and_prefixed_names(model, family):
    assert price_for(model) == PRICES[family]


@pytest.mark.parametrize("model", ["llama3.1:8b", "qwen2.5-coder", "gpt-5.6-sol", "gpt-4o1",
                                   "claude-unknown", ""])
def test_unknown_models_cost_none_not_zero(model):
    assert cost_usd(model, Usage(input_tokens=100, output_tokens=100)) is None


def test_scripted_costs_nothing():
    assert cost_usd("scripted", Usage(1000, 1000, 1000, 1000)) == 0.0


def test_openai_cache_writes_bill_as_input():
    assert price_for("gpt-4.1").cache_write == price_for("gpt-4.1").input


def test_table_is_sane():
    for name, p in PRICES.items():
        if name == "scripted":
            continue
        assert p.output >= p.input > 0, name
        assert 0 < p.cache_read <= p.input, name
        assert p.cache_write >= p.input, name


def test_overrides_add_and_replace_prices():
    overrides = {"llama3.1": {"input": 0.1, "output": 0.2},
                 "gpt-4o": {"input": 1, "output": 2, "cache_read": 0.5, "cache_write": 1}}
    assert price_for("llama3.1:8b", overrides) is None  # ":" is not a version boundary
    assert price_for("llama3.1-8b", overrides) == Price(0.1, 0.2, 0.1, 0.1)
    assert price_for("gpt-4o", overrides) == Price(1.0, 2.0, 0.5, 1.0)
    assert price_for("gpt-4o-2024-08-06", overrides) == Price(1.0, 2.0, 0.5, 1.0)
    assert price_for("gpt-4o-mini", overrides) == PRICES["gpt-4o-mini"]  # not overridden
    assert cost_usd("llama3.1", Usage(input_tokens=M, output_tokens=M), overrides) == \
        pytest.approx(0.3)


@pytest.mark.parametrize("overrides, problem", [
    ({"m": {"output": 1}}, "pricing.m.input is missing"),
    ({"m": {"input": 1}}, "pricing.m.output is missing"),
    ({"m": {"input": "cheap", "output": 1}}, "pricing.m.input must be a non-negative number"),
    ({"m": {"input": -1, "output": 1}}, "pricing.m.input must be a non-negative number"),
    ({"m": {"input": 1, "output": 1, "per_call": 2}}, "unknown key(s) ['per_call']"),
    ({"m": 3}, "pricing.m must be a mapping"),
    (["m"], "`pricing` must be a mapping"),
])
def test_bad_overrides_name_the_entry(overrides, problem):
    with pytest.raises(BadInput) as info:
        cost_usd("m", Usage(), overrides)
    assert problem in info.value.message and info.value.hint
