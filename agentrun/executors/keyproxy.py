"""A forwarder on 127.0.0.1 that holds the model API key for a coding-agent CLI.

A CLI such as Claude Code or Codex needs a key to call its model, and every command it runs
inherits its environment. So the CLI never gets the key: it gets this forwarder's URL and a
token that is good only here, for the length of one attempt; the forwarder swaps the token for
the key and streams the answer back unchanged.

Whatever holds the token (the CLI, or any command it runs) is untrusted, so the forwarder is
no general relay: it passes on only the model endpoints of its `Api` (method and exact path;
no other host, no absolute-form target, no CONNECT), refuses the rest and logs each refusal,
and reads the usage off every answer it passes on (a JSON body or an event stream), so that a
call the CLI does not report still counts against the run's budget and spending cap. It also
notes a model's refusal in a Responses API answer, which the Codex CLI drops from what it
reports, so that the executor can name it.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from agentrun.core.usage import Usage

# hop-by-hop headers and the ones the forwarder sets itself
_DROP = {"host", "x-api-key", "authorization", "content-length", "connection", "keep-alive",
         "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}
UPSTREAM_TIMEOUT_S = 600.0
MAX_REQUEST_BYTES = 64 * 1024 * 1024  # a request body beyond this is refused
MAX_USAGE_BYTES = 16 * 1024 * 1024  # of an answer (or one event of it) kept to read its usage

Log = Callable[..., Any]  # (kind, **fields): the attempt's transcript


@dataclass(frozen=True)
class Route:
    """One endpoint the CLI may call: its method, its exact path as the CLI sends it (the
    upstream URL's own path is put in front), the query parameters it may carry, and whether
    an answer costs tokens."""

    method: str
    path: str
    query: frozenset[str] = frozenset()
    metered: bool = True


@dataclass(frozen=True)
class Api:
    """A model API as a CLI calls it: its routes, and how the key is sent upstream (`bearer`:
    `Authorization: Bearer`, as OpenAI takes it; otherwise `x-api-key`, as Anthropic does)."""

    name: str
    routes: tuple[Route, ...]
    bearer: bool = False

    def route(self, method: str, path: str) -> Route | None:
        return next((r for r in self.routes if r.method == method and r.path == path), None)


# Claude Code calls POST /v1/messages (`?beta=true`), and may count tokens first
ANTHROPIC = Api("anthropic", (Route("POST", "/v1/messages", frozenset({"beta"})),
                              Route("POST", "/v1/messages/count_tokens", frozenset({"beta"}),
                                    metered=False)))
# Codex calls POST {base_url}/responses; Chat Completions for a CLI configured that way
OPENAI = Api("openai", (Route("POST", "/responses"), Route("POST", "/chat/completions")),
             bearer=True)


class KeyProxy:
    """`with KeyProxy(upstream, key, api) as proxy:` — give the CLI `proxy.url` and
    `proxy.token`. `gate` is asked before each model call is forwarded, with its request
    body (untrusted): None lets it go, a reason refuses it (the worker's limits,
    executors/guard.py; it may wait first).
    `on_usage` is told what each forwarded model call cost and when it began (time.time(), from
    a thread of the proxy's); `log` gets each refused request."""

    def __init__(self, upstream: str, key: str, api: Api = ANTHROPIC, *,
                 gate: Callable[[bytes | None], str | None] | None = None,
                 on_usage: Callable[[Usage, float], None] | None = None,
                 log: Log | None = None) -> None:
        parts = urlsplit(upstream)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {upstream}")
        self.scheme, self.host, self.port = parts.scheme, parts.hostname, parts.port
        self.prefix = parts.path.rstrip("/")
        self.key, self.api, self.gate = key, api, gate
        self.token = "agentrun-" + secrets.token_urlsafe(24)
        self.requests = 0  # forwarded
        self.refused: list[str] = []  # "METHOD target: why", one per refused request
        self.declined: list[str] = []  # the model's refusals in the answers passed on
        self.usage = Usage()  # what the forwarded calls cost, as their answers said
        self._on_usage = on_usage or (lambda _usage, _started: None)
        self._log = log or (lambda *_a, **_k: None)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        # a short poll: closing the proxy at the end of an attempt waits for it
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> KeyProxy:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()

    def connection(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=UPSTREAM_TIMEOUT_S)

    def check(self, method: str, target: str, host: str | None) -> Route | str:
        """The route a request may take, or why it is refused."""
        if not target.startswith("/") or target.startswith("//"):
            return "only a path on this server may be requested (no other host)"
        local = {f"127.0.0.1:{self._server.server_address[1]}",
                 f"localhost:{self._server.server_address[1]}"}
        if host not in local:
            return f"the Host header names another server ({host!r})"
        path, _, query = target.partition("?")
        route = self.api.route(method, path)
        if route is None:
            return f"not a model endpoint of the {self.api.name} API"
        if not {k for k, _ in parse_qsl(query, keep_blank_values=True)} <= route.query:
            return "query parameters other than " + (", ".join(sorted(route.query)) or "none")
        return route

    def refuse(self, method: str, target: str, reason: str) -> None:
        with self._lock:
            self.refused.append(f"{method} {target[:200]}: {reason}")
        with contextlib.suppress(Exception):  # a broken log must not break the proxy
            self._log("proxy_refused", method=method, target=target[:200], reason=reason)

    def model_refused(self, words: str) -> None:
        with self._lock:
            self.declined.append(words)
        with contextlib.suppress(Exception):
            self._log("model_refusal", refusal=words[:2000])

    def spent(self, usage: Usage, started: float) -> None:
        with self._lock:
            self.usage = self.usage + usage
        with contextlib.suppress(Exception):
            self._on_usage(usage, started)


def _handler(proxy: KeyProxy) -> type[BaseHTTPRequestHandler]:
    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # the answer ends when the connection closes
        # each chunk of an answer goes out at once: with Nagle's algorithm the body waits for
        # the CLI to acknowledge the headers, which a client delays by up to 40 ms
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

        def handle_one_request(self) -> None:
            """Every method comes here (CONNECT, PUT, a made-up one): `_serve` decides."""
            try:
                self.raw_requestline = self.rfile.readline(65537)
                if len(self.raw_requestline) > 65536:
                    self.send_error(414)
                    return
                if not self.raw_requestline or not self.parse_request():
                    return
                self._serve()
                self.wfile.flush()
            except TimeoutError:
                pass
            self.close_connection = True

        def _serve(self) -> None:
            method, target = self.command, self.path
            if method == "HEAD" and target == "/":  # a CLI's check that the server is up
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()
                return
            given = self.headers.get("x-api-key") or \
                self.headers.get("authorization", "").removeprefix("Bearer ").strip()
            if not secrets.compare_digest(given.encode(), proxy.token.encode()):
                self._refuse(401, "unknown token")
                return
            route = proxy.check(method, target, self.headers.get("host"))
            if isinstance(route, str):
                self._refuse(403, route)
                return
            if self.headers.get("transfer-encoding"):
                self._refuse(411, "a request body must come with its content-length")
                return
            try:
                length = int(self.headers.get("content-length") or 0)
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_REQUEST_BYTES:
                self._refuse(413, f"a request body of {length} bytes")
                return
            body = self.rfile.read(length) if length else None
            refusal = proxy.gate(body) if proxy.gate is not None and route.metered else None
            if refusal:  # a limit of the worker's: this call is not made
                self._error(400, f"agentrun stopped this model call: {refusal}")
                return
            self._forward(route, target, body)

        def _forward(self, route: Route, target: str, body: bytes | None) -> None:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _DROP}
            if proxy.api.bearer:  # (no key: a local server that takes none)
                if proxy.key:
                    headers["authorization"] = f"Bearer {proxy.key}"
            else:
                headers["x-api-key"] = proxy.key
            proxy.requests += 1
            started = time.time()
            meter = UsageReader() if route.metered else None
            conn = proxy.connection()
            try:
                conn.request(route.method, proxy.prefix + target, body=body, headers=headers)
                answer = conn.getresponse()
                if meter is not None:
                    meter.start(answer.status, answer.getheader("content-type") or "")
                self.send_response(answer.status, answer.reason)
                for name, value in answer.getheaders():
                    if name.lower() not in _DROP:
                        self.send_header(name, value)
                self.end_headers()
                while chunk := answer.read1(65536):
                    if meter is not None:
                        meter.feed(chunk)
                    self.wfile.write(chunk)
                    self.wfile.flush()
            except OSError as exc:
                with contextlib.suppress(OSError):
                    self._error(502, f"cannot reach the model server: {type(exc).__name__}")
            finally:
                conn.close()
                if meter is not None and (usage := meter.usage()).total:
                    proxy.spent(usage, started)
                if meter is not None and meter.refusal is not None:
                    proxy.model_refused(meter.refusal)

        def _refuse(self, status: int, reason: str) -> None:
            proxy.refuse(self.command, self.path, reason)
            with contextlib.suppress(OSError):
                self._error(status, f"refused by agentrun's key proxy: {reason}")

        def _error(self, status: int, message: str) -> None:
            data = json.dumps({"type": "error",
                               "error": {"type": "proxy_error", "message": message}}).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

    return Forward


class UsageReader:
    """Reads the usage off a model's answer as it streams past: a JSON body (read whole, up
    to `MAX_USAGE_BYTES`), or server-sent events (Anthropic's `message_start` and
    `message_delta`, the Responses API's `response.completed`, a Chat Completions chunk with
    `usage`), and a Responses API refusal if the model gave one (`refusal_in`)."""

    def __init__(self) -> None:
        self.stream = False
        self.ok = False
        self.pending = bytearray()
        self.overflow = False
        self.raw: dict[str, Any] = {}  # the usage fields seen so far, by their wire names
        self.refusal: str | None = None  # the model declined, in these words

    def start(self, status: int, content_type: str) -> None:
        self.ok = 200 <= status < 300
        self.stream = content_type.split(";")[0].strip().lower() == "text/event-stream"

    def feed(self, chunk: bytes) -> None:
        if not self.ok:
            return
        if not self.stream:
            self._keep(chunk)
            return
        first, newline, rest = chunk.partition(b"\n")
        if not newline:
            self._keep(chunk)
            return
        lines = [b"" if self.overflow else bytes(self.pending) + first, *rest.split(b"\n")]
        self.pending, self.overflow = bytearray(), False
        self._keep(lines.pop())
        for line in lines:
            if line.startswith(b"data:"):
                self._event(_json(line[5:]))

    def _keep(self, data: bytes) -> None:
        """Hold `data` until its line (or body) is whole, unless that grows too large to read
        (then the line, or the body, is skipped)."""
        if self.overflow or len(self.pending) + len(data) > MAX_USAGE_BYTES:
            self.overflow = True
            self.pending.clear()
        else:
            self.pending += data

    def usage(self) -> Usage:
        if self.ok and not self.stream and not self.overflow:
            self._read(_json(bytes(self.pending)))
        elif self.stream and not self.overflow and self.pending.startswith(b"data:"):
            self._event(_json(bytes(self.pending[5:])))
        self.pending.clear()
        return usage_of(self.raw)

    def _event(self, data: Any) -> None:
        if not isinstance(data, Mapping):
            return
        kind = data.get("type")
        if kind == "message_start" and isinstance(data.get("message"), Mapping):
            self._read(data["message"])
        elif kind == "response.completed" and isinstance(data.get("response"), Mapping):
            self._read(data["response"])
        elif kind == "response.output_item.done":
            self.refusal = refusal_in({"output": [data.get("item")]}) or self.refusal
        else:  # message_delta, or a Chat Completions chunk
            self._read(data)

    def _read(self, body: Any) -> None:
        self.refusal = refusal_in(body) or self.refusal
        usage = body.get("usage") if isinstance(body, Mapping) else None
        if isinstance(usage, Mapping):  # later figures (message_delta's) are running totals
            self.raw.update({k: v for k, v in usage.items() if isinstance(v, int | Mapping)})


def refusal_in(body: Any) -> str | None:
    """The model's refusal in a Responses API answer (its `refusal` content parts); None when
    there is none."""
    output = body.get("output") if isinstance(body, Mapping) else None
    if not isinstance(output, list):
        return None
    said = []
    for item in output:
        parts = item.get("content") if isinstance(item, Mapping) else None
        said += [str(p.get("refusal") or "") for p in parts or []
                 if isinstance(p, Mapping) and p.get("type") == "refusal"]
    return "".join(said) if said else None


def usage_of(raw: Mapping[str, Any]) -> Usage:
    """A `Usage` from any of the three APIs' usage fields (cached input counted apart)."""
    def count(*names: str) -> int:
        for name in names:
            parent, _, child = name.partition(".")
            value = raw.get(parent)
            if child:
                value = value.get(child) if isinstance(value, Mapping) else None
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                return value
        return 0

    if "prompt_tokens" in raw:  # Chat Completions: the prompt includes the cached part
        cached = count("prompt_tokens_details.cached_tokens")
        return Usage(max(0, count("prompt_tokens") - cached), count("completion_tokens"), cached)
    if "input_tokens_details" in raw:  # Responses: likewise
        cached = count("input_tokens_details.cached_tokens")
        return Usage(max(0, count("input_tokens") - cached), count("output_tokens"), cached)
    return Usage(count("input_tokens"), count("output_tokens"),  # Anthropic
                 count("cache_read_input_tokens"), count("cache_creation_input_tokens"))


def _json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None
