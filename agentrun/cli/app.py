"""The `agentrun` command: the Typer app and its single error boundary.

Only the standard library and `agentrun.core.errors` are imported before `main` runs, so the
signal handlers are in place from the first moment: an interrupt while the CLI is still
importing is reported like any other.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from types import FrameType
from typing import TYPE_CHECKING, Any

from agentrun.core.errors import EXIT_INTERRUPTED, AgentrunError
from agentrun.core.interrupts import RECEIVED  # the signals our handlers took

if TYPE_CHECKING:
    import typer

    from agentrun.cli.output import Output

EXIT_CODES_HELP = (
    "Exit codes: 0 success · 1 work failed, partial or blocked (or audit found critical issues)"
    " · 2 bad input (usage, invalid spec, cycle; a checkout that cannot be written: read-only,"
    " no permission, full disk; a model endpoint that does not answer or refuses the key)"
    " · 3 could not start (no model, not a git repo,"
    " dirty tree, run lock held) · 130 interrupted."
)
HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}  # inherited by every command


class Signalled(KeyboardInterrupt):
    """SIGINT or SIGTERM outside a run's own handlers (which save the run's state first)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


_DEFERRED: list[float] = []  # when an interrupt was first put off (`_raise_interrupt`)


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    """Raise the interrupt where the command is, unless that is Python's own import machinery:
    raised in a module lock's weakref callback, it would be ignored and leave the import lock
    held, so that every import on another thread waits forever. There it is sent again, once
    the machinery is done (for a second at most)."""
    if frame is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
        if not _DEFERRED:
            _DEFERRED.append(time.monotonic())
        if time.monotonic() - _DEFERRED[0] < 1.0:
            _send_again(signum)
            return
    _DEFERRED.clear()
    name = signal.Signals(signum).name
    RECEIVED.append(name)
    raise Signalled(name)


def _send_again(signum: int) -> None:
    """The signal, 10 ms from now: where the command is then, it can be raised."""
    again = threading.Timer(0.01, os.kill, (os.getpid(), signum))
    again.daemon = True
    again.start()


def _unraisable(hook: Any) -> None:
    """An interrupt raised where Python cannot raise it (a destructor, a weakref callback) is
    not lost, nor printed as "Exception ignored": it is sent again. Anything else is printed
    as Python does."""
    if isinstance(hook.exc_value, Signalled):
        _send_again(signal.Signals[hook.exc_value.name])
        return
    sys.__unraisablehook__(hook)


def trap_signals() -> None:
    """SIGINT and SIGTERM end the command as exit 130 with one line, whenever they come; a
    run replaces these handlers while it works and puts them back when it is done."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _raise_interrupt)
    sys.unraisablehook = _unraisable


def build_app() -> typer.Typer:
    """The Typer app with every command (they import their heavy code lazily)."""
    import typer

    from agentrun import __version__
    from agentrun.cli import commands

    app = typer.Typer(
        name="agentrun",
        help="Spec-driven, orchestrated execution of coding work by LLM agents.",
        epilog=EXIT_CODES_HELP,
        no_args_is_help=True,
        add_completion=True,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings=HELP_OPTIONS,
    )

    def show_version(value: bool) -> None:
        if value:
            typer.echo(f"agentrun {__version__}")
            raise typer.Exit(0)

    @app.callback()
    def _root(
        version: bool = typer.Option(False, "--version", "-V", callback=show_version,
                                     is_eager=True, help="Show the version and exit."),
        directory: str | None = typer.Option(None, "-C", metavar="DIR",
                                             help="Run as if started in DIR (like git -C)."),
    ) -> None:
        """Spec-driven, orchestrated execution of coding work by LLM agents."""
        if directory is not None:
            change_directory(directory)

    commands.register(app)
    return app


def change_directory(directory: str) -> None:
    """`-C DIR`: every relative path (and the project found from it) starts at DIR."""
    import typer

    try:
        os.chdir(directory)
    except OSError as exc:
        raise typer.BadParameter(f"cannot change to {directory!r}: {exc.strerror}",
                                 param_hint="'-C'") from None


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app and map every outcome to one message and an exit code."""
    with contextlib.suppress(ValueError):  # not the main thread: the caller owns signals
        trap_signals()
    args = list(sys.argv[1:] if argv is None else argv)
    early = _starts_workers(args)
    out = None
    try:
        if early:  # the workers' server imports the worker code while the run is prepared
            from agentrun.run import pool

            with contextlib.suppress(Exception):  # a head start only: the run starts it later
                pool.start()
        from agentrun.cli.output import Output, detect_mode, events_on_stderr

        out = Output(detect_mode("--json" in args), events_on_stderr=events_on_stderr(args))
        code = _run(build_app(), args, out)
        if RECEIVED:  # typer returned the interrupt as a silent exit 130
            code = _interrupted(out, RECEIVED[0])
    except (KeyboardInterrupt, Exception) as exc:  # before `_run`'s boundary, or an interrupt
        interrupt = _interrupt_in(exc)
        if interrupt is None:
            raise
        code = _interrupted(out, interrupt.name if isinstance(interrupt, Signalled)
                            else "SIGINT")
    if early:  # the run is over, and so are its workers
        from agentrun.run import pool

        pool.shut_down()
    sys.exit(code)


