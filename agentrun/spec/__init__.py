"""Specifications: markdown -> `Spec` (parse) and lossless edits back into the file (writeback)."""

from agentrun.spec.model import Criterion, Section, Spec, TaskGroup
from agentrun.spec.parse import load_spec, parse_spec

__all__ = ["Criterion", "Section", "Spec", "TaskGroup", "load_spec", "parse_spec"]
