"""The Codex executor: an attempt is one headless `codex exec` run in the worktree.

The CLI runs in the worker's sandbox (with the network, which it needs for its model; files
stay confined to the worktree) with its own sandbox and approvals off: Codex's Linux sandbox
cannot nest inside agentrun's bubblewrap, so agentrun's confines it instead, as it confines any
command. Its config and sessions live in a private CODEX_HOME; analytics, feedback and web
search are off. It gets no API key: it calls its model (the OpenAI Responses API) through a
`KeyProxy` that holds the key. It reports through its `--json` events: they feed the live
display and the transcript, each finished turn carries the session's tokens, and its tokens and
command results go to the worker's limits as they come (guard.py). Codex reports
no cost: the worker prices the tokens with agentrun's price table, as for its own loop. Its
final message must end with a fenced JSON block, read like `submit_result`'s arguments; without
a valid one the session is resumed once with the question, then the attempt fails with the
reason. A model that refused (a `refusal` in its answer, which the CLI drops from its events
and the key proxy notes) is stop_reason `refusal` in its own words, not asked again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrun.agent.prompts import render
from agentrun.agent.results import AttemptOutcome, Submission
from agentrun.core.errors import CannotStart
from agentrun.core.events import StepEvent
from agentrun.core.status import StopReason
from agentrun.core.usage import Usage
from agentrun.executors import headless
from agentrun.executors.base import AgentTask, Attempt
from agentrun.executors.guard import CliGuard, CliToolResult
from agentrun.executors.headless import Cli
from agentrun.executors.keyproxy import OPENAI, KeyProxy
from agentrun.sandbox.base import Sandbox
from agentrun.tools.environment import private_home

INSTALL = "npm install -g @openai/codex@0.169"
DEFAULT_UPSTREAM = "https://api.openai.com/v1"
MINIMUM = (0, 169, 0)  # the version whose events and options this follows
PROVIDER = "agentrun"  # the model provider entry the CLI is given (its key proxy)
# the CLI's items that are tool calls, as the display names them; the first two write files
TOOL_ITEMS = {"command_execution": "shell", "file_change": "apply_patch",
              "mcp_tool_call": "mcp", "web_search": "web_search"}
WRITE_ITEMS = {"command_execution", "file_change"}


def find_cli(exe: str = "codex") -> Cli:
    """The `codex` CLI, checked to run and to be recent enough; CannotStart otherwise."""
    return headless.find_cli(exe, "Codex", INSTALL, MINIMUM)


def config_dir() -> Path:
    """The CLI's CODEX_HOME: in the worker's private HOME, which is removed when the worker
    ends, and kept between the CLI's runs of one attempt (for `exec resume`)."""
    path = private_home() / ".codex"
    path.mkdir(parents=True, exist_ok=True)
    return path


def from_environment(model: str, sandbox: Sandbox, environ: Mapping[str, str]) -> CodexExecutor:
    """The executor for a worker: the installed CLI, and the OpenAI server and key of the
    worker's environment (which only the key proxy gets)."""
    key, base_url = environ.get("OPENAI_API_KEY", ""), environ.get("OPENAI_BASE_URL", "")
    if not key and not base_url:
        raise CannotStart("the codex executor needs OPENAI_API_KEY",
                          hint="set it in the environment or in ~/.config/agentrun/config.yaml")
    return CodexExecutor(find_cli(), model, sandbox, key=key, config_dir=config_dir(),
                         upstream=base_url or DEFAULT_UPSTREAM)


