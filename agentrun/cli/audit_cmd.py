"""`agentrun audit`: is the spec executable? Static checks, then the auditor agent; every spec
in .specflow/specs/ when none is given."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from agentrun.app.audit import DEFAULT_MAX_PARALLEL
from agentrun.cli.common import JSON_OPT, output, relpath
from agentrun.core.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK

if TYPE_CHECKING:
    from rich.console import Console

    from agentrun.app.audit import Audited, Checked
    from agentrun.audit.runner import SpecAudit
    from agentrun.audit.static import StaticAudit
    from agentrun.cli.output import Output

AUDIT_SPEC_ARG = typer.Argument(None, metavar="[SPEC]", show_default=False,
                                help="Spec file or id (default: every spec in .specflow/specs/).")
STATUS_STYLE = {"APPROVED": "green", "NEEDS_REVISION": "red", "NEEDS_DECOMPOSITION": "yellow",
                "INVALID": "bold red", "ERROR": "bold red"}


AUDIT_HELP = """Audit a spec (or every spec in .specflow/specs/) with the auditor agent.

Static checks run first; a spec with critical findings stops there. The verdict is
APPROVED (exit 0), NEEDS_REVISION or NEEDS_DECOMPOSITION (exit 1); an invalid spec exits 2
and no configured model (or --sandbox on without bubblewrap) 3. The `### Audit vN` entry
and the frontmatter status are written into the spec unless --dry-run.
"""


def audit(
    spec: str | None = AUDIT_SPEC_ARG,
    static: bool = typer.Option(False, "--static",
                                help="Static checks only (no model): structure, groups, waves."),
    write: bool = typer.Option(False, "--write", "--fix",
                               help="Write the auditor's proposed task groups into the spec's "
                                    "## Implementation Tasks."),
    dry_run: bool = typer.Option(False, "--dry-run",
                                 help="Print the audit entry (and any generated tasks); write "
                                      "nothing."),
    max_parallel: int | None = typer.Option(None, "--max-parallel", min=1,
                                            help="Specs audited at once when no SPEC is given "
                                                 f"(default: config or {DEFAULT_MAX_PARALLEL})."),
    group_context_max: float | None = typer.Option(
        None, "--group-context-max",
        help="Share of the context window one task group may need (default 0.30)."),
    total_context_max: float | None = typer.Option(
        None, "--total-context-max",
        help="Share of the window a spec run in one context may need (default 0.50)."),
    provider: str | None = typer.Option(None, "--provider", help="anthropic, openai or scripted."),
    model: str | None = typer.Option(None, "--model", help="Model name."),
    script: Path | None = typer.Option(None, "--script",
                                       help="Script file for the scripted provider."),
    max_steps: int | None = typer.Option(None, "--max-steps", min=1,
                                         help="Auditor model turns (default 30)."),
    token_budget: int | None = typer.Option(None, "--token-budget", min=1000,
                                            help="Auditor tokens per run (default 200,000)."),
    junit: Path | None = typer.Option(None, "--junit",
                                      help="Write a JUnit XML report (one test case per spec)."),
    sandbox: str | None = typer.Option(
        None, "--sandbox", metavar="auto|on|off",
        help="Run the auditor's commands in a read-only bubblewrap sandbox: auto, on or off "
             "(config: sandbox.mode; default auto)."),
    json_out: bool = JSON_OPT,
) -> None:
    """`agentrun audit` (its help is AUDIT_HELP): static checks, the auditor, the verdicts."""
    from agentrun.app import audit as use_case

    out = output(json_out)
    report = _ci_reports(junit)
    request = use_case.AuditRequest(spec, static, write, dry_run, max_parallel,
                                    group_context_max, total_context_max, provider, model,
                                    script, max_steps, token_budget, sandbox)
    if static and spec is not None:
        raise typer.Exit(_static_one(use_case.static_one(spec, write=not dry_run), out,
                                     report))
    if static:
        raise typer.Exit(_static_all(use_case.static_all(write=not dry_run), out, report))
    if spec is not None:
        raise typer.Exit(_model_one(use_case.audit_one(request, out.progress), out, report))
    raise typer.Exit(_model_all(use_case.audit_all(request, out.progress), out, report))


def _ci_reports(junit: Path | None) -> Callable[[list[Any]], None]:
    """JUnit file and GitHub summary/annotations for a finished audit (CI systems read them)."""

    def report(results: list[Any]) -> None:
        from agentrun.report.github import publish_audit
        from agentrun.report.junit import audit_junit, write_junit

        if junit is not None:
            write_junit(junit, audit_junit(results))
        publish_audit(results)

    return report


# -- the model-based audit ------------------------------------------------------------------

def _traced(audited: Audited, out: Output) -> dict[str, str]:
    """Tracing's trouble, said once (the audit went on), and the trace's id: shown, and for
    the JSON document."""
    from agentrun import telemetry

    for problem in telemetry.problems():
        out.warn(problem)
    if audited.trace_id is None:
        return {}
    if out.mode != "json":
        out.stdout.print(f"Trace: {audited.trace_id} (OpenTelemetry trace id)")
    return {"trace_id": audited.trace_id}


def _model_one(audited: Audited, out: Output, report: Callable[[list[Any]], None]) -> int:
    """One spec's verdict, shown; its exit code."""
    result = audited.results[0]
    report([result])
    if out.mode == "json":
        out.json({"ok": result.ok, "dry_run": audited.dry_run, **result.to_dict(),
                  "sandbox": audited.sandbox, **_traced(audited, out)})
    else:
        print_result(result, out, audited.dry_run)
        _traced(audited, out)
    if result.error:
        out.error(result.error, result.hint)
    return result.exit_code


