"""A fake model server on 127.0.0.1 that speaks the Anthropic Messages, OpenAI Chat
Completions and (streamed) OpenAI Responses wire formats, so the real SDKs and CLIs can be
tested offline.

Usage::

    from fake_model_server import FakeModelServer, Reply, Error, Raw

    with FakeModelServer() as server:
        server.queue(Reply(tool_calls=[{"name": "read_file", "arguments": {"path": "a"}}]),
                     Error(429, headers={"retry-after": "0.01"}),
                     Reply(text="done", usage={"input_tokens": 10, "output_tokens": 2}))
        client = anthropic.Anthropic(base_url=server.anthropic_base_url, api_key="k")
        ...
        server.requests[0].body        # the parsed JSON the SDK sent

Responses are neutral: a queued `Reply` or `Error` is rendered in the wire format of the
endpoint that receives the request (`POST /v1/messages` → Anthropic, `POST /v1/chat/completions`
→ OpenAI, `POST /v1/responses` → the Responses API as the Codex CLI streams it), so one queue
can drive any of them. `Raw` sends bytes verbatim (malformed bodies).
Responses are served first-in first-out; when the queue is empty, `server.responder` (a callable
taking the `RecordedRequest`) is asked, and without one the server answers 400 "no response
queued" (which the SDKs do not retry, so a test fails fast instead of hanging).

`GET /v1/models` (what `agentrun run` asks first: does the endpoint answer, is the key good)
is answered apart from the queue, with `models_reply` (a models list by default; an `Error` to
refuse), and recorded in `server.preflights`, not in `server.requests`.

In a test, use the `fake_model_server` fixture from conftest.py.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANTHROPIC_PATH = "/v1/messages"
OPENAI_PATH = "/v1/chat/completions"
RESPONSES_PATH = "/v1/responses"
MODELS_PATH = "/v1/models"


# -- wire-format builders ---------------------------------------------------------------------

def anthropic_message_json(text: str = "", tool_calls: list[dict[str, Any]] | None = None,
                           usage: dict[str, int] | None = None, *, stop_reason: str | None = None,
                           model: str = "claude-fake", message_id: str = "msg_fake",
                           thinking: str | None = None) -> dict:
    """An Anthropic Messages API response body.

    `tool_calls` items: {"name", "arguments", optional "id"}; `usage` uses our neutral keys
    (input_tokens, output_tokens, cache_read_tokens, cache_write_tokens). `thinking` adds a
    leading thinking block (signed "sig-<message_id>"), as thinking models send.
    """
    content: list[dict[str, Any]] = []
    if thinking is not None:
        content.append({"type": "thinking", "thinking": thinking,
                        "signature": f"sig-{message_id}"})
    if text:
        content.append({"type": "text", "text": text})
    for i, call in enumerate(tool_calls or [], 1):
        content.append({"type": "tool_use", "id": call.get("id") or f"toolu_{message_id}_{i}",
                        "name": call["name"], "input": call.get("arguments", {})})
    u = usage or {}
    return {
        "id": message_id, "type": "message", "role": "assistant", "model": model,
        "content": content,
        "stop_reason": stop_reason or ("tool_use" if tool_calls else "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": u.get("input_tokens", 0),
                  "output_tokens": u.get("output_tokens", 0),
                  "cache_creation_input_tokens": u.get("cache_write_tokens", 0),
                  "cache_read_input_tokens": u.get("cache_read_tokens", 0)},
    }


def anthropic_sse(message: dict) -> bytes:
    """`message` (an `anthropic_message_json` body) as the server-sent events of a streamed
    answer (`"stream": true`, as Claude Code asks for)."""
    def event(kind: str, data: dict) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

    usage = message["usage"]
    out = [event("message_start", {"message": {**message, "content": [], "stop_reason": None,
                                               "usage": {**usage, "output_tokens": 1}}})]
    for i, block in enumerate(message["content"]):
        if block["type"] == "text":
            start, delta = {"type": "text", "text": ""}, {"type": "text_delta",
                                                           "text": block["text"]}
        elif block["type"] == "tool_use":
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start, delta = {"type": "thinking", "thinking": ""}, {
                "type": "thinking_delta", "thinking": block["thinking"]}
        out += [event("content_block_start", {"index": i, "content_block": start}),
                event("content_block_delta", {"index": i, "delta": delta}),
                event("content_block_stop", {"index": i})]
    out += [event("message_delta", {"delta": {"stop_reason": message["stop_reason"],
                                              "stop_sequence": None},
                                    "usage": {"output_tokens": usage["output_tokens"]}}),
            event("message_stop", {})]
    return "".join(out).encode()


def responses_sse(text: str = "", tool_calls: list[dict[str, Any]] | None = None,
                  usage: dict[str, int] | None = None, *, model: str = "gpt-fake",
                  response_id: str = "resp_fake", refusal: str | None = None) -> bytes:
    """A streamed OpenAI Responses API answer (`POST /v1/responses`, `"stream": true`, as the
    Codex CLI asks for): a `message` item for `text`, a `function_call` item per tool call
    ({"name", "arguments", optional "id"}), then `response.completed` with the usage (our
    neutral keys; `input_tokens` includes the cached ones, as on the real API). `refusal`:
    the message holds a `refusal` content part instead (the model declined, in its words),
    streamed with its `response.refusal.delta`/`.done` events as the API does."""
    def event(kind: str, data: dict) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

    items: list[dict[str, Any]] = []
    if text or refusal is not None:
        part = ({"type": "refusal", "refusal": refusal} if refusal is not None
                else {"type": "output_text", "text": text, "annotations": []})
        items.append({"type": "message", "id": f"msg_{response_id}", "role": "assistant",
                      "status": "completed", "content": [part]})
    for i, call in enumerate(tool_calls or [], 1):
        items.append({"type": "function_call", "id": f"fc_{response_id}_{i}",
                      "call_id": call.get("id") or f"call_{response_id}_{i}",
                      "name": call["name"], "arguments": json.dumps(call.get("arguments", {})),
                      "status": "completed"})
    u = usage or {}
    cached = u.get("cache_read_tokens", 0)
    response = {"id": response_id, "object": "response", "model": model,
                "status": "in_progress", "output": []}
    out = [event("response.created", {"response": response})]
    for i, item in enumerate(items):
        out.append(event("response.output_item.added", {"output_index": i, "item": item}))
        if refusal is not None and item["type"] == "message":
            where = {"item_id": item["id"], "output_index": i, "content_index": 0}
            out += [event("response.content_part.added", {**where, "part": {
                        "type": "refusal", "refusal": ""}}),
                    event("response.refusal.delta", {**where, "delta": refusal}),
                    event("response.refusal.done", {**where, "refusal": refusal}),
                    event("response.content_part.done", {**where,
                                                         "part": item["content"][0]})]
        out.append(event("response.output_item.done", {"output_index": i, "item": item}))
    out.append(event("response.completed", {"response": {
        **response, "status": "completed", "output": items,
        "usage": {"input_tokens": u.get("input_tokens", 0) + cached,
                  "input_tokens_details": {"cached_tokens": cached},
                  "output_tokens": u.get("output_tokens", 0),
                  "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": u.get("input_tokens", 0) + cached
                  + u.get("output_tokens", 0)}}}))
    return "".join(out).encode()


_OPENAI_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length",
                  "refusal": "content_filter"}


def openai_completion_json(text: str | None = None,
                           tool_calls: list[dict[str, Any]] | None = None,
                           usage: dict[str, int] | None = None, *, stop_reason: str | None = None,
                           model: str = "gpt-fake", completion_id: str = "chatcmpl-fake",
                           cached_details: bool = True, refusal: str | None = None) -> dict:
    """An OpenAI Chat Completions response body.

    `tool_calls` items: {"name", "arguments", optional "id"}, or "arguments_json" (a raw string,
    e.g. invalid JSON) instead of "arguments". `usage` uses our neutral keys; `prompt_tokens`
    includes the cached tokens as on the real API. `cached_details=False` omits
    `prompt_tokens_details`, as many OpenAI-compatible servers do. `refusal` is the message's
    `refusal` (the model declined, in its own words; `content` is then null). A neutral
    `stop_reason` "refusal" is the `content_filter` finish reason.
    """
    calls = []
    for i, call in enumerate(tool_calls or [], 1):
        raw = call.get("arguments_json")
        if raw is None:
            raw = json.dumps(call.get("arguments", {}))
        calls.append({"id": call.get("id") or f"call_{completion_id}_{i}", "type": "function",
                      "function": {"name": call["name"], "arguments": raw}})
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if refusal is not None:
        message["refusal"] = refusal
    if calls:
        message["tool_calls"] = calls
    neutral = stop_reason or ("tool_use" if calls else "end_turn")
    u = usage or {}
    cached = u.get("cache_read_tokens", 0)
    prompt = u.get("input_tokens", 0) + cached
    wire_usage: dict[str, Any] = {"prompt_tokens": prompt,
                                  "completion_tokens": u.get("output_tokens", 0),
                                  "total_tokens": prompt + u.get("output_tokens", 0)}
    if cached_details:
        wire_usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return {
        "id": completion_id, "object": "chat.completion", "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "message": message,
                     "finish_reason": _OPENAI_FINISH.get(neutral, neutral)}],
        "usage": wire_usage,
    }


_ANTHROPIC_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                          403: "permission_error", 404: "not_found_error",
                          429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}


def anthropic_error_json(status: int, message: str) -> dict:
    return {"type": "error",
            "error": {"type": _ANTHROPIC_ERROR_TYPES.get(status, "api_error"), "message": message}}


def openai_error_json(status: int, message: str) -> dict:
    kind = {400: "invalid_request_error", 401: "invalid_request_error",
            429: "rate_limit_exceeded"}.get(status, "server_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


# -- queued responses -------------------------------------------------------------------------

@dataclass
class Reply:
    """A successful model reply, rendered for whichever endpoint is called."""

    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    # neutral: end_turn | tool_use | max_tokens | refusal (Anthropic `refusal`, OpenAI
    # `content_filter`)
    stop_reason: str | None = None
    cached_details: bool = True  # OpenAI only: include prompt_tokens_details
    refusal: str | None = None  # OpenAI only: the message's `refusal` text (Responses: its part)
    thinking: str | None = None  # Anthropic only: a leading thinking block
    delay_s: float = 0.0  # wait before answering (to provoke client timeouts)


@dataclass
class Error:
    """An HTTP error status with a proper error body for the endpoint."""

    status: int
    message: str = "fake server error"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Raw:
    """Bytes sent verbatim (e.g. a malformed body with HTTP 200)."""

    body: bytes
    status: int = 200
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


Response = Reply | Error | Raw


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    raw: bytes
    body: Any  # parsed JSON, or None when the body is not JSON

    @property
    def api(self) -> str:
        if self.path.startswith(ANTHROPIC_PATH) or (
                self.path == MODELS_PATH and "anthropic-version" in self.headers):
            return "anthropic"
        return "responses" if self.path.startswith(RESPONSES_PATH) else "openai"


class FakeModelServer:
    """Threaded HTTP server on 127.0.0.1 (a free port); a context manager."""

    def __init__(self, responder: Callable[[RecordedRequest], Response] | None = None) -> None:
        self.responder = responder
        self.requests: list[RecordedRequest] = []
        self.preflights: list[RecordedRequest] = []  # GET /v1/models
        self.models_reply: Response | None = None  # None: a list of one model
        # every request line that arrived, any method or target: (method, target, Host header)
        self.seen: list[tuple[str, str, str | None]] = []
        self._queue: deque[Response] = deque()
        self._lock = threading.Lock()
        self._counter = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> FakeModelServer:
        handler = _make_handler(self)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- API for tests ----------------------------------------------------------------------

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def anthropic_base_url(self) -> str:
        """For `ANTHROPIC_BASE_URL` / `Anthropic(base_url=...)` (the SDK adds /v1/messages)."""
        return self.base_url

    @property
    def openai_base_url(self) -> str:
        """For `OPENAI_BASE_URL` / `OpenAI(base_url=...)` (the SDK adds /chat/completions)."""
        return f"{self.base_url}/v1"

    def queue(self, *responses: Response) -> None:
        """Append responses, served first-in first-out across both endpoints."""
        with self._lock:
            self._queue.extend(responses)

    @property
    def pending(self) -> int:
        """Queued responses not yet served."""
        with self._lock:
            return len(self._queue)

    def bodies(self, api: str | None = None) -> list[Any]:
        """The parsed request bodies received so far, optionally for one API only."""
        with self._lock:
            return [r.body for r in self.requests if api is None or r.api == api]

    # -- internals --------------------------------------------------------------------------

    def _next(self, recorded: RecordedRequest) -> tuple[Response, int]:
        with self._lock:
            self.requests.append(recorded)
            self._counter += 1
            n = self._counter
            if self._queue:
                return self._queue.popleft(), n
        if self.responder is not None:
            return self.responder(recorded), n
        return Error(400, "fake model server: no response queued"), n


def _make_handler(server: FakeModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # a reply's body must not wait for the client to acknowledge its headers (Nagle's
        # algorithm against delayed ACKs: 40 ms per call, which no real API adds)
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet tests
            pass

        def parse_request(self) -> bool:
            ok = super().parse_request()
            if ok:
                server.seen.append((self.command, self.path, self.headers.get("host")))
            return ok

        def do_HEAD(self) -> None:  # noqa: N802 - a client's connectivity check
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def do_GET(self) -> None:  # noqa: N802 - the models list: a run's preflight
            path = self.path.split("?", 1)[0]
            recorded = RecordedRequest("GET", path,
                                       {k.lower(): v for k, v in self.headers.items()}, b"",
                                       None)
            if path != MODELS_PATH:
                self._send(404, {"error": {"message": f"unknown path {path}"}}, {})
                return
            with server._lock:
                server.preflights.append(recorded)
            reply = server.models_reply
            if reply is None:
                self._send(200, {"data": [{"id": "fake-model", "type": "model"}],
                                 "object": "list"}, {})
            else:
                self._respond(recorded, reply, 0)

        def do_POST(self) -> None:  # noqa: N802 - http.server naming
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw) if raw else None
            except (ValueError, RecursionError):  # not JSON, or nested beyond reading
                body = None
            path = self.path.split("?", 1)[0]
            recorded = RecordedRequest("POST", path,
                                       {k.lower(): v for k, v in self.headers.items()}, raw, body)
            if path not in (ANTHROPIC_PATH, OPENAI_PATH, RESPONSES_PATH):
                self._send(404, {"error": {"message": f"unknown path {path}"}}, {})
                return
            response, n = server._next(recorded)
            self._respond(recorded, response, n)

        def _respond(self, recorded: RecordedRequest, response: Response, n: int) -> None:
            anthropic = recorded.api == "anthropic"
            model = (recorded.body or {}).get("model", "fake") if isinstance(
                recorded.body, dict) else "fake"
            if isinstance(response, Raw):
                self._send_bytes(response.status, response.body, response.content_type,
                                 response.headers)
            elif isinstance(response, Error):
                body = (anthropic_error_json if anthropic else openai_error_json)(
                    response.status, response.message)
                self._send(response.status, body, response.headers)
            else:
                if response.delay_s:
                    time.sleep(response.delay_s)
                if recorded.api == "responses":
                    self._send_bytes(200, responses_sse(
                        response.text, response.tool_calls, response.usage, model=model,
                        response_id=f"resp_{n}", refusal=response.refusal),
                        "text/event-stream", {})
                    return
                if anthropic:
                    body = anthropic_message_json(response.text, response.tool_calls,
                                                  response.usage, stop_reason=response.stop_reason,
                                                  model=model, message_id=f"msg_{n}",
                                                  thinking=response.thinking)
                    if isinstance(recorded.body, dict) and recorded.body.get("stream"):
                        self._send_bytes(200, anthropic_sse(body), "text/event-stream", {})
                        return
                else:
                    body = openai_completion_json(response.text, response.tool_calls,
                                                  response.usage, stop_reason=response.stop_reason,
                                                  model=model, completion_id=f"chatcmpl-{n}",
                                                  cached_details=response.cached_details,
                                                  refusal=response.refusal)
                self._send(200, body, {})

        def _send(self, status: int, body: Any, headers: dict[str, str]) -> None:
            self._send_bytes(status, json.dumps(body).encode(), "application/json", headers)

        def _send_bytes(self, status: int, data: bytes, content_type: str,
                        headers: dict[str, str]) -> None:
            try:
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (e.g. its timeout fired)

    return Handler