@dataclass(kw_only=True)
class _Stream(headless.CliStream):
    """What the CLI's `--json` events said, followed as they arrive."""

    # the session's tokens when this process started: a turn's usage is the session's total
    # so far (a resumed session's includes the first run's)
    reported: Usage = field(default_factory=Usage)
    message: str = ""  # the last agent message: the one that carries the result block
    turns: int = 0  # turns that completed
    failure: str | None = None
    items: dict[str, float] = field(default_factory=dict)  # item id -> when it started

    def event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "thread.started":
            self.session = str(event.get("thread_id") or "") or self.session
        elif kind == "turn.started":
            self.began = time.time()
        elif kind == "item.started":
            self.items[str((event.get("item") or {}).get("id"))] = time.time()
        elif kind == "item.completed":
            self._item(event.get("item") or {})
        elif kind == "turn.completed":
            self._turn(event.get("usage"))
        elif kind in ("turn.failed", "error"):
            error = event.get("error") if kind == "turn.failed" else event
            self.failure = str((error or {}).get("message") or event)
        self.record("cli_event", event=event)

    def _item(self, item: dict[str, Any]) -> None:
        kind = item.get("type")
        if kind == "agent_message":
            self.message = str(item.get("text") or "")
            self.last_thought = self.message.strip() or self.last_thought
        elif kind in TOOL_ITEMS:
            target = item.get("command") or ", ".join(
                str(c.get("path")) for c in item.get("changes") or [] if isinstance(c, dict))
            self.last_action = f"{TOOL_ITEMS[kind]} {target}".strip()
            self.observation = str(item.get("aggregated_output") or "")[:2000]
            self.wrote = self.wrote or kind in WRITE_ITEMS
            self.steps += 1
            self._emit(TOOL_ITEMS[kind])
            code = item.get("exit_code")
            failed = item.get("status") == "failed" or (
                isinstance(code, int) and not isinstance(code, bool) and code != 0)
            self.tool_done(TOOL_ITEMS[kind], self.items.pop(str(item.get("id")), time.time()),
                           failed)
            # no call id: the events do not carry the API's (`call_id`), and a call's output
            # in a request body adds a chunk id and the wall time, so the guard cannot match
            # the bodies to the events: it reads the events alone
            if self.guard is not None:
                self.guard.tool_result(CliToolResult(None, TOOL_ITEMS[kind], {"target": target},
                                                  self.observation, failed))

    def _turn(self, raw: Any) -> None:
        """A turn ended: what it cost is the session's total less what was counted before
        (or, from a CLI that reports each turn alone, its usage as it is)."""
        total = _usage(raw)
        before = self.reported + self.spent
        turn = _less(total, before) if total.total >= before.total else total
        self.spent = self.spent + turn
        self.turns += 1
        self._emit(None)  # (its tokens: the key proxy's meter charged each call)

    def _emit(self, tool: str | None) -> None:
        # the tokens, and when each model call began and ended: the key proxy's `Meter` says
        # (and charges them to the guard), for every call that went through it
        self.emit(StepEvent(step=self.steps, tool=tool, group=self.group))


