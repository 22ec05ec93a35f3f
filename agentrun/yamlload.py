"""YAML parsing with libyaml's C parser when PyYAML was built with it.

The pure-Python parser costs about 0.15 s of CPU for a scripted provider's script, and every
worker process parses its script: with eight workers on two cores that alone delays the run.
The C loader builds the same Python objects and raises the same `yaml.YAMLError`.
"""

from __future__ import annotations

from typing import Any

import yaml

SafeLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str) -> Any:
    """`yaml.safe_load`, through the C parser when it is available."""
    return yaml.load(text, Loader=SafeLoader)  # noqa: S506 - a safe loader
