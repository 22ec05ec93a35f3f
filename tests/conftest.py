"""Shared pytest fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_model_server import FakeModelServer


@pytest.fixture
def fake_model_server() -> Iterator[FakeModelServer]:
    """A running `FakeModelServer` on 127.0.0.1 (see tests/fake_model_server.py)."""
    with FakeModelServer() as server:
        yield server
