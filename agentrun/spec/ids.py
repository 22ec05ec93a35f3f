"""Which spec ids are safe to use: an id becomes a file name (the execution state) and a git
ref component (worker branches), so one like `../../x` must never reach either."""

from __future__ import annotations

import re

from agentrun.core.errors import SpecError
from agentrun.spec.model import Spec

SPEC_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def spec_id_problem(spec_id: str) -> str | None:
    """Why `spec_id` cannot name files and branches, or None when it can."""
    if not SPEC_ID_PATTERN.fullmatch(spec_id):
        return ("it must start with a letter or digit and contain only letters, digits, "
                "'.', '_' and '-'")
    if ".." in spec_id:
        return "it must not contain '..'"
    if spec_id.endswith((".", ".lock")):
        return "it must not end with '.' or '.lock' (git refuses such branch names)"
    return None


def require_safe_id(spec: Spec) -> Spec:
    """`spec` itself, or SpecError (exit 2) naming its id, before anything is written."""
    problem = spec_id_problem(spec.id)
    if problem:
        raise SpecError(f"spec id {spec.id!r} of {spec.path} cannot be used: {problem}",
                        "set `id:` in the spec's frontmatter to something like SPEC-042",
                        path=str(spec.path))
    return spec
