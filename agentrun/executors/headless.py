"""What the coding-agent CLI executors (Claude Code, Codex) share: finding the installed CLI,
following its stream of JSON events, running it in the worker's sandbox and stopping it when
the worker is told to stop or a limit is reached (guard.py), reading the fenced JSON result
block of its last message like `submit_result`'s arguments, and turning a run into an
`AttemptOutcome`.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypedDict

from pydantic import ValidationError

from agentrun.agent.results import AttemptOutcome, Submission
from agentrun.core.errors import CannotStart
from agentrun.core.events import EventSink, StepEvent, ToolEvent, UsageCounts
from agentrun.core.status import Status, StopReason
from agentrun.core.usage import Usage
from agentrun.executors.base import AgentTask, Attempt
from agentrun.executors.guard import CliGuard
from agentrun.sandbox.base import CommandResult, OutputFollower, Sandbox
from agentrun.tools.agent_tools import SubmitResult
from agentrun.tools.base import CommandPolicy
from agentrun.tools.environment import scrubbed_env

CLI_ERROR = "the CLI reported an error"
FENCE = re.compile(r"```(?:json)?[ \t]*\n(.*?)\n[ \t]*```", re.DOTALL)
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


@dataclass(frozen=True)
class Cli:
    """An installed CLI: the path of its executable and its version."""

    exe: str
    version: str


@dataclass(kw_only=True)
class CliStream:
    """A CLI's stdout of JSON events, one a line, split as the chunks arrive, and what
    following them found out (each executor reads its own kinds of event). Lines that are not
    JSON (the last 20) are kept to explain a CLI that ends without finishing its turn."""

    emit: EventSink  # progress for the live display
    record: Callable[..., object]  # the worker's transcript
    group: str
    guard: CliGuard | None = None  # the worker's limits, told of tokens and tool results
    session: str | None = None  # the CLI's session id, to resume it
    steps: int = 0
    wrote: bool = False
    last_thought: str = ""
    last_action: str = ""
    observation: str = ""
    spent: Usage = field(default_factory=Usage)  # by this process, as it reported
    # when the model's current call began (the CLI's start, or the last tool results it was
    # given): a model call's span in traces and the report's timeline
    began: float = field(default_factory=time.time)
    pending: bytes = b""
    noise: list[str] = field(default_factory=list)

    def feed(self, chunk: bytes) -> None:
        self.pending += chunk
        *lines, self.pending = self.pending.split(b"\n")
        for line in lines:
            self.line(line.decode("utf-8", "replace"))

    def flush(self) -> None:
        """The last line, when the CLI ended without a newline."""
        if self.pending:
            self.line(self.pending.decode("utf-8", "replace"))
            self.pending = b""

    def line(self, text: str) -> None:
        try:
            event = json.loads(text)
        except ValueError:
            if text.strip():
                self.noise = [*self.noise[-19:], text]
            return
        if isinstance(event, dict):
            self.event(event)

    def event(self, event: dict[str, Any]) -> None:
        """One event of the CLI's; each executor reads its own kinds."""
        raise NotImplementedError

    def tool_done(self, name: str, started: float, error: bool) -> None:
        """A tool call of the CLI's ended (its span in traces and the report)."""
        self.emit(ToolEvent(name=name, started=round(started, 3), error=error,
                            group=self.group))


def find_cli(exe: str, product: str, install: str, minimum: tuple[int, int, int]) -> Cli:
    """The CLI `exe`, checked to run and to be at least `minimum`; CannotStart (with the
    `install` command) otherwise."""
    path = shutil.which(exe)
    if path is None:
        raise CannotStart(f"the {product} CLI (`{exe}`) is not installed",
                          hint=f"install it: {install}; or run with --executor builtin")
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60,
                             check=False, stdin=subprocess.DEVNULL).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CannotStart(f"`{path} --version` did not run: {exc}",
                          hint=f"reinstall it: {install}") from None
    match = _VERSION.search(out)
    if match is None or tuple(int(g) for g in match.groups()) < minimum:
        need = f"{minimum[0]}.x" if minimum[0] else f"0.{minimum[1]}"
        raise CannotStart(f"{product} {out or '(unknown version)'} at {path} is too old: "
                          f"version {need} or later is needed", hint=f"update: {install}")
    return Cli(str(Path(path).resolve()), match.group(0))


class Meter:
    """What an attempt's model calls cost, as its key proxy read each answer: the attempt's
    spend, including calls its CLI did not report (a command's with the proxy's token). Each
    call is charged to the worker's limits (`charge`: guard.py) and sent on as a progress
    `step` with its usage and when it began, which the run's spending cap sums as it comes and
    the run's report draws; the CLI's own events carry neither, so nothing counts twice."""

    def __init__(self, emit: EventSink, group: str,
                 charge: Callable[[Usage], None] = lambda _usage: None) -> None:
        self.emit, self.group, self.charge = emit, group, charge
        self.total = Usage()
        self._lock = threading.Lock()

    def add(self, call: Usage, started: float) -> None:
        with self._lock:
            self.total = total = self.total + call
        self.emit(StepEvent(tokens=total.total, usage=UsageCounts(**call.to_dict()),
                            worker_usage=UsageCounts(**total.to_dict()), group=self.group,
                            started=round(started, 3)))
        self.charge(call)


