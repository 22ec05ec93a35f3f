"""Replace known secret values in text, whole or in part.

A secret can leak in pieces: a line-wrapped key, a key cut by output truncation, a prefix
echoed in an error. So besides whole values, any run of `FRAGMENT` or more consecutive
characters taken from a secret of at least that length is replaced. Twelve characters of a
random key do not occur in ordinary text by chance, while shorter runs would (a key starting
`sk-ant-api03-` shares its first characters with every other key of its kind, which is why the
window is not smaller).
"""

from __future__ import annotations

from collections.abc import Iterable

REDACTED = "[REDACTED]"
FRAGMENT = 12


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret value, and every FRAGMENT-long piece of one, replaced."""
    values = [s for s in secrets if s]
    for value in sorted(values, key=len, reverse=True):
        if value in text:
            text = text.replace(value, REDACTED)
    grams = {v[i:i + FRAGMENT] for v in values if len(v) >= FRAGMENT
             for i in range(len(v) - FRAGMENT + 1)}
    if not grams or len(text) < FRAGMENT:
        return text
    return _redact_fragments(text, grams)


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
