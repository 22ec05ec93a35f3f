"""Record a live session as a script that the scripted provider replays.

Each reply is appended as a turn under `groups[<first group id>]` when the request names a group,
else `agents[<agent>]`, else `default`, with its tool call ids, usage and stop reason. Provider
errors are recorded as `fault` turns and re-raised. The file (YAML, or JSON for a `.json` path)
is rewritten atomically after every call, so an interrupted run leaves a usable script.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from agentrun.fsutil import atomic_write_text
from agentrun.providers.base import Provider, Request, Turn
from agentrun.providers.errors import (
    AuthenticationFailed,
    BadRequest,
    ConnectionFailed,
    MalformedResponse,
    ModelTimeout,
    ProviderError,
    RateLimited,
    ServerError,
)

_FAULTS: tuple[tuple[type[ProviderError], str], ...] = (
    (RateLimited, "rate_limit"), (ServerError, "server_error"), (ModelTimeout, "timeout"),
    (ConnectionFailed, "connection"), (AuthenticationFailed, "auth"),
    (BadRequest, "bad_request"), (MalformedResponse, "malformed_response"),
)


class RecordingProvider:
    """Wraps any provider; forwards calls and writes the replies to `path` as a script."""

    def __init__(self, inner: Provider, path: Path | str) -> None:
        self.inner = inner
        self.path = Path(path)
        self.name = inner.name
        self.model = inner.model
        self._lock = threading.Lock()
        self._script: dict[str, Any] = {}

    def complete(self, request: Request) -> Turn:
        try:
            turn = self.inner.complete(request)
        except ProviderError as exc:
            fault = next((name for cls, name in _FAULTS if isinstance(exc, cls)), None)
            if fault is not None:
                entry: dict[str, Any] = {"fault": fault}
                if exc.retry_after is not None:
                    entry["retry_after"] = exc.retry_after
                self._append(request, entry)
            raise
        self._append(request, turn_to_script(turn))
        return turn

    @property
    def script(self) -> dict[str, Any]:
        """A copy of what has been recorded so far."""
        with self._lock:
            return json.loads(json.dumps(self._script))

    def _append(self, request: Request, entry: dict[str, Any]) -> None:
        section, key = script_key(request)
        with self._lock:
            if section == "default":
                self._script.setdefault("default", []).append(entry)
            else:
                self._script.setdefault(section, {}).setdefault(key, []).append(entry)
            atomic_write_text(self.path, _dump(self._script, self.path))


def script_key(request: Request) -> tuple[str, str]:
    """("groups", "G2") / ("agents", name) / ("default", "") for a request."""
    groups = [g.strip() for g in request.group.split(",") if g.strip()]
    if groups:
        return "groups", groups[0]
    if request.agent:
        return "agents", request.agent
    return "default", ""


def turn_to_script(turn: Turn) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    if turn.text:
        entry["text"] = turn.text
    if turn.tool_calls:
        calls = []
        for call in turn.tool_calls:
            item: dict[str, Any] = {"id": call.id, "name": call.name,
                                    "arguments": call.arguments}
            if call.arguments_error is not None:
                item["arguments_error"] = call.arguments_error
            calls.append(item)
        entry["tool_calls"] = calls
    entry["stop_reason"] = turn.stop_reason
    entry["usage"] = turn.usage.to_dict()
    return entry


def _dump(script: dict[str, Any], path: Path) -> str:
    if path.suffix.lower() == ".json":
        return json.dumps(script, indent=2, ensure_ascii=False) + "\n"
    import yaml

    return yaml.safe_dump(script, sort_keys=False, allow_unicode=True, width=100)
