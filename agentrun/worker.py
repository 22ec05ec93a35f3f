"""The worker: one assignment in, one result out.

A worker runs in its own process (or CI job) in its own git worktree with a fresh model
context. It renders its task from the assignment, runs the attempts of an executor (see
attempts.py), commits what the agent left uncommitted, and derives files and commits from git
— never from the model's word.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentrun import telemetry, workspace, worktrees
from agentrun.agent.allowance import Allowance
from agentrun.agent.definitions import load_agent
from agentrun.agent.prompts import render_worker_assignment
from agentrun.agent.snapshots import Snapshot, snapshot_and_index
from agentrun.agent.terminator import limits_for
from agentrun.agent.transcript import Transcript
from agentrun.attempts import AgentOutcome, run_attempts
from agentrun.core.errors import AgentrunError, no_space
from agentrun.core.events import (
    BaseEvent,
    DoneEvent,
    EventSink,
    SandboxEvent,
    SetupDoneEvent,
    SetupStartEvent,
    SpawnEndEvent,
    SpawnEvent,
    StartEvent,
    dumps,
)
from agentrun.core.results import WorkerResult
from agentrun.core.status import Status, StopReason
from agentrun.executors import claude_code, codex
from agentrun.executors.base import AgentTask, Executor
from agentrun.executors.builtin import BuiltinExecutor
from agentrun.protocol import Assignment
from agentrun.provider_choice import create_provider, provider_env
from agentrun.providers.base import Provider
from agentrun.providers.catalog import ProviderConfig
from agentrun.providers.pricing import cost_usd
from agentrun.sandbox.base import Sandbox
from agentrun.sandbox.choice import make_sandbox
from agentrun.tools.base import CommandPolicy
from agentrun.tools.environment import discard_private_home
from agentrun.worktree_setup import LOG_NAME, prepare_worktree
from agentrun.worktrees import populate_worktree

# the coding-agent CLIs a worker can drive, by executor name
CLI_EXECUTORS = {"claude-code": claude_code, "codex": codex}
_CHECKOUT_NICENESS = 10  # of 19: a tenth of a normal thread's share of a busy CPU


def run_assignment(assignment: Assignment, cancel: threading.Event | None = None,
                   provider: Any = None) -> WorkerResult:
    """Execute one assignment and write its result file. Never raises for agent failures."""
    progress = _Progress(assignment.progress_path)
    return _execute(assignment, cancel or threading.Event(), provider, progress,
                    worker_sandbox(assignment, progress))


def worker_sandbox(assignment: Assignment, progress: _Progress) -> Sandbox | AgentrunError:
    """The sandbox every command of this worker runs in (the model's and the validation
    command), as the assignment's settings ask; or why there can be none."""
    settings = assignment.sandbox
    # a coding-agent CLI reaches its model over the network and keeps its config outside the
    # worktree; its files stay confined like any command's
    cli = CLI_EXECUTORS.get(assignment.executor)
    try:
        sandbox, choice = make_sandbox(settings.mode, Path(assignment.worktree),
                                       network=settings.network or cli is not None,
                                       home_allow=tuple(settings.home_allow),
                                       writable_paths=(cli.config_dir(),) if cli else (),
                                       limits=settings.limits,
                                       on_spawn=progress.spawned)
    except AgentrunError as exc:
        return exc
    progress.emit(SandboxEvent(sandbox=choice.describe()))
    return sandbox


def _execute(assignment: Assignment, cancel: threading.Event, provider: Any,
             progress: _Progress, sandbox: Sandbox | AgentrunError) -> WorkerResult:
    started = time.monotonic()
    worktree = Path(assignment.worktree)
    checkout = BackgroundCheckout()
    trace = telemetry.worker_trace(assignment.trace_parent, batch=assignment.batch,
                                   provider=assignment.provider.provider,
                                   model=assignment.provider.model,
                                   executor=assignment.executor)
    if trace is not None:  # the worker's spans, from its progress events
        progress.listeners.append(trace.on_event)
    try:
        if isinstance(sandbox, AgentrunError):  # commands must not run less confined than asked
            raise sandbox
        # the orchestrator creates worktrees without files, to be quick; a fresh checkout is
        # HEAD exactly, which spares the first attempt's snapshot a scan of every file
        fresh, index = snapshot_and_index(worktree)
        # an index: a resumed worker keeps what is there
        start: Snapshot | None = None if index.exists() else fresh
        if start is not None and assignment.setup is None:
            # the files are checked out while the first model call is made: that call needs
            # none, and every tool call waits for them (AgentTask.files_ready)
            checkout.start(worktree, index)
        elif start is not None:
            populate_worktree(worktree, index)
        if assignment.setup is not None:  # before any model call: a failure fails the batch
            set_up(assignment, progress)
            start = None  # no longer HEAD exactly: the first attempt takes its own snapshot
        pointer = git_pointer(worktree)
        outcome, model = _run_attempts(assignment, cancel, progress, provider, sandbox, start,
                                       checkout.wait)
        checkout.wait()
        if git_pointer(worktree) != pointer:  # git would now follow the model's choice
            raise AgentrunError(
                "the worktree's .git was changed during the run, so its git directory is not "
                "the one agentrun created; nothing was committed",
                hint=f"inspect {worktree}/.git; the agent must not touch .git")
        result = _result_from_git(assignment, outcome, model, worktree)
    except Exception as exc:  # the boundary of the worker: report, never crash silently
        checkout.join()  # no git of ours still writes in the worktree
        message = exc.message if isinstance(exc, AgentrunError) else f"{type(exc).__name__}: {exc}"
        result = _base_result(assignment, status=Status.FAILED, error=message,
                              stop_reason=StopReason.ERROR)
        if os.environ.get("AGENTRUN_DEBUG"):
            import traceback

            result.error = f"{message}\n{traceback.format_exc()}"
    discard_private_home()
    result.duration_s = round(time.monotonic() - started, 3)
    result.write(Path(assignment.result_path))
    progress.emit(DoneEvent(status=result.status, stop_reason=result.stop_reason))
    progress.close()
    return result


