"""The Claude Code executor: an attempt is one headless `claude -p` run in the worktree.

The CLI runs in the worker's sandbox (with the network, which it needs for its model; files
stay confined to the worktree), with a private HOME for its own config, telemetry and updates
off, and no API key: it calls its model through a `KeyProxy` that holds the key. It reports
through its stream of JSON events: they feed the live display and the transcript, each reply's
tokens and each tool result go to the worker's limits as they come (guard.py: token budget,
spending cap, stuck-loop breaker; its `--max-turns` is the step limit; each model call is also
judged on the tool results its request carries, `sent_results`), and its last event
carries the total and whether it failed. Its final message must end with a fenced JSON block,
read like `submit_result`'s arguments; without a valid one the CLI is asked once more in the
same session, then the attempt fails with the reason.
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
from agentrun.executors.keyproxy import ANTHROPIC, KeyProxy
from agentrun.sandbox.base import Sandbox
from agentrun.tools.environment import private_home

INSTALL = "npm install -g @anthropic-ai/claude-code@2"
DEFAULT_UPSTREAM = "https://api.anthropic.com"
MIN_MAJOR = 2
QUIET = {"DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1",
         "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
# what the CLI may do without asking: edits (acceptEdits) and these; its sandbox confines them
ALLOWED_TOOLS = "Bash Edit MultiEdit Write Read Glob Grep LS NotebookEdit TodoWrite"
CLAUDE_WRITE_TOOLS = {"Bash", "Edit", "MultiEdit", "Write", "NotebookEdit"}


def find_cli(exe: str = "claude") -> Cli:
    """The `claude` CLI, checked to run and to be recent enough; CannotStart otherwise."""
    return headless.find_cli(exe, "Claude Code", INSTALL, (MIN_MAJOR, 0, 0))


@dataclass(kw_only=True)
class _Stream(headless.CliStream):
    """What the CLI's stream of JSON events said, followed as it arrives."""

    final: dict[str, Any] | None = None
    replies: set[Any] = field(default_factory=set)  # message ids whose usage is counted
    calls: dict[str, tuple[str, Any]] = field(default_factory=dict)  # tool_use id -> call
    called: dict[str, float] = field(default_factory=dict)  # tool_use id -> when it was asked
    said: str = ""  # the model's own last words (not the CLI's synthetic messages)

    def event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        self.session = event.get("session_id") or self.session
        if kind == "assistant":
            self._assistant(event.get("message") or {})
        elif kind == "user":
            self._tool_results(event.get("message") or {})
        elif kind == "result":
            self.final = event
        self.record("cli_event", event=event)

    def _assistant(self, message: dict[str, Any]) -> None:
        tools = []
        for block in message.get("content") or []:
            if block.get("type") == "text" and str(block.get("text", "")).strip():
                self.last_thought = str(block["text"]).strip()
                if message.get("model") != "<synthetic>":
                    self.said = self.last_thought
            elif block.get("type") == "tool_use":
                name = str(block.get("name", "?"))
                tools.append(name)
                args = block.get("input") or {}
                self.calls[str(block.get("id"))] = (name, args)
                self.called[str(block.get("id"))] = time.time()
                target = args.get("file_path") or args.get("command") or args.get("pattern")
                self.last_action = f"{name} {target}" if target else name
                self.wrote = self.wrote or name in CLAUDE_WRITE_TOOLS
        self.steps += 1
        # the CLI repeats a reply's usage on each of its content blocks: count it once
        new_reply = message.get("id") not in self.replies
        turn = _usage(message.get("usage")) if new_reply else Usage()
        self.replies.add(message.get("id"))
        self.spent = self.spent + turn
        # the tokens, and when each model call began and ended: the key proxy's `Meter` says
        # (and charges them to the guard), for every call that went through it
        self.emit(StepEvent(step=self.steps, tool=tools[0] if tools else None,
                            group=self.group))

    def _tool_results(self, message: dict[str, Any]) -> None:
        for block in message.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                result = _result(block, self.calls)
                self.observation = result.content[:2000]
                self.tool_done(result.name,
                               self.called.pop(str(block.get("tool_use_id")), self.began),
                               result.is_error)
                self.began = time.time()  # the model is called again with the results
                if self.guard is not None:
                    self.guard.tool_result(result)


