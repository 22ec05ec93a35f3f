"""Registers each command module with the app. Command modules import heavy code lazily."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    if getattr(app, "_agentrun_registered", False):
        return
    # the mark lives on the app, so each app gets its commands once; Typer declares no such field
    app._agentrun_registered = True  # type: ignore[attr-defined]
    from agentrun.cli import (
        aggregate_cmd,
        audit_cmd,
        clean_cmd,
        demo_cmd,
        fix_cmd,
        import_cmd,
        init_cmd,
        new_cmd,
        plan_cmd,
        report_cmd,
        review_cmd,
        run_cmd,
        status_cmd,
        worker_cmd,
    )

    app.command("plan")(plan_cmd.plan)
    app.command("audit", help=audit_cmd.AUDIT_HELP)(audit_cmd.audit)
    app.command("run", help=run_cmd.RUN_HELP)(run_cmd.run)
    app.command("review", help=review_cmd.REVIEW_HELP)(review_cmd.review)
    app.command("fix")(fix_cmd.fix)
    app.command("worker", help=worker_cmd.WORKER_HELP)(worker_cmd.worker)
    app.command("aggregate", help=aggregate_cmd.AGGREGATE_HELP)(aggregate_cmd.aggregate)
    app.command("status")(status_cmd.status)
    app.command("report")(report_cmd.report)
    app.command("clean")(clean_cmd.clean)
    app.command("init")(init_cmd.init)
    app.command("new")(new_cmd.new)
    app.command("import")(import_cmd.import_plan)
    app.command("demo")(demo_cmd.demo)
