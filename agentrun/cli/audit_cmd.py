"""`agentrun audit`: is the spec executable? Static checks; every spec when none is given."""

from __future__ import annotations

from pathlib import Path

import typer

from agentrun.cli.common import JSON_OPT, SPEC_ARG, output, relpath
from agentrun.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK


def audit(
    spec: str | None = SPEC_ARG,
    static: bool = typer.Option(False, "--static",
                                help="Static checks only (no model): structure, groups, waves."),
    json_out: bool = JSON_OPT,
) -> None:
    """Audit a spec (or every spec in .specflow/specs/). Exit 1 on critical findings."""
    from agentrun.errors import BadInput
    from agentrun.project import find_project

    out = output(json_out)
    if not static:
        raise BadInput("the model-based audit is not available in this version",
                       hint="run `agentrun audit --static` for the checks that need no model")
    if spec is not None:
        raise typer.Exit(_audit_one(spec, out))
    project = find_project()
    if not project.specs_dir.is_dir():
        raise BadInput(f"no SPEC given and no {relpath(project.specs_dir)} directory here",
                       hint="pass a spec path, or run `agentrun init` to create .specflow/")
    raise typer.Exit(_audit_all(project.spec_paths(), out, project.root))


def _audit_one(spec_arg: str, out) -> int:
    from agentrun.audit.static import static_audit
    from agentrun.cli.common import load

    _project, parsed = load(spec_arg)
    result = static_audit(parsed)
    if out.mode == "json":
        out.json({"ok": not result.critical, **result.to_dict()})
    else:
        _print_audit(result, out.stdout)
    return EXIT_FAILED if result.critical else EXIT_OK


def _print_audit(result, console) -> None:
    from rich.markup import escape

    from agentrun.cli.render import findings

    counts = result.to_dict()["counts"]
    console.print(f"[bold]{escape(result.spec_id)}[/bold] ({escape(relpath(result.path))}): "
                  f"{result.verdict} — {counts['critical']} critical, {counts['warning']} "
                  f"warning, {counts['info']} info")
    findings(result.findings, console)


def _audit_all(paths: list[Path], out, root: Path) -> int:
    from rich.table import Table

    from agentrun.audit.static import static_audit
    from agentrun.errors import SpecError
    from agentrun.spec import load_spec

    rows, docs, invalid, failing = [], [], 0, 0
    for path in paths:
        try:
            result = static_audit(load_spec(path))
        except SpecError as exc:
            invalid += 1
            docs.append({"spec": path.stem, "path": str(path), "verdict": "INVALID",
                         "error": exc.message, "hint": exc.hint})
            rows.append((path.stem, "INVALID", "-", "-", exc.message))
            continue
        doc = result.to_dict()
        docs.append(doc)
        failing += bool(result.critical)
        counts = doc["counts"]
        rows.append((result.spec_id, result.verdict, str(counts["critical"]),
                     str(counts["warning"]), ""))
    code = EXIT_BAD_INPUT if invalid else EXIT_FAILED if failing else EXIT_OK
    if out.mode == "json":
        out.json({"ok": code == EXIT_OK, "specs": docs,
                  "summary": {"total": len(paths), "invalid": invalid, "critical": failing}})
        return code
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("Spec", "Verdict", "Critical", "Warnings", "Error"):
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    out.stdout.print(table)
    out.stdout.print(f"{len(paths)} spec(s): {invalid} invalid, {failing} with critical "
                     f"findings, {len(paths) - invalid - failing} passing")
    return code
