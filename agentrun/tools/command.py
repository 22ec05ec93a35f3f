"""`run_command`: a shell command in the worktree, with a timeout, an output cap and no secrets.

The deny list is checked here; the command then runs in the worker's sandbox (the tool
context's), which kills it with everything it started when it times out or ends.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from agentrun.core.secrets import redact
from agentrun.sandbox.base import CommandResult, Sandbox
from agentrun.tools import environment, policy
from agentrun.tools.base import (
    COMMAND_DENIED,
    COMMAND_FAILED,
    TIMEOUT,
    CommandPolicy,
    ToolContext,
    ToolResult,
)
from agentrun.tools.tooldef import ArgsTool, ToolArgs


def execute_command(sandbox: Sandbox, command: str, root: Path, rules: CommandPolicy,
                    timeout_s: float) -> ToolResult:
    """Run `command` in `sandbox` under `rules` (secrets scrubbed from its environment and
    redacted from its output); the deny list is checked by the caller."""
    env, secrets = environment.scrubbed_env(rules, worktree=root)
    result = sandbox.run(command, cwd=root, timeout_s=timeout_s, env=env,
                         max_output_chars=rules.max_output_chars,
                         redact=lambda text: redact(text, secrets))
    return _tool_result(result, timeout_s)


def _tool_result(result: CommandResult, timeout_s: float) -> ToolResult:
    shown = result.output if result.output else "(no output)"
    data = {"exit_code": result.exit_code, "output": result.output,
            "duration_s": round(result.duration_s, 3)}
    if result.timed_out:
        return ToolResult(
            f"command timed out after {timeout_s:g}s; its process group was killed\n"
            f"output so far:\n{shown}",
            is_error=True, error_kind=TIMEOUT, data={**data, "timed_out": True})
    code = result.exit_code
    content = f"exit code: {code} ({result.duration_s:.2f}s)\n{shown}"
    if code != 0:
        return ToolResult(content, is_error=True, error_kind=COMMAND_FAILED, data=data)
    return ToolResult(content, data=data)


class RunCommand(ArgsTool):
    name = "run_command"
    description = (
        "Run a bash command in the worktree root and return its exit code and combined "
        "stdout/stderr (long output keeps its head and tail). Runs non-interactively with a "
        "timeout; background processes are killed when it ends. Some commands are refused: "
        "git push, git reset --hard, sudo, writing outside the worktree.")

    class Args(ToolArgs):
        command: str = Field(min_length=1, description="The bash command line to run.")
        timeout_s: float | None = Field(None, gt=0, description=(
            "Timeout in seconds (default and maximum are set by the run's command policy)."))

    def execute(self, ctx: ToolContext, args: RunCommand.Args) -> ToolResult:
        refusal = policy.check_command(args.command, ctx.root, ctx.policy.deny)
        if refusal is not None:
            return ToolResult.error(COMMAND_DENIED, refusal.message(), rule=refusal.rule)
        limit = ctx.policy.max_timeout_s
        timeout = min(args.timeout_s or ctx.policy.default_timeout_s, limit)
        result = execute_command(ctx.sandbox, args.command, ctx.root, ctx.policy, timeout)
        if args.timeout_s and args.timeout_s > limit:
            result.content = f"(timeout capped at {limit:g}s by policy)\n{result.content}"
        return result

