"""URL slugs from arbitrary titles."""

from __future__ import annotations

import re
import unicodedata

_NOT_ALNUM = re.compile(r"[^a-z0-9]+")


def slugify(text: str, separator: str = "-", max_length: int | None = None) -> str:
    """Lower-case ASCII slug: accents are folded, every other run of characters becomes one
    separator, so titles in any script give stable, URL-safe ids."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = _NOT_ALNUM.sub(separator, folded.lower()).strip(separator)
    if max_length is not None and len(slug) > max_length:
        # Cut, then drop a dangling separator so the slug never ends with one.
        slug = slug[:max_length].rstrip(separator)
    return slug
