"""textkit: small, dependency-free text utilities."""

from textkit.slugify import slugify
from textkit.wordcount import top_words, word_count, word_frequencies, words

__all__ = [
    "slugify",
    "top_words",
    "word_count",
    "word_frequencies",
    "words",
]

__version__ = "0.3.0"
