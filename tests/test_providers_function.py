"""The function-backed provider, and the agent loop driven by replies that depend on what the
model was sent: tool results and validation feedback a fixed script could only guess."""

from __future__ import annotations

import re
import secrets
import sys

from agent_fixtures import events, make_repo, make_task, no_sleep

from agentrun.agent.transcript import Transcript
from agentrun.attempts import run_agent
from agentrun.core.usage import Usage
from agentrun.providers.base import Message, Provider, Request, ToolCall, Turn
from agentrun.providers.errors import ServerError
from agentrun.providers.function import FunctionProvider


def tool(name: str, **arguments) -> ToolCall:
    return ToolCall(id="", name=name, arguments=arguments)


def submit(summary: str = "done") -> Turn:
    return Turn(tool_calls=[tool("submit_result", status="complete", summary=summary,
                                 criteria_met=[], deviations=[])])


def tool_results(request: Request) -> dict[str, str]:
    """The results the model got back, by tool name (the latest wins)."""
    return {m.name or "": m.content for m in request.messages if m.role == "tool"}


def assistant_turns(request: Request) -> int:
    return sum(m.role == "assistant" for m in request.messages)


def test_fills_in_what_the_function_leaves_unset():
    provider = FunctionProvider(lambda r: "hello" if len(r.messages) == 1 else
                                Turn(tool_calls=[tool("read_file", path="a"),
                                                 ToolCall(id="mine", name="list_files")]))
    assert isinstance(provider, Provider)
    request = Request(system="be brief", messages=[Message("user", "say hello")])
    first = provider.complete(request)
    assert (first.text, first.tool_calls, first.stop_reason) == ("hello", [], "end_turn")
    assert first.model == "function" and provider.name == "function"
    assert first.usage.input_tokens > 0 and first.usage.output_tokens > 0
    second = provider.complete(Request(system="", messages=[Message("user", "a"),
                                                            Message("user", "b")]))
    assert second.stop_reason == "tool_use"
    assert [c.id for c in second.tool_calls] == ["call_fn_2_1", "mine"]
    assert provider.requests[0] is request and len(provider.requests) == 2


def test_usage_the_function_reports_is_kept():
    given = Usage(input_tokens=1234, output_tokens=56, cache_read_tokens=7)
    provider = FunctionProvider(lambda r: Turn(text="x", usage=given, model="m-1"))
    turn = provider.complete(Request(system="s", messages=[Message("user", "u")]))
    assert turn.usage == given and turn.usage is not given
    assert turn.model == "m-1"


def test_the_model_sees_the_real_file_and_command_output(tmp_path):
    secret = secrets.token_hex(8)  # only reachable through the tool results
    repo = make_repo(tmp_path, {"README.md": "# test\n", "notes.txt": f"key: {secret}\n"})
    seen: dict[str, str] = {}

    def reply(request: Request) -> Turn:
        step = assistant_turns(request)
        if step == 0:
            return Turn(tool_calls=[
                tool("read_file", path="notes.txt"),
                tool("run_command", command=f"{sys.executable} -c \"print(6 * 7)\"")])
        if step == 1:
            seen.update(tool_results(request))
            key = re.search(r"key: (\w+)", seen["read_file"])
            answer = re.search(r"\b42\b", seen["run_command"])
            content = f"{key.group(1) if key else '?'} {answer.group(0) if answer else '?'}\n"
            return Turn(tool_calls=[tool("write_file", path="copy.txt", content=content)])
        return submit("copied the key")

    provider = FunctionProvider(reply)
    outcome = run_agent(make_task(repo), provider, transcript=Transcript(None), sleep=no_sleep())
    assert outcome.status == "complete" and outcome.summary == "copied the key"
    assert (repo / "copy.txt").read_text() == f"{secret} 42\n"
    assert secret in seen["read_file"]
    assert outcome.steps == 3 == len(provider.requests)
    assert outcome.usage.input_tokens > 0 and outcome.usage.output_tokens > 0


def test_a_retry_attempt_is_told_why_validation_failed(tmp_path):
    expected = secrets.token_hex(6)  # the check names it only in its failure output
    repo = make_repo(tmp_path, {
        "README.md": "# test\n",
        "check.py": ("import pathlib, sys\n"
                     f"if pathlib.Path('answer.txt').read_text().strip() != '{expected}':\n"
                     f"    sys.exit('answer.txt must contain {expected}')\n")})

    def reply(request: Request) -> Turn:
        if assistant_turns(request) == 0:
            told = re.search(r"answer.txt must contain (\w+)", request.messages[0].content)
            content = told.group(1) if told else "a guess"
            return Turn(tool_calls=[tool("write_file", path="answer.txt", content=content)])
        return submit()

    transcript = Transcript(None)
    outcome = run_agent(make_task(repo, retry_on_failure=True,
                                  validation_command=f"{sys.executable} check.py"),
                        FunctionProvider(reply), transcript=transcript, sleep=no_sleep())
    assert outcome.status == "complete" and outcome.attempts == 2
    assert (repo / "answer.txt").read_text() == expected
    assert [v["ok"] for v in events(transcript, "validation")] == [False, True]


def test_a_raised_provider_error_is_retried_like_a_failed_call(tmp_path):
    failures = iter([ServerError("server error 500")])

    def reply(request: Request) -> Turn:
        error = next(failures, None)
        if error:
            raise error
        return submit("after the outage")

    delays: list[float] = []
    provider = FunctionProvider(reply)
    outcome = run_agent(make_task(make_repo(tmp_path)), provider, sleep=no_sleep(delays))
    assert outcome.status == "complete" and outcome.summary == "after the outage"
    assert len(provider.requests) == 2 and delays == [1.0]