def _model_all(audited: Audited, out: Output, report: Callable[[list[Any]], None]) -> int:
    """Every spec's verdict, a table and a summary; the exit code."""
    results = audited.results
    report(results)
    code = exit_code_for(results)
    summary = summarise(results)
    if out.mode == "json":
        out.json({"ok": code == EXIT_OK, "dry_run": audited.dry_run,
                  "specs": [r.to_dict() for r in results], "summary": summary,
                  "sandbox": audited.sandbox, **_traced(audited, out)})
        return code
    print_table(results, out.stdout)
    out.stdout.print(f"{summary['total']} spec(s): {summary['approved']} approved, "
                     f"{summary['needs_revision']} need revision, "
                     f"{summary['needs_decomposition']} need decomposition, "
                     f"{summary['invalid']} invalid, {summary['error']} without a verdict"
                     + (" · dry run: nothing written" if audited.dry_run else ""))
    _traced(audited, out)
    return code


def exit_code_for(results: list[SpecAudit]) -> int:
    """2 if any spec is invalid, else 1 if any is not APPROVED, else 0."""
    if any(r.exit_code == EXIT_BAD_INPUT for r in results):
        return EXIT_BAD_INPUT
    return EXIT_OK if all(r.ok for r in results) else EXIT_FAILED


def summarise(results: list[SpecAudit]) -> dict[str, int]:
    def count(status: str) -> int:
        return sum(1 for r in results if r.status == status)

    return {"total": len(results), "approved": count("APPROVED"),
            "needs_revision": count("NEEDS_REVISION"),
            "needs_decomposition": count("NEEDS_DECOMPOSITION"), "invalid": count("INVALID"),
            "error": count("ERROR")}


def print_table(results: list[SpecAudit], console: Console) -> None:
    from rich.markup import escape
    from rich.table import Table

    from agentrun.audit.estimates import approx

    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("Spec", "Verdict", "Critical", "Recs", "Context", "Written", "Note"):
        table.add_column(col)
    for r in results:
        style = STATUS_STYLE.get(r.status, "")
        context = approx(r.estimate.total.share) if r.estimate else "-"
        note = r.error or (r.tasks.rejected if r.tasks and r.tasks.rejected else "")
        table.add_row(escape(r.spec_id), f"[{style}]{r.status}[/{style}]",
                      str(len(r.critical)), str(len(r.recommendations)), context,
                      f"v{r.version}" if r.written else "-", escape(note.splitlines()[0][:80]
                                                                   if note else ""))
    console.print(table)


