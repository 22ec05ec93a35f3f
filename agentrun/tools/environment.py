"""The environment `run_command` gives commands, and redaction of the secrets kept out of it."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from agentrun.secrets import is_secret_name
from agentrun.tools.base import CommandPolicy

_MIN_REDACT_LEN = 6
REDACTED = "[REDACTED]"


def scrubbed_env(policy: CommandPolicy,
                 environ: Mapping[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    """The child environment without secrets, and the removed secret values (for redaction).

    Also makes git and pagers non-interactive so nothing waits for input that never comes.
    """
    source = os.environ if environ is None else environ
    env: dict[str, str] = {}
    secrets: list[str] = []
    for name, value in source.items():
        if is_secret_name(name, policy.secret_suffixes):
            if len(value) >= _MIN_REDACT_LEN and name != "SSH_AUTH_SOCK":
                secrets.append(value)
        else:
            env[name] = value
    env.update(GIT_TERMINAL_PROMPT="0", PAGER="cat", GIT_PAGER="cat", GIT_EDITOR="true")
    return env, sorted(set(secrets), key=len, reverse=True)


def secret_values(policy: CommandPolicy, environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of the secret variables of this process, longest first, for `redact`."""
    return scrubbed_env(policy, environ)[1]


def redact(text: str, secrets: Iterable[str]) -> str:
    """Replace every secret value in `text` (longest first) with `[REDACTED]`."""
    for value in secrets:
        if value and value in text:
            text = text.replace(value, REDACTED)
    return text