class BackgroundCheckout:
    """A fresh worktree's files, checked out in a thread of the worker (`git read-tree -u`,
    as `populate_worktree`), so that the first model call does not wait for them.

    The thread runs at a lower priority, and so does the git it starts: the workers of a wave
    start together, and their first model calls go out before their checkouts take the CPU,
    which they need only once that call has answered."""

    def __init__(self) -> None:
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def start(self, worktree: Path, index: Path | None = None) -> None:
        def run() -> None:
            _yield_cpu()
            try:
                populate_worktree(worktree, index)
            except BaseException as exc:  # noqa: BLE001 - raised where the files are needed
                self.error = exc

        self.thread = threading.Thread(target=run, name="agentrun-checkout", daemon=True)
        self.thread.start()

    def join(self) -> None:
        if self.thread is not None:
            self.thread.join()

    def wait(self) -> None:
        """Block until the files are there; the checkout's error, if it failed."""
        self.join()
        if self.error is not None:
            raise self.error


def _yield_cpu() -> None:
    """Lower the calling thread's priority. Linux keeps a nice value per thread, and a process
    the thread starts inherits it; elsewhere the call would lower the whole worker's, so there
    it does nothing."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _CHECKOUT_NICENESS)


def set_up(assignment: Assignment, progress: _Progress) -> None:
    """Make the worktree ready (worktree_setup.py); its output goes to the worker's record."""
    assert assignment.setup is not None
    progress.emit(SetupStartEvent(command=assignment.setup.command))
    outcome = prepare_worktree(
        assignment.setup, Path(assignment.worktree), assignment.sandbox,
        CommandPolicy(env_allow=tuple(assignment.command_env)),
        Path(assignment.transcript_path or assignment.result_path).parent / LOG_NAME,
        on_spawn=progress.spawned)
    progress.emit(SetupDoneEvent(duration_s=outcome.duration_s,
                                  copied=tuple(outcome.copied)))


def _run_attempts(assignment: Assignment, cancel: threading.Event, progress: _Progress,
                  provider: Any, sandbox: Sandbox, start: Snapshot | None = None,
                  files_ready: Callable[[], None] | None = None
                  ) -> tuple[AgentOutcome, str]:
    root = Path(assignment.project_root) if assignment.project_root else None
    agent = load_agent(assignment.agent, root)
    overrides = {k: v for k, v in {
        "max_steps": assignment.limits.max_steps,
        "token_budget": assignment.limits.token_budget,
        "retries": assignment.limits.retries,
        "retry_on_failure": assignment.limits.retry_on_failure,
        "max_duration_s": assignment.limits.timeout_s,
        "request_retries": assignment.provider.request_retries,
    }.items() if v is not None}
    limits = limits_for(assignment.complexity, agent, overrides)
    task_text = render_worker_assignment(assignment.model_dump(), root)
    task = AgentTask(agent=agent, task=task_text, worktree=Path(assignment.worktree),
                     limits=limits, group=",".join(g.id for g in assignment.groups),
                     validation_command=assignment.validation_command,
                     interactive=assignment.interactive, project_root=root, start=start,
                     files_ready=files_ready or (lambda: None),
                     command_policy=CommandPolicy(env_allow=tuple(assignment.command_env),
                                                  max_write_bytes=assignment.max_write_bytes))
    transcript = Transcript(Path(assignment.transcript_path)
                            if assignment.transcript_path else None)
    executor, model = make_executor(assignment, provider, sandbox)
    progress.emit(StartEvent(groups=tuple(g.id for g in assignment.groups), model=model,
                             executor=assignment.executor))
    allowance = None
    if assignment.allowance_path:  # the run's spending cap: this worker's share of it
        pricing = assignment.pricing or None
        allowance = Allowance(Path(assignment.allowance_path),
                              lambda usage: cost_usd(model, usage, pricing) or 0.0)
    outcome = run_attempts(task, executor, sandbox, transcript=transcript, cancel=cancel,
                           on_event=progress.emit, allowance=allowance)
    return outcome, model


