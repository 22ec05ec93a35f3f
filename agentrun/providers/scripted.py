"""A provider that replies from a script, so the agent loop and whole runs can be tested offline.

A script is either a list of turns (used for every request) or a mapping with optional
`default`, `agents` (keyed by `Request.agent`) and `groups` (keyed by task group id) lists.
Lookup order for a request: `agents[agent]`, then `groups[g]` for the first id in
`Request.group` (which may be "G2,G3") that has a list, then `default`. Each list has its own
cursor; an exhausted list answers "(script exhausted)" with no tool calls so a loop ends.

A turn may carry `text`, `tool_calls`, `usage`, `stop_reason`, `latency_s`, and a `fault`
(raised instead of replying; `repeat: N` raises it N times before the cursor moves on).
"""

from __future__ import annotations

import copy
import json
import math
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from agentrun.core.errors import BadInput
from agentrun.core.usage import Usage
from agentrun.providers.base import Request, ToolCall, Turn
from agentrun.providers.errors import (
    AuthenticationFailed,
    BadRequest,
    ConnectionFailed,
    MalformedResponse,
    ModelTimeout,
    Overloaded,
    ProviderError,
    RateLimited,
    ServerError,
)
from agentrun.yamlload import safe_load

EXHAUSTED_TEXT = "(script exhausted)"

# A scripted fault raises its error with this message (plus where it was scripted) and hint;
# recording maps a live error back to its fault name with the same table.
FAULT_ERRORS: dict[str, tuple[type[ProviderError], str, str]] = {
    "rate_limit": (RateLimited, "rate limited", "Wait and retry."),
    "overloaded": (Overloaded, "overloaded (529)", "Retry later."),  # (before its base class:
    "server_error": (ServerError, "server error 500", "Retry later."),  # recording maps back)
    "timeout": (ModelTimeout, "model call timed out", "Retry, or raise the timeout."),
    "connection": (ConnectionFailed, "connection failed", "Check the network/base URL."),
    "auth": (AuthenticationFailed, "authentication failed", "Check the API key."),
    "bad_request": (BadRequest, "bad request", "Check the model name and request."),
    "malformed_response": (MalformedResponse, "malformed response", "Retry the call."),
}
FAULTS = (*FAULT_ERRORS, "malformed_arguments")
_TURN_KEYS = {"text", "tool_calls", "usage", "latency_s", "fault", "repeat", "stop_reason",
              "retry_after"}
_CALL_KEYS = {"name", "arguments", "id", "arguments_error"}
_USAGE_KEYS = {"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"}
_STOP_REASONS = {"end_turn", "tool_use", "max_tokens", "refusal", "other"}
_TOP_KEYS = {"default", "agents", "groups"}
_SCRIPT_HINT = ("A script is a list of turns, or a mapping with `default`, `agents` and "
                "`groups`; see docs/scripted-provider.md for the format.")


@dataclass
class _ScriptTurn:
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage | None = None
    stop_reason: str | None = None
    latency_s: float = 0.0
    fault: str | None = None
    repeat: int = 1
    retry_after: float | None = None


@dataclass
class _Cursor:
    key: str  # e.g. "groups.G1": names the list in messages
    id_key: str  # used in generated tool call ids
    turns: list[_ScriptTurn]
    index: int = 0
    fault_count: int = 0  # how many times the current fault turn has been raised
    call_count: int = 0  # tool call ids generated so far


