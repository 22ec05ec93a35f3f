"""Registers each command module with the app. Command modules import heavy code lazily."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    if getattr(app, "_agentrun_registered", False):
        return
    app._agentrun_registered = True  # type: ignore[attr-defined]
