"""The run's provider, handed to a worker pool server started before the run knew it.

`agentrun run` starts the pool's server as its first step (`pool.start`): the server imports
the worker code while the run loads its project, spec and plan, and imports the provider's SDK
once the run has named it. The name goes through a file in a private folder: the run writes it
whole (a rename), the server's preload `agentrun.preload_provider` looks for it every few
milliseconds. A server whose run has ended without naming one (bad input, a killed process)
stops looking as soon as its parent is gone, and then exits with it, as every server of the
standard library's forkserver does. Either side removes the folder when it is done with it,
and a run sweeps one whose processes were both killed (`processes.discard_stale_temp_dirs`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator, MutableMapping
from pathlib import Path

from agentrun.processes import owned_temp_dir

ENV = "AGENTRUN_POOL_HANDOFF"  # "<the run's pid> <the name's file>": set for the server's start
_POLL_S = 0.005


class Handoff:
    """The run's side: a private folder the provider's name is written into."""

    def __init__(self) -> None:
        self.folder = owned_temp_dir("pool")  # 0700, ours alone; swept if we are killed
        self.path = self.folder / "provider"
        self.given = False

    @contextlib.contextmanager
    def announced(self) -> Iterator[None]:
        """The environment a server started now inherits names this handoff (and this
        process, the one it waits for); no other process started afterwards does."""
        os.environ[ENV] = f"{os.getpid()} {self.path}"
        try:
            yield
        finally:
            del os.environ[ENV]

    def give(self, provider: str) -> bool:
        """Name the provider, once (a server imports one SDK): the server reads it at once and
        removes the folder. False when it cannot be written (the folder was removed under us,
        the disk is full): the server would wait for it as long as this process lives."""
        if self.given:
            return True
        self.given = True
        part = self.folder / "provider.part"
        try:
            part.write_text(provider, encoding="utf-8")
            os.replace(part, self.path)
        except OSError:
            return False
        return True

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def receive(environ: MutableMapping[str, str]) -> str | None:
    """The server's side: the provider's name once the run gives it; None when the server was
    started without a handoff, or its run ended without naming one."""
    value = environ.pop(ENV, "")  # the server's workers inherit its environment: not this
    parent, _, path = value.partition(" ")
    name = Path(path)
    if not (parent.isdigit() and name.parent.name.startswith(f"agentrun-pool-{parent}-")):
        return None  # not a handoff's folder (`owned_temp_dir`): nothing here is ours to touch
    try:
        while os.getppid() == int(parent):  # the run that started us is still there
            with contextlib.suppress(FileNotFoundError):
                return name.read_text(encoding="utf-8").strip()
            time.sleep(_POLL_S)
        return None
    finally:
        shutil.rmtree(name.parent, ignore_errors=True)