def _result(block: dict[str, Any], calls: Mapping[str, tuple[str, Any]]) -> CliToolResult:
    """A `tool_result` block, with the call it answers (from `calls`, by tool_use id), read
    the same way from the stream and from a request body, so that the two agree."""
    content = block.get("content")
    text = content if isinstance(content, str) else json.dumps(content)
    call_id = block.get("tool_use_id")
    name, args = calls.get(str(call_id), ("?", {}))
    return CliToolResult(call_id if isinstance(call_id, str) else None, name, args, text,
                      block.get("is_error") is True)


def sent_results(body: bytes) -> list[CliToolResult]:
    """The tool results a Messages API request carries (the CLI sends its whole conversation
    each time), each with its call from the same body; what does not fit is skipped (the body
    is untrusted: guard.py)."""
    data = json.loads(body)
    messages = data.get("messages") if isinstance(data, dict) else None
    calls: dict[str, tuple[str, Any]] = {}
    results = []
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                calls[block["id"]] = (str(block.get("name", "?")), block.get("input") or {})
            elif block.get("type") == "tool_result":
                results.append(_result(block, calls))
    return results


def config_dir() -> Path:
    """The CLI's own config and sessions: in the worker's private HOME, which is removed when
    the worker ends, and kept between the CLI's runs of one attempt (for `--resume`)."""
    path = private_home() / ".claude-code"
    path.mkdir(parents=True, exist_ok=True)
    return path


def from_environment(model: str, sandbox: Sandbox,
                     environ: Mapping[str, str]) -> ClaudeCodeExecutor:
    """The executor for a worker: the installed CLI, and the Anthropic server and key of the
    worker's environment (which only the key proxy gets)."""
    key = environ.get("ANTHROPIC_API_KEY", "")
    if not key:
        raise CannotStart("the claude-code executor needs ANTHROPIC_API_KEY",
                          hint="set it in the environment or in ~/.config/agentrun/config.yaml")
    return ClaudeCodeExecutor(find_cli(), model, sandbox, key=key, config_dir=config_dir(),
                              upstream=environ.get("ANTHROPIC_BASE_URL") or DEFAULT_UPSTREAM)


