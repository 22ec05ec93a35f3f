"""Events for tests: a valid instance of any event class, drawn from its fields' types."""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel

from agentrun.core import events as ev


def kind(cls: type[ev.BaseEvent]) -> str:
    return typing.cast(str, cls.model_fields["type"].default)


def _value(annotation: Any, name: str) -> Any:
    """A valid value of `annotation` (not None): drawn from the type, so a new field is
    covered without this test knowing it."""
    origin = get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return _value(next(a for a in get_args(annotation) if a is not type(None)), name)
    if origin is Literal:
        return get_args(annotation)[0]
    if origin is tuple:
        return (_value(get_args(annotation)[0], name),)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation(**{n: _value(f.annotation, n) for n, f in
                             annotation.model_fields.items()})
    for base, value in ((bool, True), (int, 7), (float, 1.25), (str, f"{name} ✓")):
        if annotation is base or getattr(annotation, "__origin__", None) is base or (
                isinstance(annotation, type) and issubclass(annotation, base)):
            return value
    metadata = get_args(annotation)  # Annotated[int, Ge(0)] (NonNegativeInt)
    if metadata:
        return _value(metadata[0], name)
    raise AssertionError(f"no sample for {name}: {annotation!r}")


def sample(cls: type[ev.BaseEvent], *, optional: bool = True) -> ev.BaseEvent:
    """An instance of `cls` with every field set (`optional=False`: the optional ones None)."""
    values = {}
    for name, f in cls.model_fields.items():
        if name in ("v", "type"):
            continue
        nullable = type(None) in get_args(f.annotation)
        values[name] = None if nullable and not optional else _value(f.annotation, name)
    return cls(**values)
