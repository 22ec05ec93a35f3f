"""The built-in executor: agentrun's own tool loop, one fresh `Conversation` per attempt."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from agentrun.agent.conversation import Conversation
from agentrun.agent.results import AttemptOutcome
from agentrun.agent.runtime import Runtime
from agentrun.agent.terminator import Terminator
from agentrun.core.usage import Usage
from agentrun.executors.base import AgentTask, Attempt
from agentrun.providers.base import Provider
from agentrun.sandbox.base import Sandbox
from agentrun.tools.base import CommandPolicy


class BuiltinExecutor:
    """Runs attempts with `provider` as the model and the worker's `sandbox` for commands.

    `sleep` and `ask` are injectable for tests: the back-off between model-call retries, and
    the yes/no questions of interactive runs (by default the terminal, never without a TTY).
    """

    def __init__(self, provider: Provider, sandbox: Sandbox, *,
                 sleep: Callable[[float], None] | None = None,
                 ask: Callable[[str], bool] | None = None) -> None:
        self.provider = provider
        self.sandbox = sandbox
        self.sleep = sleep
        self.ask = ask

    def describe(self) -> dict[str, str]:
        return {"provider": getattr(self.provider, "name", "?"),
                "model": getattr(self.provider, "model", "?")}

    def run_attempt(self, task: AgentTask, attempt: Attempt) -> AttemptOutcome:
        budget, limits = attempt.budget, task.limits
        rt = Runtime(provider=self.provider, limits=limits, worktree=Path(task.worktree),
                     transcript=attempt.transcript, tracker=budget.tokens,
                     terminator=Terminator(limits, budget.tokens, started=budget.started,
                                           clock=budget.clock, cancelled=budget.cancel.is_set),
                     cancel=budget.cancel, sandbox=self.sandbox, group=task.group,
                     project_root=task.project_root,
                     policy=task.command_policy or CommandPolicy(),
                     interactive=task.interactive, on_event=attempt.on_event,
                     sleep=self.sleep, ask=self.ask, before_call=budget.before_call,
                     files_ready=task.files_ready)
        before = budget.tokens.usage
        result = Conversation(rt, task.agent, attempt.text, attempt.tools,
                              max_steps=limits.max_steps, depth=0, attempt=attempt.number,
                              before_write=attempt.before_write, output=task.output).run()
        result.usage = _spent(before, budget.tokens.usage)
        return result


def _spent(before: Usage, after: Usage) -> Usage:
    return Usage(after.input_tokens - before.input_tokens,
                 after.output_tokens - before.output_tokens,
                 after.cache_read_tokens - before.cache_read_tokens,
                 after.cache_write_tokens - before.cache_write_tokens)