class ScriptedProvider:
    """Implements `Provider` by replaying scripted turns; thread-safe."""

    name = "scripted"

    def __init__(self, script: object, model: str = "scripted", *,
                 source: str = "<script>") -> None:
        self.model = model
        self.source = source
        self._lock = threading.Lock()
        self._agents: dict[str, _Cursor] = {}
        self._groups: dict[str, _Cursor] = {}
        self._default: _Cursor | None = None
        self._parse(script)

    @classmethod
    def from_file(cls, path: Path | str, model: str = "scripted") -> ScriptedProvider:
        """Load a YAML or JSON script; any problem raises `BadInput` naming the file."""
        path = Path(path)
        try:
            raw = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise BadInput(f"script file not found: {path}",
                           "Pass an existing YAML/JSON file to --script.") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise BadInput(f"cannot read script file {path}: {exc}",
                           "Pass a readable UTF-8 YAML/JSON file to --script.") from None
        data = _parse_text(raw, path)
        return cls(data, model=model, source=str(path))

    # -- the Provider method ------------------------------------------------------------------

    def complete(self, request: Request) -> Turn:
        with self._lock:
            cursor = self._select(request)
            step, call_ids = self._advance(cursor)
        if step is None:
            return Turn(text=EXHAUSTED_TEXT, stop_reason="end_turn", model=self.model,
                        usage=Usage(_estimate_request(request), _ceil4(len(EXHAUSTED_TEXT))))
        if step.latency_s > 0:
            time.sleep(step.latency_s)
        if step.fault and step.fault != "malformed_arguments":
            raise _fault_error(step, cursor.key)
        calls = []
        for spec, call_id in zip(step.tool_calls, call_ids, strict=True):
            if step.fault == "malformed_arguments":
                calls.append(ToolCall(id=call_id, name=spec["name"], arguments={},
                                      arguments_error="arguments are not valid JSON "
                                                      "(scripted fault)"))
            else:
                calls.append(ToolCall(id=call_id, name=spec["name"],
                                      arguments=copy.deepcopy(spec.get("arguments") or {}),
                                      arguments_error=spec.get("arguments_error")))
        stop = step.stop_reason or ("tool_use" if calls else "end_turn")
        usage = step.usage
        if usage is None:
            out_chars = len(step.text) + sum(len(c.name) + len(json.dumps(c.arguments))
                                             for c in calls)
            usage = Usage(_estimate_request(request), _ceil4(out_chars))
        # a script's stop_reason is passed on as written: a test may script any the SDKs send
        return Turn(text=step.text, tool_calls=calls, stop_reason=stop,  # type: ignore[arg-type]
                    usage=Usage(**usage.to_dict()), model=self.model)

    # -- cursor handling ----------------------------------------------------------------------

    def _select(self, request: Request) -> _Cursor:
        if request.agent and request.agent in self._agents:
            return self._agents[request.agent]
        for gid in (g.strip() for g in request.group.split(",")):
            if gid and gid in self._groups:
                return self._groups[gid]
        if self._default is None:
            # No list applies: behave like an empty, exhausted one, shared by such requests.
            self._default = _Cursor("default", "default", [])
        return self._default

    @staticmethod
    def _advance(cursor: _Cursor) -> tuple[_ScriptTurn | None, list[str]]:
        """Take the cursor's current step (under the lock) and move it on."""
        if cursor.index >= len(cursor.turns):
            return None, []
        step = cursor.turns[cursor.index]
        if step.fault and step.fault != "malformed_arguments":
            cursor.fault_count += 1
            if cursor.fault_count >= step.repeat:
                cursor.index += 1
                cursor.fault_count = 0
            return step, []
        ids = []
        for spec in step.tool_calls:
            cursor.call_count += 1
            ids.append(spec.get("id") or f"call_{cursor.id_key}_{cursor.call_count}")
        cursor.index += 1
        return step, ids

    # -- validation ---------------------------------------------------------------------------

    def _parse(self, script: object) -> None:
        if isinstance(script, list):
            self._default = self._cursor("default", "default", script)
            return
        if script is None:
            self._bad("the script is empty")
        if not isinstance(script, dict):
            self._bad(f"the script must be a list of turns or a mapping, not "
                      f"{type(script).__name__}")
        unknown = set(script) - _TOP_KEYS
        if unknown:
            self._bad(f"unknown top-level key(s) {sorted(map(str, unknown))}; expected "
                      f"default, agents, groups")
        if script.get("default") is not None:
            self._default = self._cursor("default", "default", script["default"])
        for section, target in (("agents", self._agents), ("groups", self._groups)):
            entries = script.get(section)
            if entries is None:
                continue
            if not isinstance(entries, dict):
                self._bad(f"`{section}` must be a mapping of name to a list of turns")
            for name, turns in entries.items():
                target[str(name)] = self._cursor(f"{section}.{name}", _id_part(str(name)), turns)

    def _cursor(self, key: str, id_key: str, turns: Any) -> _Cursor:
        if not isinstance(turns, list):
            self._bad(f"`{key}` must be a list of turns")
        return _Cursor(key, id_key, [self._turn(f"{key}[{i}]", t) for i, t in enumerate(turns)])

    def _turn(self, where: str, data: Any) -> _ScriptTurn:
        if not isinstance(data, dict):
            self._bad(f"{where}: a turn must be a mapping")
        unknown = set(data) - _TURN_KEYS
        if unknown:
            self._bad(f"{where}: unknown key(s) {sorted(map(str, unknown))}")
        text = data.get("text") or ""
        if not isinstance(text, str):
            self._bad(f"{where}.text must be a string")
        calls = data.get("tool_calls") or []
        if not isinstance(calls, list):
            self._bad(f"{where}.tool_calls must be a list")
        checked = [self._call(f"{where}.tool_calls[{i}]", c) for i, c in enumerate(calls)]
        fault = data.get("fault")
        if fault is not None and fault not in FAULTS:
            self._bad(f"{where}.fault {fault!r} is not one of {', '.join(FAULTS)}")
        repeat = data.get("repeat", 1)
        if not _is_int(repeat) or repeat < 1:
            self._bad(f"{where}.repeat must be a positive integer")
        latency = data.get("latency_s", 0) or 0
        if not _is_number(latency) or latency < 0:
            self._bad(f"{where}.latency_s must be a non-negative number")
        retry_after = data.get("retry_after")
        if retry_after is not None and (not _is_number(retry_after) or retry_after < 0):
            self._bad(f"{where}.retry_after must be a non-negative number")
        stop = data.get("stop_reason")
        if stop is not None and stop not in _STOP_REASONS:
            self._bad(f"{where}.stop_reason must be one of {', '.join(sorted(_STOP_REASONS))}")
        return _ScriptTurn(text=text, tool_calls=checked,
                           usage=self._usage(where, data.get("usage")), stop_reason=stop,
                           latency_s=float(latency), fault=fault, repeat=repeat,
                           retry_after=None if retry_after is None else float(retry_after))

    def _call(self, where: str, data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            self._bad(f"{where}: a tool call must be a mapping with `name` and `arguments`")
        unknown = set(data) - _CALL_KEYS
        if unknown:
            self._bad(f"{where}: unknown key(s) {sorted(map(str, unknown))}")
        if not isinstance(data.get("name"), str) or not data["name"]:
            self._bad(f"{where}.name must be a non-empty string")
        args = data.get("arguments")
        if args is not None and not isinstance(args, dict):
            self._bad(f"{where}.arguments must be a mapping")
        for key in ("id", "arguments_error"):
            if data.get(key) is not None and not isinstance(data[key], str):
                self._bad(f"{where}.{key} must be a string")
        return dict(data)

    def _usage(self, where: str, data: Any) -> Usage | None:
        if data is None:
            return None
        if not isinstance(data, dict):
            self._bad(f"{where}.usage must be a mapping")
        unknown = set(data) - _USAGE_KEYS
        if unknown:
            self._bad(f"{where}.usage: unknown key(s) {sorted(map(str, unknown))}")
        for key, value in data.items():
            if not _is_int(value) or value < 0:
                self._bad(f"{where}.usage.{key} must be a non-negative integer")
        return Usage(**data)

    def _bad(self, problem: str) -> NoReturn:
        raise BadInput(f"invalid script {self.source}: {problem}", _SCRIPT_HINT)


def _parse_text(raw: str, path: Path) -> Any:
    if path.suffix.lower() == ".json":
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise BadInput(f"invalid script {path}: not valid JSON ({exc})",
                           "Fix the JSON syntax at the position shown.") from None
    import yaml

    try:
        return safe_load(raw)
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise BadInput(f"invalid script {path}: not valid YAML ({detail})",
                       "Fix the YAML syntax at the line shown.") from None


def _fault_error(step: _ScriptTurn, key: str) -> ProviderError:
    cls, what, hint = FAULT_ERRORS[step.fault or ""]
    return cls(f"{what} (scripted fault in {key})", hint, retry_after=step.retry_after)


def _estimate_request(request: Request) -> int:
    """chars/4 over everything the model would read; a stand-in when the script has no usage."""
    chars = len(request.system)
    for msg in request.messages:
        chars += len(msg.content)
        chars += sum(len(c.name) + len(json.dumps(c.arguments)) for c in msg.tool_calls)
    chars += sum(len(t.name) + len(t.description) + len(json.dumps(t.parameters))
                 for t in request.tools)
    return max(1, _ceil4(chars))


def _ceil4(chars: int) -> int:
    return math.ceil(chars / 4)


def _id_part(name: str) -> str:
    """Tool call ids must match [A-Za-z0-9_-]+ on the Anthropic API; keep replayed ids valid."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name) or "x"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
