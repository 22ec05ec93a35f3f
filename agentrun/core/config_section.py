"""The base of every section of `.specflow/config.yaml` (config.py), and of the sandbox limits
an assignment carries to a worker (core/limits.py): one place for how a section validates."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator


class ConfigSection(BaseModel):
    """Strict and frozen; an unknown key is an error (a misspelt key would otherwise do
    nothing)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _without_nulls(cls, data: Any) -> Any:
        """`key:` with no value means "not set", as it always has: the default applies."""
        if isinstance(data, Mapping):
            return {k: v for k, v in data.items() if v is not None}
        return data
