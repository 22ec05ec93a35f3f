"""`agentrun import`: write a plan from another tool as an agentrun spec, to keep and edit."""

from __future__ import annotations

from pathlib import Path

import typer

from agentrun.cli.common import FORMAT_OPT, JSON_OPT, output


def import_plan(
    plan: str = typer.Argument(..., metavar="PLAN", show_default=False,
                               help="A spec-kit or Kiro tasks.md, a GSD PLAN.md or phase "
                                    "folder, or a Taskmaster tasks.json."),
    fmt: str | None = FORMAT_OPT,
    dest: str | None = typer.Option(
        None, "--output", "-o", metavar="FILE|-",
        help="Where to write the spec (default: .specflow/specs/<id>.md; - for stdout)."),
    json_out: bool = JSON_OPT,
) -> None:
    """Write the agentrun spec equivalent to another tool's plan.

    The spec has the plan's tasks as task groups with the same dependencies, files, checks
    and criteria as `agentrun run PLAN` uses (multi-line task text on one line); it stands
    alone afterwards. Running the plan itself needs no import. Never overwrites a file."""
    from agentrun.core.errors import BadInput
    from agentrun.core.fsutil import atomic_write_text, relpath
    from agentrun.formats import load
    from agentrun.formats.render import FORMAT_NAMES, render
    from agentrun.plan import compute_layers
    from agentrun.project import find_project
    from agentrun.spec.ids import require_safe_id
    from agentrun.spec.writeback import set_frontmatter_value

    out = output(json_out)
    path = Path(plan)
    project = find_project(path.absolute().parent if path.exists() else Path.cwd())
    spec, imported = load(path, project.root, fmt)
    if imported is None:
        raise BadInput(f"{plan} is an agentrun spec already", hint="run it as it is, or pass "
                       "--format to read it as another tool's plan")
    require_safe_id(spec)
    text = set_frontmatter_value(render(imported, relpath(path, project.root),
                                        link="imported_from"), "status", "draft")
    layers = len(compute_layers(spec.groups))
    name = FORMAT_NAMES[spec.source.format] if spec.source else "?"
    if dest == "-":
        typer.echo(text, nl=False)
        return
    target = Path(dest) if dest else project.specs_dir / f"{spec.id}.md"
    if target.exists():
        raise BadInput(f"{relpath(target)} exists; import never overwrites a file",
                       hint="pass --output with another path (or - for stdout)")
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, text)
    if out.mode == "json":
        out.json({"ok": True, "id": spec.id, "path": str(target), "format": spec.source.format
                  if spec.source else None, "groups": len(spec.groups), "waves": layers,
                  "source": relpath(path, project.root)})
        return
    out.stdout.print(f"Imported the {name} plan {relpath(path)} as {relpath(target)}: "
                     f"{len(spec.groups)} task groups in {layers} dependency layers.",
                     markup=False)
    out.stdout.print(f"Run it with `agentrun run {relpath(target)}`.", markup=False)
