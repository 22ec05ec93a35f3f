"""Specifications: markdown -> `Spec` (parse) and lossless edits back into the file (writeback)."""

from agentrun.spec.model import Criterion, Section, Spec, TaskGroup
from agentrun.spec.parse import load_spec, parse_spec
from agentrun.spec.writeback import (
    append_to_section,
    next_audit_version,
    set_frontmatter_value,
    upsert_section,
)

__all__ = ["Criterion", "Section", "Spec", "TaskGroup", "append_to_section", "load_spec",
           "next_audit_version", "parse_spec", "set_frontmatter_value", "upsert_section"]
