"""What `run` and `aggregate` give CI systems: the live event stream, JUnit XML, and the GitHub
job summary and annotations."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrun.errors import BadInput

if TYPE_CHECKING:
    from agentrun.report.execution_state import RunState
    from agentrun.spec.model import Spec

EVENTS_HELP = ("Stream every run event as one JSON line, flushed as it happens, to FILE "
               "(or - for stderr), for other tools to consume.")
JUNIT_HELP = ("Write a JUnit XML report to FILE: one test case per task group (failed → "
              "failure, blocked → skipped).")

Event = dict[str, Any]


@contextlib.contextmanager
def event_stream(target: str | None, forward: Callable[[Event], None], out=None
                 ) -> Iterator[Callable[[Event], None]]:
    """A callback that writes each event as an NDJSON line to `target`, then `forward`s it.

    A consumer that goes away (broken pipe, full disk) stops the stream, not the run.
    """
    if not target:
        yield forward
        return
    if target == "-":
        fh, close = sys.stderr, False
    else:
        try:
            fh = open(target, "w", encoding="utf-8")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise BadInput(f"cannot write events to {target}: {exc.strerror or exc}",
                           hint="pass a writable file path to --events, or - for stderr") \
                from None
        close = True
    broken: list[str] = []

    def emit(event: Event) -> None:
        if not broken:
            try:
                fh.write(json.dumps(event, default=str, ensure_ascii=False) + "\n")
                fh.flush()
            except (OSError, ValueError) as exc:
                broken.append(str(exc))
                if out is not None:
                    out.warn(f"event stream to {target} stopped: {exc}")
        forward(event)

    try:
        yield emit
    finally:
        if close:
            with contextlib.suppress(OSError):
                fh.close()


def publish_reports(out, state: RunState, spec: Spec, junit: Path | None,
                    settled: Collection[str] = ()) -> None:
    """JUnit XML when asked for, and the GitHub summary/annotations when running there.

    Groups in `settled` get no annotation: an aggregate leaves the earlier waves' groups to the
    aggregates that annotated them already, so a failure is reported once per workflow run.
    """
    from agentrun.report.github import publish, run_annotations, run_summary_markdown

    if junit is not None:
        from agentrun.report.junit import run_junit, write_junit

        try:
            write_junit(Path(junit), run_junit(state))
        except OSError as exc:
            out.warn(f"could not write the JUnit report {junit}: {exc.strerror or exc}")
    fresh = state.model_copy(update={"groups": {g: s for g, s in state.groups.items()
                                                if g not in settled}})
    try:
        publish(run_summary_markdown(state, spec.title),
                run_annotations(fresh, {g.id: g.line for g in spec.groups}))
    except OSError as exc:
        out.warn(f"could not write the GitHub step summary: {exc.strerror or exc}")
