"""`agentrun plan`: mode, waves and workers for a spec — no model calls."""

from __future__ import annotations

import typer

from agentrun.cli.common import (
    CHANGED_OPT,
    FORMAT_OPT,
    JSON_OPT,
    SPEC_ARG,
    RunMode,
    groups_doc,
    kept_lines,
    load,
    output,
)


def plan(
    spec: str | None = SPEC_ARG,
    mode: RunMode | None = typer.Option(None, "--mode", help="Override the chosen mode."),
    max_workers: int | None = typer.Option(
        None, "--max-workers", min=1,
        help="Pack each wave into at most this many workers (up to 3 groups each)."),
    matrix: bool = typer.Option(
        False, "--matrix",
        help="Print the CI job matrix of every wave as one line of JSON: "
             '{"spec", "spec_path", "mode", "wave_count", "waves": [{"include": [{"wave", '
             '"label", "batch", "groups", "branch"}, ...]}, ...]}. Each waves[i] is a GitHub '
             "Actions matrix: `strategy.matrix: ${{ fromJSON(needs.plan.outputs.matrix)"
             ".waves[0] }}`; each entry's `groups` goes to `agentrun worker --spec SPEC "
             "--groups ...`. See examples/ci/github-actions.yml."),
    fmt: str | None = FORMAT_OPT,
    changed: bool = CHANGED_OPT,
    json_out: bool = JSON_OPT,
) -> None:
    """Show the execution plan: mode and why, waves, worker batches, lint findings.

    SPEC may also be a spec-kit or Kiro tasks.md, a GSD PLAN.md or phase folder, or a
    Taskmaster tasks.json (see docs/formats.md)."""
    from agentrun.cli.render import plan_summary
    from agentrun.core.errors import BadInput
    from agentrun.plan import build_plan

    out = output(json_out)
    if mode not in (None, "single", "orchestrated"):
        raise BadInput(f"invalid --mode {mode!r}", hint="use --mode single or --mode orchestrated")
    _project, parsed = load(spec, fmt=fmt, changed=changed)
    result = build_plan(parsed, mode=mode, max_workers=max_workers)
    if matrix:
        import json

        from agentrun.cli.common import relpath
        from agentrun.run.ci import ci_matrix

        # one line, so that `echo "matrix=$(agentrun plan SPEC --matrix)" >> $GITHUB_OUTPUT`
        # works as it is
        # a plan from another tool: the jobs read the plan itself (its record is the run's)
        doc = ci_matrix(parsed, result, parsed.source.path if parsed.source is not None
                        else relpath(parsed.path))
        typer.echo(json.dumps(doc, separators=(",", ":"), ensure_ascii=False))
        return
    if out.mode == "json":
        out.json({"ok": True, "spec": {"id": parsed.id, "title": parsed.title,
                                       "status": parsed.status, "path": str(parsed.path)},
                  "plan": result.to_dict(), **groups_doc(parsed)})
    else:
        plan_summary(parsed, result, out.stdout)
        for line in kept_lines(parsed):
            out.stdout.print(line, markup=False)