_NO_WORKERS = {"--help", "-h", "--dry-run", "--in-process"}


def _starts_workers(args: list[str]) -> bool:
    """Whether the command is a run that will start worker processes, told from its words
    alone (so `-C DIR run` is not: the server would start elsewhere). A run that turns out to
    start none stops the server it did not need."""
    return (args[:1] == ["run"] and not _NO_WORKERS.intersection(args)
            and threading.current_thread() is threading.main_thread())


def _interrupt_in(exc: BaseException) -> KeyboardInterrupt | None:
    """The interrupt `exc` is or stands for. Code that the interrupt hits may raise its own
    error instead: Python 3.11 wraps it in a RuntimeError while a class body's `__set_name__`
    runs (a signal while a module is imported), pydantic-core reports it as a SchemaError
    while it builds a validator. So after a signal our handler took, any error is the
    interrupt."""
    if isinstance(exc, KeyboardInterrupt):
        return exc
    if RECEIVED:
        return Signalled(RECEIVED[0])
    cause = exc.__cause__
    return cause if isinstance(exc, RuntimeError) and isinstance(cause, KeyboardInterrupt) \
        else None


def _run(app: typer.Typer, args: list[str], out: Any) -> int:
    from typer.exceptions import Abort, Exit, TyperException

    try:
        result = app(args=args, prog_name="agentrun", standalone_mode=False)
        return result if isinstance(result, int) else 0
    except Exit as exc:
        return exc.exit_code
    except TyperException as exc:
        show = getattr(exc, "show", None)
        if out.mode == "json" or out.events_on_stderr:  # one document; stderr is JSON only
            _report(out, exc.format_message(), _usage_hint(exc), exc.exit_code, "UsageError")
        elif show is not None:
            show()
        else:
            out.error(exc.format_message())
        return exc.exit_code
    except Abort:
        out.error("interrupted")
        return EXIT_INTERRUPTED
    except AgentrunError as exc:
        interrupt = _interrupt_in(exc)
        if interrupt is not None:
            raise interrupt from None
        if os.environ.get("AGENTRUN_DEBUG"):
            raise
        from agentrun.cli.failures import user_error

        exc = user_error(exc)
        _report(out, exc.message, exc.hint, exc.exit_code, type(exc).__name__)
        return exc.exit_code
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # the last line of defence: never a bare traceback
        interrupt = _interrupt_in(exc)
        if interrupt is not None:
            raise interrupt from None
        if os.environ.get("AGENTRUN_DEBUG"):
            raise
        from agentrun.cli.failures import user_error

        known = user_error(exc)
        _report(out, known.message, known.hint, known.exit_code, type(known).__name__)
        return known.exit_code


def _usage_hint(exc: Exception) -> str:
    ctx = getattr(exc, "ctx", None)
    return f"see `{ctx.command_path} --help`" if ctx is not None else "see `agentrun --help`"


def _interrupted(out: Any, name: str) -> int:
    """One line for an interrupt; a second signal while saying so changes nothing."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    line = f"interrupted by {name}"
    if out is None:
        sys.stderr.write(f"error: {line}\n")
    else:
        out.error(line)
    return EXIT_INTERRUPTED


def _report(out: Output, message: str, hint: str | None, code: int, kind: str) -> None:
    out.error(message, hint)
    if out.mode == "json":
        out.json({"ok": False, "error": {"type": kind, "message": message, "hint": hint,
                                         "exit_code": code}})
