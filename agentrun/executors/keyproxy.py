"""A forwarder on 127.0.0.1 that holds the model API key for a coding-agent CLI.

A CLI such as Claude Code or Codex needs a key to call its model, and every command it runs
inherits its environment. So the CLI never gets the key: it gets this forwarder's URL and a
token that is good only here, for the length of one attempt; the forwarder swaps the token for
the key and streams the answer back unchanged.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import secrets
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from urllib.parse import urlsplit

# hop-by-hop headers and the ones the forwarder sets itself
_DROP = {"host", "x-api-key", "authorization", "content-length", "connection", "keep-alive",
         "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}
UPSTREAM_TIMEOUT_S = 600.0


class KeyProxy:
    """`with KeyProxy(upstream, key) as proxy:` — give the CLI `proxy.url` and `proxy.token`.
    `bearer`: the upstream takes the key as `Authorization: Bearer` (OpenAI) rather than as
    `x-api-key` (Anthropic). `gate` is asked before each call is forwarded: None lets it go,
    a reason refuses it (the worker's limits, executors/guard.py; it may wait first)."""

    def __init__(self, upstream: str, key: str, *, bearer: bool = False,
                 gate: Callable[[], str | None] | None = None) -> None:
        parts = urlsplit(upstream)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {upstream}")
        self.scheme, self.host, self.port = parts.scheme, parts.hostname, parts.port
        self.prefix = parts.path.rstrip("/")
        self.key, self.bearer, self.gate = key, bearer, gate
        self.token = "agentrun-" + secrets.token_urlsafe(24)
        self.requests = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

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


def _handler(proxy: KeyProxy) -> type[BaseHTTPRequestHandler]:
    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # the answer ends when the connection closes

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server naming
            self._forward()

        def do_GET(self) -> None:  # noqa: N802
            self._forward()

        def do_HEAD(self) -> None:  # noqa: N802
            self._forward()

        def _forward(self) -> None:
            given = self.headers.get("x-api-key") or \
                self.headers.get("authorization", "").removeprefix("Bearer ").strip()
            if not secrets.compare_digest(given.encode(), proxy.token.encode()):
                self._error(401, "unknown token")
                return
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else None
            refusal = proxy.gate() if proxy.gate is not None and self.command == "POST" \
                else None
            if refusal:  # a limit of the worker's: this call is not made
                self._error(400, f"agentrun stopped this model call: {refusal}")
                return
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _DROP}
            if proxy.bearer:  # (no key: a local server that takes none)
                if proxy.key:
                    headers["authorization"] = f"Bearer {proxy.key}"
            else:
                headers["x-api-key"] = proxy.key
            proxy.requests += 1
            conn = proxy.connection()
            try:
                conn.request(self.command, proxy.prefix + self.path, body=body, headers=headers)
                answer = conn.getresponse()
                self.send_response(answer.status, answer.reason)
                for name, value in answer.getheaders():
                    if name.lower() not in _DROP:
                        self.send_header(name, value)
                self.end_headers()
                while chunk := answer.read1(65536):
                    self.wfile.write(chunk)
                    self.wfile.flush()
            except OSError as exc:
                with contextlib.suppress(OSError):
                    self._error(502, f"cannot reach the model server: {type(exc).__name__}")
            finally:
                conn.close()

        def _error(self, status: int, message: str) -> None:
            data = json.dumps({"type": "error",
                               "error": {"type": "proxy_error", "message": message}}).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(data)

    return Forward
