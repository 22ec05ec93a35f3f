"""The limits of a worker's work and their defaults: the only copies of these numbers.

The project's config (config.py), the assignment (protocol.py) and the agent loop
(agent/terminator.py) all start from them.
"""

from __future__ import annotations

from pydantic import Field

from agentrun.core.config_section import ConfigSection

DEFAULT_TOKEN_BUDGET = 100_000  # per worker, all attempts and sub-agents together
DEFAULT_WORKER_TIMEOUT_S = 1800.0  # one worker, start to result
DEFAULT_RETRIES = 3  # fresh attempts after a failed one
DEFAULT_REQUEST_RETRIES = 6  # retries of one model request on 429, 529, 5xx, timeouts
DEFAULT_REQUEST_TIMEOUT_S = 600.0  # one model request
DEFAULT_MAX_WRITE_BYTES = 1_000_000  # one write_file call


class SandboxLimits(ConfigSection):
    """`sandbox: limits:` — what a sandboxed command may take: the largest file it may write,
    how many processes and threads may run in its sandbox at once, and the memory each of its
    processes may allocate (MB; 0: no limit; memory by default half the machine's, at least
    2 GiB). Far above what a test suite needs; a runaway command fails instead of filling the
    disk or the memory of the machine the orchestrator runs on."""

    file_size_mb: int = Field(4096, ge=0)
    processes: int = Field(4096, ge=0)
    memory_mb: int | None = Field(None, ge=0)
