"""Helpers shared by command modules: loading the project and spec, common options."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from agentrun.app.loading import load, pin_to_last_run, suggest_spec
from agentrun.cli.output import Output, detect_mode
from agentrun.core.fsutil import relpath
from agentrun.core.status import RunMode  # `--mode`: help lists the values, typer checks them

if TYPE_CHECKING:
    from agentrun.spec.model import Spec

SPEC_ARG = typer.Argument(None, metavar="[SPEC]", show_default=False,
                          help="Spec file or id (default: the active spec in .specflow/STATE.md).")
__all__ = ["CHANGED_OPT", "FORMAT_OPT", "JSON_OPT", "SPEC_ARG", "RunMode", "kept_lines", "load",
           "output", "pin_to_last_run", "relpath", "suggest_spec"]

JSON_OPT = typer.Option(False, "--json", help="Print one JSON document on stdout.")
FORMAT_OPT = typer.Option(
    None, "--format", metavar="native|speckit|kiro|gsd|taskmaster",
    help="The plan's format (default: found from its content; see docs/formats.md).")
CHANGED_OPT = typer.Option(
    False, "--changed",
    help="Only the groups whose tasks, files or dependencies changed since they last "
         "landed, and the groups that depend on them; the others are kept.")


def output(json_flag: bool, events: str | None = None) -> Output:
    """The command's output; `events`: its `--events` target (`-` takes stderr)."""
    return Output(detect_mode(json_flag), events_on_stderr=events == "-")


def kept_lines(spec: Spec) -> list[str]:
    """One line per group the run leaves as it is, and one naming the plan it was read from."""
    from agentrun.formats.render import FORMAT_NAMES

    lines = []
    if spec.source is not None:
        lines.append(f"Plan: {FORMAT_NAMES.get(spec.source.format, spec.source.format)} "
                     f"{spec.source.path} (record: {relpath(spec.path)})")
    for k in spec.kept:
        ids = f" ({', '.join(k.source_ids)})" if k.source_ids else ""
        lines.append(f"Kept: {k.id}{ids} — {k.reason}")
    return lines


def groups_doc(spec: Spec) -> dict[str, Any]:
    """`plan --json`'s account of every group: the ones planned, with the source task ids
    each holds, and the kept ones."""
    from dataclasses import asdict

    return {
        "groups": [{"id": g.id, "title": g.title, "source_ids": g.source_ids,
                    "dependencies": g.dependencies, "files": g.files, "checks": g.checks}
                   for g in spec.groups],
        "kept": [asdict(k) for k in spec.kept],
        "source": asdict(spec.source) if spec.source is not None else None,
    }