class CodexExecutor(headless.CliExecutor):
    """Runs attempts with the `codex` CLI (its `config_dir` is the CLI's CODEX_HOME)."""

    name = "codex"

    def run_attempt(self, task: AgentTask, attempt: Attempt) -> AttemptOutcome:
        attempt.before_write()  # the CLI may write from its first moment
        guard = self.guard(task, attempt)
        meter = headless.Meter(attempt.on_event or (lambda e: None), task.group, guard.charge)
        with KeyProxy(self.upstream, self.key, OPENAI, gate=guard.before_call,
                      on_usage=meter.add, log=attempt.transcript.record) as proxy:
            stream, stop = self._run(task, attempt, proxy, attempt.text, None, Usage(), guard)
            spent = stream.spent
            report = _report(stream)
            stop = stop or _refused(proxy, report, guard)
            if isinstance(report, str) and stop is None and stream.session and \
                    stream.failure is None and stream.turns:
                attempt.transcript.record("cli_reask", reason=report)
                again, stop = self._run(task, attempt, proxy, render(
                    "codex_reask", {"problem": report}, task.project_root),
                    stream.session, spent, guard)
                again.steps += stream.steps
                again.wrote = again.wrote or stream.wrote
                spent, stream, report = spent + again.spent, again, _report(again)
                stop = stop or _refused(proxy, report, guard)
        spent = guard.settle(spent)  # beyond the metered calls: what the CLI reported
        return headless.outcome(stream, report, stop, spent, guard.error)

    def _run(self, task: AgentTask, attempt: Attempt, proxy: KeyProxy, prompt: str,
             resume: str | None, reported: Usage,
             guard: CliGuard) -> tuple[_Stream, StopReason | None]:
        """One CLI process; (what it said, why it was stopped — None if it ended itself)."""
        stream = _Stream(emit=attempt.on_event or (lambda e: None),
                         record=attempt.transcript.record, group=task.group, reported=reported,
                         guard=guard)
        system = render("codex_system", {}, task.project_root)
        argv = [self.cli.exe, "exec", *(["resume"] if resume else []), "--json",
                "--skip-git-repo-check", "--model", self.model,
                # agentrun's sandbox confines the CLI and what it runs (see the docstring)
                "--dangerously-bypass-approvals-and-sandbox",
                *_settings(proxy.url, system), "--", *([resume] if resume else [])]
        env = self.cli_env(task, {"CODEX_HOME": str(self.config_dir),
                                  "OPENAI_API_KEY": proxy.token})
        env.pop("OPENAI_BASE_URL", None)
        attempt.transcript.record("cli_start", argv=[*argv, "(prompt)"], resume=resume)
        result, stop = self.run_cli([*argv, prompt], env, task, attempt, stream)
        if stop is None and stream.failure is None and (result.exit_code or not stream.turns):
            tail = "\n".join(stream.noise[-5:]) or result.output[-1000:]
            stream.failure = (f"the CLI exited with code {result.exit_code} without "
                              f"finishing its turn: {tail.strip()}")
        return stream, stop


def _settings(proxy_url: str, system: str) -> list[str]:
    """`-c` overrides: the model through the key proxy, instructions, nothing else sent out."""
    provider = (f'{{name="{PROVIDER}", base_url="{proxy_url}", env_key="OPENAI_API_KEY", '
                f'wire_api="responses"}}')
    pairs = [("model_provider", f'"{PROVIDER}"'), (f"model_providers.{PROVIDER}", provider),
             ("developer_instructions", json.dumps(system)),  # a JSON string is a TOML one
             ("web_search", '"disabled"'), ("analytics.enabled", "false"),
             ("feedback.enabled", "false"), ("check_for_update_on_startup", "false")]
    return [arg for key, value in pairs for arg in ("-c", f"{key}={value}")]


def _usage(raw: Any) -> Usage:
    """Codex's usage fields as a `Usage` (its `input_tokens` include the cached ones)."""
    raw = raw if isinstance(raw, dict) else {}

    def count(name: str) -> int:
        value = raw.get(name)  # a whole count, or none (the events carry only such)
        return value if isinstance(value, int) and not isinstance(value, bool) \
            and value >= 0 else 0

    cached = count("cached_input_tokens")
    return Usage(max(0, count("input_tokens") - cached), count("output_tokens"), cached,
                 count("cache_write_input_tokens"))


def _less(total: Usage, before: Usage) -> Usage:
    return Usage(*(max(0, a - b) for a, b in zip(total.to_dict().values(),
                                                 before.to_dict().values(), strict=True)))


def _refused(proxy: KeyProxy, report: Submission | str,
             guard: CliGuard) -> StopReason | None:
    """The model refused and the CLI ended without a result: said as such, in the model's
    words (the key proxy saw them; the CLI reports no message for a refusal)."""
    if isinstance(report, Submission) or not proxy.declined:
        return None
    words = proxy.declined[-1].strip() or "(it gave no reason)"
    guard.error = guard.error or f"the model refused the task: {words}"
    return StopReason.REFUSAL


def _report(stream: _Stream) -> Submission | str:
    """The submission in the CLI's last message, or what is wrong with it."""
    return headless.read_report(stream.message, stream.failure)