def make_executor(assignment: Assignment, provider: Any,
                  sandbox: Sandbox) -> tuple[Executor, str]:
    """Who works on the assignment (`provider` stands in for the built-in loop's model in
    tests), and the model it uses."""
    cli = CLI_EXECUTORS.get(assignment.executor)
    if cli is not None:
        model = assignment.provider.model
        return cli.from_environment(model, sandbox, provider_env()), model
    if provider is None:
        provider = make_provider(assignment)
    return BuiltinExecutor(provider, sandbox), getattr(provider, "model",
                                                       assignment.provider.model)


def make_provider(assignment: Assignment) -> Provider:
    """Build the provider the assignment names (its adapter imports the SDK on first use)."""
    p = assignment.provider
    cfg = ProviderConfig(provider=p.provider, model=p.model, base_url=p.base_url,
                         request_retries=p.request_retries, timeout_s=p.timeout_s,
                         source="assignment")
    return create_provider(cfg, script=Path(p.script) if p.script else None,
                           record=Path(p.record) if p.record else None)


def _base_result(a: Assignment, **fields: Any) -> WorkerResult:
    return WorkerResult.for_batch(a.group_ids, a.batch, a.branch, a.worktree, **fields)


def git_pointer(worktree: Path) -> tuple[str, str]:
    """What `worktree/.git` is — a linked worktree's `gitdir:` file, or a checkout's own
    directory — read without running git, to compare before agentrun's own git commands."""
    dot_git = worktree / ".git"
    if dot_git.is_symlink():
        return ("symlink", str(dot_git.readlink()))
    if dot_git.is_file():
        return ("file", dot_git.read_text(encoding="utf-8", errors="replace"))
    return ("dir" if dot_git.is_dir() else "missing", "")


def _result_from_git(a: Assignment, outcome: AgentOutcome, model: str,
                     worktree: Path) -> WorkerResult:
    """Commit finished work and read files and commits from git, not from the model."""

    # A failed attempt keeps its work in the worktree, uncommitted, for inspection: the branch
    # only ever holds finished (complete or partial) work.
    if Status(outcome.status).landed_work:
        ids = ", ".join(g.id for g in a.groups)
        title = "; ".join(g.title for g in a.groups if g.title) or "changes"
        worktrees.commit_changes(worktree,
                                 f"{a.spec_id} {ids}: {title}\n\n{outcome.summary}".strip())
    commits = workspace.commits_since(worktree, a.base_commit)
    created, modified, deleted = workspace.changed_files(worktree, a.base_commit, "HEAD")
    return _base_result(
        a, **outcome.carried(), files_created=created, files_modified=modified,
        files_deleted=deleted, commits=commits,
        cost_usd=cost_usd(model, outcome.usage, a.pricing or None))


class _Progress:
    """Progress events as NDJSON lines the orchestrator tails.

    Line-buffered, so every event is on disk as soon as it is emitted, even if the worker is
    killed a moment later.
    """

    def __init__(self, path: str | None) -> None:
        self._fh = open(path, "a", encoding="utf-8", buffering=1) if path else None  # noqa: SIM115
        self._lock = threading.Lock()
        self.listeners: list[EventSink] = []  # e.g. the worker's trace

    def emit(self, event: BaseEvent) -> None:
        line = dumps(event) + "\n"
        with self._lock:
            if self._fh is not None:
                self._fh.write(line)
            for listener in self.listeners:
                listener(event)

    def spawned(self, event: str, pgid: int) -> None:
        """A command's process group started or ended (the sandbox says "spawn" or
        "spawn_end")."""
        self.emit(SpawnEndEvent(pgid=pgid) if event == "spawn_end" else SpawnEvent(pgid=pgid))

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None


def process_main(assignment_path: str) -> None:
    """Entry point of a worker process: its own process group, signals set a cancel flag."""
    with contextlib.suppress(OSError):  # already a group leader
        os.setsid()
    # stdout belongs to the orchestrator's report (`--json`): anything a worker prints goes to
    # stderr instead
    os.dup2(2, 1)
    cancel = threading.Event()
    sandbox: Sandbox | AgentrunError | None = None  # the stop below may come before it exists

    def stop(_sig: int, _frame: object) -> None:
        cancel.set()
        if sandbox is not None and not isinstance(sandbox, AgentrunError):
            sandbox.kill_all(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    name = Path(assignment_path).parent.name
    try:
        assignment = Assignment.read(Path(assignment_path))
        name = assignment.batch
        progress = _Progress(assignment.progress_path)
        sandbox = worker_sandbox(assignment, progress)
        _execute(assignment, cancel, None, progress, sandbox)
    except Exception as exc:  # e.g. a full disk, from its first progress line on: one line
        error = no_space(exc) or exc
        if not isinstance(error, AgentrunError):
            raise
        sys.stderr.write(f"worker {name}: {error.message}\n")
        sys.exit(error.exit_code)
