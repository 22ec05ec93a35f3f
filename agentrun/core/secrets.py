"""Secrets: which values are secret, and the one way they are kept out of what is shown.

Which environment variables hold secrets, so no child process, log or trace receives them:
used for the commands a model runs and for every git command agentrun runs (a hook or a
`core.fsmonitor` command that a worker managed to plant must never find an API key).

Which values to redact: those of the variables named as secrets, and the credentials of any
server URL among the values (`secret_values`). Text that quotes them is redacted by `redact`:
the whole value, and any run of `FRAGMENT` or more consecutive characters taken from one. A
secret leaks in pieces too: a line-wrapped key, a key cut by output truncation, a prefix echoed
in an error. Twelve characters of a random key do not occur in ordinary text by chance, while
shorter runs would (a key starting `sk-ant-api03-` shares its first characters with every other
key of its kind, which is why the window is not smaller).

What is written down to be kept (transcripts, recordings, result files, error messages) goes
through a `Redactor`, which also replaces key-shaped tokens (`sk-...`, `ghp_...`, `AKIA...`)
whose value this process never held. What a model reads (a file, a command's output) is
redacted of known values only: a key-shaped test fixture must stay readable to be edited.

A server URL is shown in its public form (`public_url`: no userinfo, query or fragment).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

SECRET_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD")
SECRET_NAMES = frozenset({
    "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GITHUB_TOKEN", "GH_TOKEN", "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID", "ANTHROPIC_AUTH_TOKEN", "AZURE_OPENAI_API_KEY",
    "HF_TOKEN", "NPM_TOKEN", "PYPI_TOKEN", "GOOGLE_API_KEY", "SSH_AUTH_SOCK"})
REDACTED = "[REDACTED]"
FRAGMENT = 12
MIN_SECRET_LEN = 6  # shorter values match too much ordinary text to be redacted

_KEY_SHAPES = [
    re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"sk-[A-Za-z0-9_\-]{16,}"),
    re.compile(r"gh[pousr]_[A-Za-z0-9]{20,}"),
    re.compile(r"github_pat_[A-Za-z0-9_]{20,}"),
    re.compile(r"xox[abprs]-[A-Za-z0-9\-]{10,}"),
    re.compile(r"AKIA[0-9A-Z]{16}"),
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._\-]{16,}"),
]
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>`]+")


def is_secret_name(name: str, suffixes: Iterable[str] = SECRET_SUFFIXES) -> bool:
    upper = name.upper()
    return upper in SECRET_NAMES or any(upper.endswith(s.upper()) for s in suffixes)


def without_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` minus every variable whose name marks it as a secret."""
    return {k: v for k, v in environ.items() if not is_secret_name(k)}


def secret_values(environ: Mapping[str, str],
                  suffixes: Iterable[str] = SECRET_SUFFIXES) -> list[str]:
    """The values to redact: of the variables whose names mark them as secrets, and the
    credentials in any server URL among the values; longest first, so that overlapping values
    are replaced whole."""
    suffixes = tuple(suffixes)
    found = {value for name, value in environ.items()
             if name != "SSH_AUTH_SOCK" and is_secret_name(name, suffixes)}
    found.update(part for value in environ.values() if "://" in value
                 for part in url_secrets(value))
    return sorted((v for v in found if len(v) >= MIN_SECRET_LEN), key=len, reverse=True)


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret value, and every FRAGMENT-long piece of one, replaced."""
    values = [s for s in secrets if len(s) >= MIN_SECRET_LEN]
    for value in sorted(values, key=len, reverse=True):
        if value in text:
            text = text.replace(value, REDACTED)
    grams = {v[i:i + FRAGMENT] for v in values if len(v) >= FRAGMENT
             for i in range(len(v) - FRAGMENT + 1)}
    if not grams or len(text) < FRAGMENT:
        return text
    return _redact_fragments(text, grams)


class Redactor:
    """Redacts what is written down to be kept: known values (`redact`) and key-shaped tokens."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = [s for s in secrets if s]

    def text(self, value: str) -> str:
        value = redact(value, self.secrets)
        for pattern in _KEY_SHAPES:
            value = pattern.sub(_replacement, value)
        return value

    def value(self, value: Any) -> Any:
        """Redact every string inside dicts, lists and tuples."""
        if isinstance(value, str):
            return self.text(value)
        if value is None or isinstance(value, int | float):  # JSON's other scalars (bool too)
            return value
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        if isinstance(value, dict | Mapping):  # a dict first: the ABC check costs more
            return {str(k): self.value(v) for k, v in value.items()}
        return value


def public_url(url: str) -> str:
    """`url` without userinfo, query string and fragment: what may be shown of a server URL
    (a proxy URL can carry credentials: `https://user:pass@proxy/v1`, `?api-key=...`)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # not parseable: keep only what surely holds no credentials
        return url.split("@")[-1].split("?")[0].split("#")[0]
    if ":" in host:
        host = f"[{host}]"
    return urlunsplit((parts.scheme, host + port, parts.path, "", ""))


def scrub_urls(text: str) -> str:
    """Every URL in `text` that carries userinfo or a query, in its public form."""
    return _URL.sub(lambda m: public_url(m.group(0)) if _private(m.group(0)) else m.group(0),
                    text)


def url_secrets(url: str) -> list[str]:
    """The parts of `url` that are credentials (the whole URL, its password, its query), for
    redaction of text that quotes them some other way."""
    if not _private(url):
        return []
    parts = urlsplit(url)
    found = [url, parts.query]
    if parts.password:
        found += [parts.password, unquote(parts.password)]
    found += [value for _, _, value in (p.partition("=") for p in parts.query.split("&"))]
    return [s for s in found if s]


def _private(url: str) -> bool:
    rest = url.split("://", 1)[-1]
    return "@" in rest.split("/", 1)[0] or "?" in url or "#" in url


def _replacement(match: re.Match[str]) -> str:
    # keep a "Bearer " prefix so the line still reads naturally
    return (match.group(1) if match.groups() else "") + REDACTED


def _redact_fragments(text: str, grams: set[str]) -> str:
    """Replace each maximal span covered by windows found in `grams`."""
    spans: list[list[int]] = []
    for i in range(len(text) - FRAGMENT + 1):
        if text[i:i + FRAGMENT] in grams:
            if spans and i <= spans[-1][1]:
                spans[-1][1] = i + FRAGMENT
            else:
                spans.append([i, i + FRAGMENT])
    if not spans:
        return text
    out, last = [], 0
    for start, end in spans:
        out += [text[last:start], REDACTED]
        last = end
    out.append(text[last:])
    return "".join(out)
