"""`agentrun review`: an independent reviewer judges the last run of a spec against it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from agentrun.cli.common import JSON_OPT, output, relpath
from agentrun.core.errors import EXIT_FAILED, EXIT_OK

if TYPE_CHECKING:
    from rich.console import Console

    from agentrun.cli.output import Output
    from agentrun.review.reviewer import SpecReview

REVIEW_SPEC_ARG = typer.Argument(None, metavar="[SPEC]", show_default=False,
                                 help="Spec file or id (default: the active spec in STATE.md).")
RESULT_STYLE = {"APPROVED": "green", "CHANGES_REQUESTED": "red"}


REVIEW_HELP = """Review the last run of a spec with the reviewer agent.

The reviewer judges each acceptance criterion (met, not met, cannot tell, with evidence)
and lists findings; the result is APPROVED only when every criterion is met with evidence
and nothing critical or major was found. The `### Review vN` entry is appended to the
spec's ## Review History and its status becomes `done` (exit 0) or `review` (exit 1). After
a run that did not complete (a group failed, its dependents blocked) the review covers
what landed, the spec stays as it is (incomplete: exit 1) and STATE.md's next step is
`run --resume` (or `fix`). A reviewer that submits no review is not an approval (exit 1,
nothing written). No run to review exits 2; no configured model 3.
"""


def review(
    spec: str | None = REVIEW_SPEC_ARG,
    provider: str | None = typer.Option(None, "--provider", help="anthropic, openai or scripted."),
    model: str | None = typer.Option(None, "--model", help="Model name."),
    script: Path | None = typer.Option(None, "--script",
                                       help="Script file for the scripted provider."),
    max_steps: int | None = typer.Option(None, "--max-steps", min=1,
                                         help="Reviewer model turns (default 30)."),
    token_budget: int | None = typer.Option(None, "--token-budget", min=1000,
                                            help="Reviewer tokens (default 200,000)."),
    sandbox: str | None = typer.Option(
        None, "--sandbox", metavar="auto|on|off",
        help="Run the reviewer's commands in a read-only bubblewrap sandbox: auto, on or off "
             "(config: sandbox.mode; default auto)."),
    junit: Path | None = typer.Option(None, "--junit", metavar="FILE",
                                      help="Write a JUnit XML report (one test case per "
                                           "acceptance criterion)."),
    json_out: bool = JSON_OPT,
) -> None:
    """`agentrun review` (its help is REVIEW_HELP): the review, its verdict shown."""
    from agentrun.app.review import ReviewRequest
    from agentrun.app.review import review as review_spec

    out = output(json_out)
    done = review_spec(ReviewRequest(spec, provider, model, script, max_steps, token_budget,
                                     sandbox), warn=out.warn, note=out.progress)
    result = done.result
    if done.concluded is not None:
        out.progress(f"run {done.concluded.run_id}, stopped during its review, is now "
                     f"{done.concluded.status}")
    if junit is not None:
        from agentrun.report.junit import write_junit
        from agentrun.review.junit import review_junit

        write_junit(junit, review_junit(result))
    raise typer.Exit(_shown(out, result, done.sandbox))


def _shown(out: Output, result: SpecReview, sandbox: str) -> int:
    """The verdict, shown; the exit code."""
    from agentrun.review.verdict import ReviewResult

    done = result.result == ReviewResult.APPROVED and not result.incomplete
    if out.mode == "json":
        out.json({"ok": done, **result.to_dict(), "sandbox": sandbox})
    else:
        _print(result, out.stdout)
    if result.incomplete:
        out.warn(f"{result.spec_id} is incomplete: its last run did not complete "
                 f"{', '.join(result.incomplete)}; this review covers what landed. Finish it "
                 f"with `agentrun run {result.spec_id} --resume`")
    if result.error:
        out.error(result.error, "review again, or use a stronger model (--model); raise "
                                "--max-steps or --token-budget if it ran out")
    return EXIT_OK if done else EXIT_FAILED


def _print(result: SpecReview, console: Console) -> None:
    from rich.markup import escape

    style = RESULT_STYLE.get(str(result.result), "")
    console.print(f"[bold]{escape(result.spec_id)}[/bold] ({escape(relpath(result.path))}), "
                  f"run {escape(result.run_id)}: [{style}]{result.result}[/{style}]  "
                  f"[dim](reviewer: {result.steps} steps, {result.usage.total:,} tokens)[/dim]")
    if result.entry:
        console.print()
        console.print(escape(result.entry))
        console.print()
        console.print(f"Written to {escape(relpath(result.path))}: Review v{result.version}, "
                      f"status: {result.status}")