class CancelWatcher:
    """Stops the CLI when the worker is told to stop (the sandbox call itself blocks)."""

    def __init__(self, cancel: threading.Event, sandbox: Sandbox) -> None:
        self.cancel, self.sandbox, self.fired = cancel, sandbox, False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._done.wait(0.05):
            if self.cancel.is_set():
                self.fired = True
                self.sandbox.kill_all(signal.SIGTERM)
                return

    def __enter__(self) -> CancelWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


class CliExecutor:
    """What an executor that drives a coding-agent CLI holds and how it runs one CLI process.
    `upstream` and `key` are the real model server and key, which only the worker's
    `KeyProxy` gets; `config_dir` is the CLI's own, kept between its runs of one attempt (to
    resume its session)."""

    name: ClassVar[str]  # the executor's name, as `--executor` spells it

    def __init__(self, cli: Cli, model: str, sandbox: Sandbox, *, upstream: str, key: str,
                 config_dir: Path) -> None:
        self.cli, self.model, self.sandbox = cli, model, sandbox
        self.upstream, self.key = upstream, key
        self.config_dir = config_dir

    def describe(self) -> dict[str, str]:
        return {"provider": self.name, "model": self.model, "executor": self.name,
                "cli_version": self.cli.version}

    def guard(self, task: AgentTask, attempt: Attempt) -> CliGuard:
        """The worker's limits, held over one attempt of the CLI's (guard.py)."""
        return CliGuard(task.limits, attempt.budget, self.sandbox, attempt.transcript.record)

    def cli_env(self, task: AgentTask, extra: dict[str, str]) -> dict[str, str]:
        """A command's environment (allow-listed, no secrets) with the CLI on PATH."""
        env, _secrets = scrubbed_env(task.command_policy or CommandPolicy(),
                                     worktree=Path(task.worktree))
        return {**env, "PATH": f"{Path(self.cli.exe).parent}:{env.get('PATH', '')}", **extra}

    def run_cli(self, argv: list[str], env: dict[str, str], task: AgentTask, attempt: Attempt,
                stream: CliStream) -> tuple[CommandResult, StopReason | None]:
        """One CLI process in the worker's sandbox, its events fed to `stream` as they come;
        (its result, why it was stopped — None if it ended by itself)."""
        task.files_ready()  # the CLI works on the files from its first moment
        watcher = CancelWatcher(attempt.budget.cancel, self.sandbox)
        follower = OutputFollower(guarded(stream.feed))
        if stream.guard is not None:  # it reads all the CLI wrote before each model call
            stream.guard.catch_up = follower.catch_up
        with watcher:
            result = self.sandbox.run(argv, cwd=Path(task.worktree),
                                      timeout_s=max(1.0, attempt.budget.time_left()), env=env,
                                      on_output=follower)
        stream.flush()
        halted = stream.guard.stop if stream.guard is not None else None
        stop = StopReason.INTERRUPTED if watcher.fired else halted or \
            (StopReason.TIMEOUT if result.timed_out else None)
        return result, stop


def guarded(feed: Callable[[bytes], None]) -> Callable[[bytes], None]:
    """A failure to follow the stream must not stop the output being read."""
    def safe(chunk: bytes) -> None:
        with contextlib.suppress(Exception):  # the transcript and the result still get it
            feed(chunk)
    return safe


def read_report(final_message: str, error: str | None = None) -> Submission | str:
    """The submission in the CLI's final message, or what is wrong with it (`error`: the CLI
    said it failed)."""
    if error is not None:
        return f"{CLI_ERROR}: {error[:500]}"
    blocks = FENCE.findall(final_message)
    if not blocks:
        return "the final message has no fenced JSON block with the result"
    try:
        args = SubmitResult.ResultArgs.model_validate_json(blocks[-1])
    except ValidationError as exc:
        err = exc.errors()[0]
        return f"the result block is invalid: {'.'.join(map(str, err['loc']))}: {err['msg']}"
    return Submission(args.status, args.summary, list(args.criteria_met), list(args.deviations),
                      args.error, None, args.no_change_needed)


class _Progress(TypedDict):
    """Where the CLI left off, as every outcome of it carries."""

    steps: int
    usage: Usage
    wrote: bool
    last_thought: str
    last_action: str
    observation: str


def outcome(stream: CliStream, report: Submission | str, stop: StopReason | None,
            usage: Usage, error: str | None = None) -> AttemptOutcome:
    """`error`: which limit stopped the CLI, in words."""
    where = _Progress(steps=stream.steps, usage=usage, wrote=stream.wrote,
                      last_thought=stream.last_thought, last_action=stream.last_action,
                      observation=stream.observation)
    if stop is not None:
        if stop == StopReason.TIMEOUT and error is None:
            error = "ran out of time: the CLI was stopped at the worker's time limit"
        return AttemptOutcome(status=Status.FAILED, stop_reason=stop,
                              summary=f"Stopped ({stop}) after {stream.steps} steps.",
                              error=error or f"the CLI was stopped: {stop}", **where)
    if isinstance(report, str):  # the CLI failed, or ended without a readable result
        why = StopReason.ERROR if report.startswith(CLI_ERROR) else StopReason.NO_RESULT
        return AttemptOutcome(status=Status.FAILED, stop_reason=why,
                              summary=stream.last_thought[:1000], error=report, **where)
    return AttemptOutcome(status=Status(report.status), stop_reason=StopReason.COMPLETED,
                          summary=report.summary, error=report.error, submission=report,
                          criteria_met=report.criteria_met, deviations=report.deviations,
                          no_change_needed=report.no_change_needed, **where)