def print_result(result: SpecAudit, out: Output, dry_run: bool) -> None:
    """One spec's audit for a terminal or a CI log."""
    from rich.markup import escape

    console = out.stdout
    style = STATUS_STYLE.get(result.status, "")
    how = ("stopped by static checks" if result.source == "static"
           else f"auditor: {result.steps} step{'s' * (result.steps != 1)}, "
                f"{result.usage.total:,} tokens"
           + (", verdict re-asked once" if result.asks > 1 else ""))
    console.print(f"[bold]{escape(result.spec_id)}[/bold] ({escape(relpath(result.path))}): "
                  f"[{style}]{result.status}[/{style}]  [dim]({escape(how)})[/dim]")
    if result.status == "ERROR":
        return
    if result.entry:
        console.print()
        console.print(escape(result.entry))
    if result.tasks and result.tasks.section and dry_run:
        console.print()
        console.print("[bold]Generated ## Implementation Tasks (not written):[/bold]")
        console.print(escape(result.tasks.section.rstrip()))
    console.print()
    if result.written:
        console.print(f"Written to {escape(relpath(result.path))}: Audit v{result.version}, "
                      f"status: {result.frontmatter_status}"
                      + (", ## Implementation Tasks" if result.tasks and result.tasks.generated
                         else ""))
    else:
        console.print(f"Dry run: nothing written (status would become "
                      f"{result.frontmatter_status})")


# -- static checks only ---------------------------------------------------------------------

def _static_one(checked: Checked, out: Output, report: Callable[[list[Any]], None]) -> int:
    """One spec's static checks, shown; exit 1 when they found something critical."""
    result = checked.result
    assert result is not None  # one spec that cannot be read is an error of its own
    report([result])
    if out.mode == "json":
        out.json({"ok": not result.critical, **result.to_dict(), "status": checked.status})
    else:
        _print_static(result, _status_words(checked.before, checked.status), out.stdout)
    return EXIT_FAILED if result.critical else EXIT_OK


def _status_words(before: str | None, after: str | None) -> str | None:
    """`draft → audited` when the checks changed the status, else the status."""
    return f"{before or 'unset'} → {after}" if after != before else after


def _print_static(result: StaticAudit, status: str | None, console: Console) -> None:
    from rich.markup import escape

    from agentrun.cli.render import findings

    counts = result.to_dict()["counts"]
    console.print(f"[bold]{escape(result.spec_id)}[/bold] ({escape(relpath(result.path))}): "
                  f"{result.verdict} — {counts['critical']} critical, {counts['warning']} "
                  f"warning, {counts['info']} info" + (f" · status: {escape(status)}"
                                                       if status else ""))
    findings(result.findings, console)


def _static_all(checked: list[Checked], out: Output,
                report: Callable[[list[Any]], None]) -> int:
    """Every spec's static checks: a table, a summary and the specs they audited."""
    from rich.table import Table

    rows, docs, invalid, failing, promoted = [], [], 0, 0, []
    for c in checked:
        if c.result is None:
            assert c.error is not None
            invalid += 1
            docs.append({"spec": c.spec_id, "path": str(c.path), "verdict": "INVALID",
                         "error": c.error.message, "hint": c.error.hint})
            rows.append((c.spec_id, "INVALID", "-", "-", "-", c.error.message))
            continue
        if c.status != c.before:
            promoted.append(f"{c.spec_id}: status {_status_words(c.before, c.status)}")
        doc = {**c.result.to_dict(), "status": c.status}
        docs.append(doc)
        failing += bool(c.result.critical)
        counts = doc["counts"]
        rows.append((c.spec_id, c.result.verdict, str(counts["critical"]),
                     str(counts["warning"]), c.status or "-", ""))
    code = EXIT_BAD_INPUT if invalid else EXIT_FAILED if failing else EXIT_OK
    report(docs)
    if out.mode == "json":
        out.json({"ok": code == EXIT_OK, "specs": docs,
                  "summary": {"total": len(checked), "invalid": invalid, "critical": failing}})
        return code
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("Spec", "Verdict", "Critical", "Warnings", "Status", "Error"):
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    out.stdout.print(table)
    out.stdout.print(f"{len(checked)} spec(s): {invalid} invalid, {failing} with critical "
                     f"findings, {len(checked) - invalid - failing} passing")
    for line in promoted:
        out.stdout.print(f"{line} (passed the static checks)", markup=False)
    return code