class ClaudeCodeExecutor(headless.CliExecutor):
    """Runs attempts with the `claude` CLI."""

    name = "claude-code"

    def run_attempt(self, task: AgentTask, attempt: Attempt) -> AttemptOutcome:
        attempt.before_write()  # the CLI may write from its first moment
        guard = self.guard(task, attempt)
        meter = headless.Meter(attempt.on_event or (lambda e: None), task.group, guard.charge)
        with KeyProxy(self.upstream, self.key, ANTHROPIC, gate=guard.before_call,
                      on_usage=meter.add, log=attempt.transcript.record) as proxy:
            stream, stop = self._run(task, attempt, proxy, attempt.text, None, guard)
            stop = stop or _out_of_turns(stream, task, guard) or _refused(stream, guard)
            report = _report(stream)
            if isinstance(report, str) and stop is None and stream.session and \
                    stream.final is not None and not stream.final.get("is_error"):
                attempt.transcript.record("cli_reask", reason=report)
                again, stop = self._run(task, attempt, proxy, render(
                    "claude_code_reask", {"problem": report}, task.project_root),
                    stream.session, guard)
                stream = _merged(stream, again)
                stop = stop or _out_of_turns(stream, task, guard)
                report = _report(again)
        usage = guard.settle(self._usage(stream))  # beyond the metered calls: the CLI's total
        return headless.outcome(stream, report, stop, usage, guard.error)

    def guard(self, task: AgentTask, attempt: Attempt) -> CliGuard:
        """The worker's limits, which also read the tool results each model call carries."""
        guard = super().guard(task, attempt)
        guard.sent = sent_results
        return guard

    def _run(self, task: AgentTask, attempt: Attempt, proxy: KeyProxy, prompt: str,
             resume: str | None, guard: CliGuard) -> tuple[_Stream, StopReason | None]:
        """One CLI process; (what it said, why it was stopped — None if it ended itself)."""
        stream = _Stream(emit=attempt.on_event or (lambda e: None),
                         record=attempt.transcript.record, group=task.group, guard=guard)
        argv = [self.cli.exe, "-p", prompt, "--output-format", "stream-json", "--verbose",
                "--model", self.model, "--permission-mode", "acceptEdits",
                "--allowedTools", ALLOWED_TOOLS,
                "--append-system-prompt", render("claude_code_system", {}, task.project_root)]
        if resume:
            argv += ["--resume", resume]
        env = self.cli_env(task, {**QUIET, "CLAUDE_CONFIG_DIR": str(self.config_dir),
                                  "ANTHROPIC_BASE_URL": proxy.url,
                                  "ANTHROPIC_API_KEY": proxy.token})
        if task.limits.max_steps:
            argv += ["--max-turns", str(task.limits.max_steps)]
        attempt.transcript.record("cli_start", argv=[*argv[:2], "(prompt)", *argv[3:]],
                                  resume=resume)
        result, stop = self.run_cli(argv, env, task, attempt, stream)
        if stream.final is None and stop is None:
            tail = "\n".join(stream.noise[-5:]) or result.output[-1000:]
            stream.final = {"is_error": True, "result": f"the CLI exited with code "
                            f"{result.exit_code} without a result: {tail.strip()}"}
        return stream, stop

    def _usage(self, stream: _Stream) -> Usage:
        """What the attempt spent: the CLI's own total from its final event."""
        return _usage((stream.final or {}).get("usage"))


def _usage(raw: Any) -> Usage:
    """Anthropic's usage fields as a `Usage`."""
    raw = raw if isinstance(raw, dict) else {}

    def count(name: str) -> int:
        value = raw.get(name)  # a whole count, or none (the events carry only such)
        return value if isinstance(value, int) and not isinstance(value, bool) \
            and value >= 0 else 0

    return Usage(count("input_tokens"), count("output_tokens"),
                 count("cache_read_input_tokens"), count("cache_creation_input_tokens"))


def _out_of_turns(stream: _Stream, task: AgentTask, guard: CliGuard) -> StopReason | None:
    """The CLI's own `error_max_turns` ending is the step limit, said as such."""
    if (stream.final or {}).get("subtype") != "error_max_turns":
        return None
    guard.error = guard.error or (f"reached the step limit ({task.limits.max_steps} turns, "
                                  "the CLI's --max-turns) before finishing")
    return StopReason.MAX_STEPS


def _refused(stream: _Stream, guard: CliGuard) -> StopReason | None:
    """The model refused (the CLI ends with `stop_reason: refusal`): said as such, in the
    model's words, not asked again."""
    if (stream.final or {}).get("stop_reason") != "refusal":
        return None
    words = stream.said or "(it gave no reason)"
    guard.error = guard.error or f"the model refused the task: {words}"
    return StopReason.REFUSAL


def _merged(first: _Stream, second: _Stream) -> _Stream:
    """The follow-up continues the same session: its steps count on from the first run's, and
    the tokens of both are paid."""
    second.steps += first.steps
    second.wrote = second.wrote or first.wrote
    a, b = (first.final or {}).get("usage") or {}, (second.final or {}).get("usage") or {}
    if second.final is not None:
        second.final["usage"] = {k: int(a.get(k) or 0) + int(b.get(k) or 0)
                                 for k in set(a) | set(b)
                                 if isinstance(a.get(k, 0), int) and isinstance(b.get(k, 0), int)}
    return second


def _report(stream: _Stream) -> Submission | str:
    """The submission in the CLI's final message, or what is wrong with it."""
    final = stream.final or {}
    return headless.read_report(str(final.get("result") or ""), str(final.get("result") or final)
                                if final.get("is_error") else None)
