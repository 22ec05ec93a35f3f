"""A task group's fingerprint: what a worker was asked to do, as one hash.

A resume reuses a group's finished work only while the group still asks for the same thing,
and `--changed` runs only the groups that ask for something new; both compare these hashes.
A fingerprint covers the group's task text, the files it names and the ids of the groups it
depends on — not its title, wave, context estimate or place in the spec, which change nothing
a worker is asked to build.

Whitespace-only reflow keeps the fingerprint: a task's runs of spaces, tabs and line breaks
count as one space, and leading/trailing blanks as none (rewrapping a long task in a heading's
paragraph or re-aligning a table changes no work). Everything else counts — case, punctuation,
the order of tasks (an order can be an instruction). Files and dependencies are sets: their
order does not count.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Protocol

from agentrun.spec.model import Spec

_SPACE = re.compile(r"\s+")
VERSION = 1  # in the hashed text: a change of what is hashed changes every fingerprint


def _task(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


class Group(Protocol):
    """What a fingerprint covers: a spec's `TaskGroup`, or the group a worker was assigned."""

    @property
    def tasks(self) -> Sequence[str]: ...
    @property
    def files(self) -> Sequence[str]: ...
    @property
    def dependencies(self) -> Sequence[str]: ...


def group_fingerprint(group: Group) -> str:
    """sha256 (hex) of one group's tasks (in order, whitespace-normalised), files and
    dependency ids (both sorted, duplicates dropped)."""
    payload = {"v": VERSION,
               "tasks": [t for t in (_task(t) for t in group.tasks) if t],
               "files": sorted(set(group.files)),
               "dependencies": sorted(set(group.dependencies))}
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def group_fingerprints(spec: Spec) -> dict[str, str]:
    """Each task group's fingerprint, by group id, in the spec's group order."""
    return {g.id: group_fingerprint(g) for g in spec.groups}
