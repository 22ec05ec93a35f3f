"""What a run leaves behind: its events, the execution state, STATE.md, the spec's Execution
Summary and the commit of those reports.

One object writes them all, so the order of writes (state before STATE.md, summary before the
commit) is decided in one place and the other parts only say what happened.
"""

from __future__ import annotations

import contextlib
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from agentrun import gitcli, gitlock, workspace
from agentrun.core.errors import NoSpace, no_space
from agentrun.core.events import BaseEvent, EventSink, WarningEvent, dumps
from agentrun.core.fsutil import (
    atomic_write_json,
    atomic_write_text,
    read_text_exact,
    relpath,
    reserve,
)
from agentrun.project import Project
from agentrun.report.execution_state import RunState, save_state
from agentrun.report.state_md import StateUpdate, update_state_file
from agentrun.report.summary import render_summary
from agentrun.spec.model import Spec
from agentrun.spec.writeback import set_frontmatter_value, upsert_section

# space set aside for the last words of a run that meets a full disk (checkpoint, STATE.md)
RESERVE_NAME = "space-reserve"
RESERVE_BYTES = 512 * 1024


def now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def control_dir(root: Path, run_id: str) -> Path:
    """Where the orchestrator keeps the files it reads back from a run's workers (their
    assignments, progress, results, pids): in the repository's git dir, which no worker
    branch can reach — a forged file committed by a worker is merged into the working tree,
    never here."""
    return gitlock.git_common_dir(root) / "agentrun" / "runs" / run_id


class Recorder:
    """The run record of one run of `spec` (its `run_dir`) and the project files it updates."""

    def __init__(self, project: Project, spec: Spec, mode: str, run_id: str, run_dir: Path,
                 state_file: Path, on_event: EventSink | None = None) -> None:
        self.project = project
        self.spec = spec
        self.mode = mode
        self.run_id = run_id
        self.run_dir = run_dir
        self.state_file = state_file
        self.root = workspace.repo_root(project.root)
        self.on_event = on_event or (lambda e: None)
        self.state: RunState | None = None
        # commit the state even when `.specflow/execution/` is git-ignored (CI: the next
        # wave's jobs read it from the commit)
        self.force_state = False
        self.written: list[Path] = []  # the plan's files and landed record (agentrun/formats/)
        self.saved = False  # this process has written the run's checkpoint
        self._events: IO[str] | None = None

    # -- events -----------------------------------------------------------------------------
    def open_events(self) -> None:
        """Open the events file and set the space reserve aside (NoSpace when it won't fit)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        reserve(self.run_dir / RESERVE_NAME, RESERVE_BYTES)
        self._events = open(  # noqa: SIM115 - open for the whole run, closed by close_events
            self.run_dir / "events.ndjson", "a", encoding="utf-8")

    def close_events(self) -> None:
        self.release_reserve()
        if self._events is not None:
            with contextlib.suppress(OSError):  # a full disk was reported where it was met
                self._events.close()
            self._events = None

    def release_reserve(self) -> None:
        """Free the reserve: at the end, or first thing when the disk is full, so that the
        checkpoint and STATE.md can still say the run stopped."""
        (self.run_dir / RESERVE_NAME).unlink(missing_ok=True)

    def emit(self, event: BaseEvent, record: bool = True) -> None:
        """Write an event to the run record and pass it on; `record=False` for the progress of
        the workers (their progress files hold it) and of the reviewer."""
        if record and self._events is not None:
            try:
                self._events.write(dumps(event) + "\n")
                self._events.flush()
            except OSError as exc:
                if no_space(exc) is None:
                    raise
                raise NoSpace(relpath(self.run_dir / "events.ndjson")) from None
        self.on_event(event)

    # -- state ------------------------------------------------------------------------------
    def save(self, progress: str | None = None, status: str | None = None) -> None:
        """Save the execution state (the resume checkpoint); with `progress` or `status`,
        STATE.md's Execution Status too."""
        assert self.state is not None
        save_state(self.state_file, self.state)
        self.saved = True
        if progress or status:
            self.update_state_md(status=status, progress=progress, when=now_text())

    def update_state_md(self, **values: Any) -> None:
        update_state_file(self.project.state_md, StateUpdate(
            spec_id=self.spec.id, run_id=self.run_id, mode=self.mode, **values))

    def write_settings(self, start_commit: str, config: dict[str, Any]) -> None:
        """Record the settings the run fixed at its start, for people: the execution state
        holds the copy `--resume`, `review` and `fix` use."""
        atomic_write_json(self.run_dir / "settings.json",
                          {"run_id": self.run_id, "start_commit": start_commit,
                           "config": config})

    def write_result(self) -> None:
        assert self.state is not None
        atomic_write_json(self.run_dir / "result.json", self.state.to_dict())

    def write_html(self, control: Path | None = None) -> Path | None:
        """The run's `report.html`, from what the record holds now (report/html.py); None,
        with a warning, when it cannot be written: the run's outcome stands without it."""
        from agentrun.report.html import write_report

        try:
            return write_report(self.run_dir, control, state_file=self.state_file,
                                title=self.spec.title)
        except Exception as exc:  # noqa: BLE001 - a report is never worth the run's result
            if self.state is not None:
                self.state.warnings.append(f"the HTML report was not written: {exc}")
            self.emit(WarningEvent(message=f"the HTML report was not written: {exc}"))
            return None

    def write_summary(self, when: str, status: str | None = None) -> None:
        """Write the spec's `## Execution Summary` (and `status`), every other byte unchanged."""
        assert self.state is not None
        if self.spec.source is not None:  # a plan's record (a CI job may not have it yet)
            from agentrun.formats.companion import write as write_record

            write_record(self.spec, self.project.root)
        text = read_text_exact(self.spec.path)
        body = render_summary(self.state, [c.text for c in self.spec.acceptance_criteria], when)
        new = upsert_section(text, "Execution Summary", body)
        if status:
            new = set_frontmatter_value(new, "status", status)
        if new != text:
            atomic_write_text(self.spec.path, new)
        from agentrun.formats.living import after_run

        written = after_run(self.spec, self.project.root, self.project.execution_dir,
                            self.state)  # every call adds: a later one may find nothing new
        self.written = list(dict.fromkeys([*self.written, *written]))

    def commit_report(self, message: str | None = None) -> None:
        """Commit the spec summary, STATE.md and execution state (only those paths)."""
        if self.force_state and self.state_file.exists():
            gitcli.git("add", "-f", "--", relpath(self.state_file, self.root),
                       cwd=self.root)
        paths = [relpath(p, self.root)
                 for p in (self.spec.path, self.project.state_md, self.state_file,
                           *self.written)
                 if Path(p).exists()]
        changed = set(workspace.dirty_paths(self.root, ignore=(".specflow/runs/",)))
        paths = [p for p in paths if p in changed]
        if not paths:
            return
        gitcli.git("add", "--", *paths, cwd=self.root)
        gitcli.git("commit", "-q", "--no-verify", "-m",
                   message or f"{self.spec.id}: execution summary (run {self.run_id})",
                   "--", *paths,
                   cwd=self.root, env=workspace.ensure_identity(self.root) or None)
