"""A test OpenTelemetry collector on 127.0.0.1: it takes OTLP/HTTP trace exports
(`POST /v1/traces`, protobuf) and decodes each `ExportTraceServiceRequest` with
opentelemetry-proto, so tests read back every span a run and its worker processes sent.

    with OtlpReceiver() as collector:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint}
        ...
        collector.spans            # every span received: name, ids, parent, kind, attributes

`OtlpReceiver(answer=False)` accepts connections and reads the requests but never answers
(a collector that hangs); `closed_port()` is an address where nothing listens.
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

KINDS = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER",
         5: "CONSUMER"}
STATUS = {0: "UNSET", 1: "OK", 2: "ERROR"}


def _value(v: Any) -> Any:  # an opentelemetry.proto AnyValue
    which = v.WhichOneof("value")
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, which) if which else None


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: str
    start_ns: int
    end_ns: int
    status: str
    attributes: dict[str, Any] = field(default_factory=dict)
    resource: dict[str, Any] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)

    def __getitem__(self, key: str) -> Any:
        return self.attributes[key]


class OtlpReceiver:
    def __init__(self, answer: bool = True) -> None:
        self.answer = answer
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self.lock = threading.Lock()
        self.release = threading.Event()  # lets a hanging handler go at the end
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> OtlpReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    def take(self, body: bytes) -> None:
        # (imported here: a test environment without the `test` extra still collects tests)
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        found = []
        for rs in request.resource_spans:
            resource = {a.key: _value(a.value) for a in rs.resource.attributes}
            for scope in rs.scope_spans:
                for s in scope.spans:
                    found.append(ReceivedSpan(
                        s.name, s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(),
                        KINDS.get(s.kind, str(s.kind)), s.start_time_unix_nano,
                        s.end_time_unix_nano, STATUS.get(s.status.code, str(s.status.code)),
                        {a.key: _value(a.value) for a in s.attributes}, resource,
                        [e.name for e in s.events]))
        with self.lock:
            self.requests += 1
            self.spans += found

    def named(self, prefix: str) -> list[ReceivedSpan]:
        with self.lock:
            return [s for s in self.spans if s.name.startswith(prefix)]


def _handler(receiver: OtlpReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet tests
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server naming
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            if not receiver.answer:
                receiver.release.wait(60)  # hold the request, answer nothing
                return
            receiver.take(body)
            data = b""  # an empty ExportTraceServiceResponse
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def closed_port() -> str:
    """An endpoint on 127.0.0.1 where nothing listens (a port just freed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
