"""Shared pytest fixtures."""

from __future__ import annotations

import compileall
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_model_server import FakeModelServer

import agentrun


def pytest_configure(config: pytest.Config) -> None:
    """Byte-compile the package once, before any test. The suite starts about a thousand
    `agentrun` processes; where PYTHONDONTWRITEBYTECODE is set (CI images often set it) none of
    them may write the compiled modules, so each would compile the whole package from source
    again — about 0.2 s of CPU a process."""
    if not hasattr(config, "workerinput"):  # the controller, or a run without xdist
        compileall.compile_dir(Path(agentrun.__file__).parent, quiet=1)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` is two test processes per core: the end-to-end tests spend much of their time
    waiting (on workers, scripted model latency, timeouts, pipes), and a second process per
    core keeps the core busy meanwhile."""
    return 2 * len(os.sched_getaffinity(0))


@pytest.fixture
def fake_model_server() -> Iterator[FakeModelServer]:
    """A running `FakeModelServer` on 127.0.0.1 (see tests/fake_model_server.py)."""
    with FakeModelServer() as server:
        yield server


@pytest.fixture
def bystander() -> Iterator[subprocess.Popen]:
    """A process group of the user's that agentrun did not start: it must survive the run."""
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()
