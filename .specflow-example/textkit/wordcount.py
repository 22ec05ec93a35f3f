"""Word counting that keeps apostrophes and hyphens inside words ("don't", "well-known")."""

from __future__ import annotations

import re
from collections import Counter

WORD_RE = re.compile(r"[^\W_]+(?:['\u2019-][^\W_]+)*")


def words(text: str) -> list[str]:
    """The words of `text` in order, lower-cased."""
    return [word.lower() for word in WORD_RE.findall(text)]


def word_count(text: str) -> int:
    return len(words(text))


def word_frequencies(text: str) -> dict[str, int]:
    return dict(Counter(words(text)))


def top_words(text: str, n: int = 10) -> list[tuple[str, int]]:
    """The `n` most frequent words; ties are broken alphabetically so output is stable."""
    counts = Counter(words(text))
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:n]
