"""Model prices (USD per million tokens) and the cost of a call's usage.

Names are matched exactly, then by the longest prefix that ends at a "-" or "@" (so the snapshot
"claude-sonnet-4-5-20250929" finds "claude-sonnet-4", but "gpt-5.6" does not take "gpt-5"'s
price). A project may override or add prices in
`.specflow/config.yaml` under `pricing:`. Unknown models cost `None`, never a silent 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentrun.errors import BadInput
from agentrun.providers.base import Usage
from agentrun.providers.tokens import bare_model, match_model


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


# Published list prices (standard tier, 5-minute cache writes). Prices change: a project can
# correct or add any model under `pricing:` in .specflow/config.yaml.
PRICES: dict[str, Price] = {
    # Anthropic
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
    # OpenAI (cache_read = cached input)
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
    # offline
    "scripted": _p(0.0, 0.0, 0.0, 0.0),
}

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
