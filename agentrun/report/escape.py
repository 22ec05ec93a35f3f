"""Model text as inert markdown: it may be shown, never structure what it is written into.

Deviations, summaries, errors and file names come from a model that may follow a prompt
injection. Written raw into the spec, STATE.md or a step summary, a newline and `## Constraints`
would open a real section of the spec (one later workers are handed as spec text), a `|` a table
cell, `<!--` hide the rest of the file. `inline` makes such text one plain line.
"""

from __future__ import annotations

import re

# every character that ends a line somewhere (str.splitlines' set) or moves a terminal cursor
_BREAKS = re.compile(r"[\r\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029]+")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1b\x7f]")


def inline(text: object, limit: int | None = None, *, html: bool = True) -> str:
    """`text` on one line, with table cells, HTML (unless `html` is off: a table whose other
    rows a person wrote) and control characters neutralised."""
    value = _CONTROL.sub("", _BREAKS.sub(" ", str(text))).strip()
    value = value.replace("|", "\\|")
    if html:
        value = value.replace("<", "&lt;")
    if limit is not None and len(value) > limit:
        value = value[:limit - 3] + "..."
    return value
