"""The `agentrun` command: the Typer app and its single error boundary."""

from __future__ import annotations

import os
import sys

import typer

from agentrun import __version__
from agentrun.errors import EXIT_INTERRUPTED, AgentrunError

EXIT_CODES_HELP = (
    "Exit codes: 0 success · 1 work failed, partial or blocked (or audit found critical issues)"
    " · 2 bad input (usage, invalid spec, cycle) · 3 could not start (no model, not a git repo,"
    " dirty tree, run lock held) · 130 interrupted."
)

app = typer.Typer(
    name="agentrun",
    help="Spec-driven, orchestrated execution of coding work by LLM agents.",
    epilog=EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"agentrun {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Show the version and exit."),
) -> None:
    """Spec-driven, orchestrated execution of coding work by LLM agents."""


def _register() -> None:
    from agentrun.cli import commands

    commands.register(app)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app and map every outcome to one message and an exit code."""
    from typer.exceptions import Abort, Exit, TyperException

    from agentrun.cli.output import Output, detect_mode

    args = list(sys.argv[1:] if argv is None else argv)
    out = Output(detect_mode("--json" in args))
    _register()
    try:
        result = app(args=args, prog_name="agentrun", standalone_mode=False)
        code = result if isinstance(result, int) else 0
    except Exit as exc:
        code = exc.exit_code
    except TyperException as exc:
        show = getattr(exc, "show", None)
        if show is not None:
            show()
        else:
            out.error(exc.format_message())
        code = exc.exit_code
    except (Abort, KeyboardInterrupt):
        out.error("interrupted")
        code = EXIT_INTERRUPTED
    except AgentrunError as exc:
        if os.environ.get("AGENTRUN_DEBUG"):
            raise
        _report(out, exc.message, exc.hint, exc.exit_code, type(exc).__name__)
        code = exc.exit_code
    except Exception as exc:  # the last line of defence: never a bare traceback
        if os.environ.get("AGENTRUN_DEBUG"):
            raise
        _report(out, f"internal error: {type(exc).__name__}: {exc}",
                "this is a bug in agentrun; rerun with AGENTRUN_DEBUG=1 for the traceback", 1,
                "InternalError")
        code = 1
    sys.exit(code)


def _report(out, message: str, hint: str | None, code: int, kind: str) -> None:
    out.error(message, hint)
    if out.mode == "json":
        out.json({"ok": False, "error": {"type": kind, "message": message, "hint": hint,
                                         "exit_code": code}})
