"""`agentrun worker`: run one assignment (the process the orchestrator starts, or a CI job)."""

from __future__ import annotations

from pathlib import Path

import typer

from agentrun.cli.common import JSON_OPT, output
from agentrun.errors import EXIT_FAILED, EXIT_OK


def worker(
    assignment: Path = typer.Option(..., "--assignment", help="Assignment JSON to execute."),
    json_out: bool = JSON_OPT,
) -> None:
    """Execute one worker assignment and write its result JSON (exit 1 unless complete)."""
    import signal
    import threading

    from agentrun.protocol import Assignment
    from agentrun.worker import run_assignment

    out = output(json_out)
    parsed = Assignment.read(assignment)
    cancel = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: cancel.set())
    result = run_assignment(parsed, cancel)
    if out.mode == "json":
        out.json(result.model_dump())
    else:
        out.stdout.print(f"{', '.join(result.groups)}: {result.status} "
                         f"({len(result.commits)} commit(s), stop: {result.stop_reason})")
        if result.error:
            out.stdout.print(f"error: {result.error}")
        out.stdout.print(f"result: {parsed.result_path}")
    if result.stop_reason == "interrupted":
        raise typer.Exit(130)
    raise typer.Exit(EXIT_OK if result.status == "complete" else EXIT_FAILED)
