"""Which environment variables hold secrets, so no child process, log or trace receives them.

Used for the commands a model runs and for every git command agentrun runs: a hook or a
`core.fsmonitor` command that a worker managed to plant must never find an API key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

SECRET_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD")
SECRET_NAMES = frozenset({
    "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GITHUB_TOKEN", "GH_TOKEN", "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID", "ANTHROPIC_AUTH_TOKEN", "AZURE_OPENAI_API_KEY",
    "HF_TOKEN", "NPM_TOKEN", "PYPI_TOKEN", "GOOGLE_API_KEY", "SSH_AUTH_SOCK"})


def is_secret_name(name: str, suffixes: Iterable[str] = SECRET_SUFFIXES) -> bool:
    upper = name.upper()
    return upper in SECRET_NAMES or any(upper.endswith(s.upper()) for s in suffixes)


def without_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` minus every variable whose name marks it as a secret."""
    return {k: v for k, v in environ.items() if not is_secret_name(k)}
