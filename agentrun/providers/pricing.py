"""Model prices (USD per million tokens) and the cost of a call's usage.

Names are matched exactly, then by the longest prefix that ends at a "-" or "@" (so the snapshot
"claude-sonnet-4-5-20250929" finds "claude-sonnet-4", but "gpt-5.6" does not take "gpt-5"'s
price). The list prices come from each provider's record in catalog.py; a project may
override or add prices in `.specflow/config.yaml` under `pricing:`. Unknown models cost `None`,
never a silent 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentrun.core.errors import BadInput
from agentrun.core.usage import Usage
from agentrun.providers.catalog import CATALOG, Price
from agentrun.providers.tokens import bare_model, match_model

# Every provider's list prices in one table (model names do not collide across providers).
PRICES: dict[str, Price] = {model: price for spec in CATALOG.values()
                            for model, price in spec.prices.items()}

_OVERRIDE_KEYS = ("input", "output", "cache_read", "cache_write")


def _lookup(table: Mapping[str, Price], name: str) -> Price | None:
    key = match_model(table, name)
    return table[key] if key is not None else None


def parse_overrides(overrides: Mapping[str, Any] | None) -> dict[str, Price]:
    """The config's `pricing:` mapping → prices; a bad entry raises `BadInput` naming it.

    `input` and `output` are required; `cache_read` and `cache_write` default to `input`.
    """
    if not overrides:
        return {}
    if not isinstance(overrides, Mapping):
        raise BadInput("config `pricing` must be a mapping of model name to prices",
                       "Write e.g. `pricing: {my-model: {input: 1.0, output: 2.0}}`.")
    out: dict[str, Price] = {}
    for model, entry in overrides.items():
        where = f"config pricing.{model}"
        if not isinstance(entry, Mapping):
            raise BadInput(f"{where} must be a mapping with input/output prices",
                           "Give USD per million tokens: {input: .., output: .., "
                           "cache_read: .., cache_write: ..}.")
        unknown = set(entry) - set(_OVERRIDE_KEYS)
        if unknown:
            raise BadInput(f"{where}: unknown key(s) {sorted(map(str, unknown))}",
                           f"Use only {', '.join(_OVERRIDE_KEYS)}.")
        values: dict[str, float] = {}
        for key in _OVERRIDE_KEYS:
            value = entry.get(key)
            if value is None:
                if key in ("input", "output"):
                    raise BadInput(f"{where}.{key} is missing",
                                   "Give USD per million tokens for input and output.")
                value = values["input"]
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise BadInput(f"{where}.{key} must be a non-negative number, got {value!r}",
                               "Give USD per million tokens, e.g. 3.0.")
            values[key] = float(value)
        out[bare_model(str(model))] = Price(**values)
    return out


def price_for(model: str, overrides: Mapping[str, Any] | None = None) -> Price | None:
    """The price of `model`; overrides replace or extend the built-in table, and the most
    specific name wins either way (an override for "gpt-4o" does not touch "gpt-4o-mini")."""
    table = {**PRICES, **parse_overrides(overrides)}
    return _lookup(table, bare_model(model))


def cost_usd(model: str, usage: Usage, overrides: Mapping[str, Any] | None = None
             ) -> float | None:
    """USD for `usage` on `model`, or None when the model's price is unknown."""
    price = price_for(model, overrides)
    if price is None:
        return None
    total = (usage.input_tokens * price.input + usage.output_tokens * price.output
             + usage.cache_read_tokens * price.cache_read
             + usage.cache_write_tokens * price.cache_write)
    return total / 1_000_000
