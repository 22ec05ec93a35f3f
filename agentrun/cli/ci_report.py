"""What `run` and `aggregate` give CI systems: the live event stream, JUnit XML, and the GitHub
job summary and annotations."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrun.core.errors import BadInput

if TYPE_CHECKING:  # the event classes load with the run: `--help` does not need pydantic
    from agentrun.cli.output import Output
    from agentrun.core.events import BaseEvent
    from agentrun.report.execution_state import RunState
    from agentrun.spec.model import Spec

EVENTS_HELP = ("Stream every run event as one JSON line, flushed as it happens, to FILE (or - "
               "for stderr, which then carries nothing else: the log goes to stdout, or only "
               "into the --json document), for other tools to consume; the last line is a "
               "run_done event saying how the run ended. Schema: docs/events.md.")
JUNIT_HELP = ("Write a JUnit XML report to FILE: one test case per task group (failed → "
              "failure, blocked → skipped).")

class EventStream:
    """Writes each event as an NDJSON line to its target (none: writes nothing), then passes
    it on to `forward` (the progress display, set once it exists).

    It ends with a `run_done` event whatever happens: the run's own, or one made here from
    the error that stopped the command. A consumer that goes away (broken pipe, full disk)
    stops the stream, not the run.
    """

    def __init__(self, target: str | None, out: Output | None = None) -> None:
        self.target = target
        self.out = out
        self.forward: Callable[[BaseEvent], None] = lambda event: None
        self.ended = False
        self.broken = False
        self._close = False
        self._fh: Any = None
        if not target:
            return
        if target == "-":
            self._fh = sys.stderr
            return
        try:
            self._fh = open(target, "w", encoding="utf-8")  # noqa: SIM115 - closed by close()
        except OSError as exc:
            raise BadInput(f"cannot write events to {target}: {exc.strerror or exc}",
                           hint="pass a writable file path to --events, or - for stderr") \
                from None
        self._close = True

    def __call__(self, event: BaseEvent) -> None:
        self.write(event)
        self.forward(event)

    def write(self, event: BaseEvent) -> None:
        from agentrun.core.events import RunDoneEvent, dumps

        if isinstance(event, RunDoneEvent):
            self.ended = True
        if self._fh is None or self.broken:
            return
        try:
            self._fh.write(dumps(event) + "\n")
            self._fh.flush()
        except (OSError, ValueError) as exc:
            self.broken = True
            if self.out is not None:
                self.out.warn(f"event stream to {self.target} stopped: {exc}")

    def stopped(self, exc: BaseException) -> None:
        """The command stopped with `exc` before the run said how it ended: say it."""
        if self.ended:
            return
        from agentrun.cli.failures import user_error
        from agentrun.core.errors import EXIT_INTERRUPTED, Interrupted
        from agentrun.core.events import ErrorInfo, RunDoneEvent

        if isinstance(exc, KeyboardInterrupt | Interrupted) or type(exc).__name__ == "Abort":
            event = RunDoneEvent(status="interrupted", exit_code=EXIT_INTERRUPTED)
        elif isinstance(exc, Exception):
            error = user_error(exc)
            event = RunDoneEvent(status="error", exit_code=error.exit_code, error=ErrorInfo(
                type=type(error).__name__, message=error.message, hint=error.hint))
        else:
            return
        self.write(event)

    def close(self) -> None:
        if self._close:
            with contextlib.suppress(OSError):
                self._fh.close()


@contextlib.contextmanager
def event_stream(target: str | None, forward: Callable[[BaseEvent], None] | None = None,
                 out: Output | None = None) -> Iterator[EventStream]:
    """An `EventStream` to `target` for the length of the block, which ends with a
    `run_done` event even when the block raises."""
    stream = EventStream(target, out)
    if forward is not None:
        stream.forward = forward
    try:
        yield stream
    except BaseException as exc:
        stream.stopped(exc)
        raise
    finally:
        stream.close()


def publish_reports(out: Output, state: RunState, spec: Spec, junit: Path | None,
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
    try:  # annotations go with the log (not onto a stream that `--events -` took)
        publish(run_summary_markdown(state, spec.title),
                run_annotations(fresh, {g.id: g.line for g in spec.groups}), stream=out.log)
    except OSError as exc:
        out.warn(f"could not write the GitHub step summary: {exc.strerror or exc}")
