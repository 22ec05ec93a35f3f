"""Record a live session as a script that the scripted provider replays.

Each reply is appended as a turn under `groups[<first group id>]` when the request names a group,
else `agents[<agent>]`, else `default`, with its tool call ids, usage and stop reason. Provider
errors are recorded as `fault` turns and re-raised. The file (YAML, or JSON for a `.json` path)
is rewritten atomically after every call, so an interrupted run leaves a usable script. Turns are
redacted like transcripts (known secret values, fragments of them, key-shaped tokens): a
recording is a file people commit as a test fixture.

Several worker processes may record into one file: each append re-reads the file and writes it
back under an exclusive lock, so no process overwrites another's turns. Appends go to whatever
the file already holds; call `reset_recording(path)` once to start a new session.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentrun.core.errors import BadInput
from agentrun.core.fsutil import atomic_write_text
from agentrun.core.secrets import Redactor, secret_values
from agentrun.providers.base import Provider, Request, Turn
from agentrun.providers.errors import ProviderError
from agentrun.providers.scripted import FAULT_ERRORS
from agentrun.yamlload import safe_load


class RecordingProvider:
    """Wraps any provider; forwards calls and writes the replies to `path` as a script."""

    def __init__(self, inner: Provider, path: Path | str,
                 secrets: Iterable[str] | None = None) -> None:
        self.inner = inner
        self.path = Path(path)
        self.name = inner.name
        self.model = inner.model
        self._lock = threading.Lock()
        self._redactor = Redactor(secret_values(os.environ) if secrets is None else secrets)

    def complete(self, request: Request) -> Turn:
        try:
            turn = self.inner.complete(request)
        except ProviderError as exc:
            fault = next((name for name, (cls, _, _) in FAULT_ERRORS.items()
                          if isinstance(exc, cls)), None)
            if fault is not None:
                entry: dict[str, Any] = {"fault": fault}
                if exc.retry_after is not None:
                    entry["retry_after"] = exc.retry_after
                self._append(request, entry)
            raise
        self._append(request, turn_to_script(turn))
        return turn

    def _append(self, request: Request, entry: dict[str, Any]) -> None:
        section, key = script_key(request)
        entry = self._redactor.value(entry)
        with self._lock, _file_lock(self.path):
            script = _load(self.path)
            if section == "default":
                script.setdefault("default", []).append(entry)
            else:
                script.setdefault(section, {}).setdefault(key, []).append(entry)
            atomic_write_text(self.path, _dump(script, self.path))


def reset_recording(path: Path | str) -> None:
    """Start a new recording at `path` (removes what an earlier session left there)."""
    path = Path(path)
    with _file_lock(path):
        path.unlink(missing_ok=True)


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


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock shared by every process recording to `path` (a hidden sidecar file;
    the recording itself is replaced by rename on each write, so it cannot carry the lock)."""
    try:
        import fcntl
    except ImportError:  # no flock on this platform: one process at a time is all we can do
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(f".{path.name}.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _load(path: Path) -> dict[str, Any]:
    """The script recorded so far (empty when the file does not exist yet)."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    import yaml

    try:
        if path.suffix.lower() == ".json":
            data = json.loads(raw) if raw.strip() else None
        else:
            data = safe_load(raw)
    except (ValueError, yaml.YAMLError) as exc:
        raise _not_a_recording(path, exc) from None
    if data is None:
        return {}
    if isinstance(data, list):
        return {"default": data}
    if not isinstance(data, dict):
        raise _not_a_recording(path, "not a mapping")
    return data


def _not_a_recording(path: Path, why: object) -> BadInput:
    return BadInput(f"cannot record into {path}: it holds something that is not a script "
                    f"({' '.join(str(why).split())[:200]})",
                    "Choose a new --record path, or delete the file.")


def _dump(script: dict[str, Any], path: Path) -> str:
    if path.suffix.lower() == ".json":
        return json.dumps(script, indent=2, ensure_ascii=False) + "\n"
    import yaml

    return yaml.safe_dump(script, sort_keys=False, allow_unicode=True, width=100)
