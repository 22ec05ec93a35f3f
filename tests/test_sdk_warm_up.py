"""The worker pool's warm-up (agentrun/preload_clients.py, agentrun/providers/warm_up.py and
http.py): after it, a provider's first real model call, through the real SDK against the fake
server, loads no CA bundle and imports nothing; every call still goes out and comes back
right."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fake_model_server import FakeModelServer, Reply

from agentrun.providers.http import http_client, tls_context

REPO = Path(__file__).resolve().parent.parent

# Runs in a fresh interpreter: preloads what the pool's server does (optionally the warm-up),
# then counts what one provider's first call loads.
PROBE = """
import json, ssl, sys
sdk, adapter, base_url, warm = sys.argv[1:5]
import agentrun.preload, importlib
importlib.import_module(sdk); importlib.import_module(adapter)
warmed = None
if warm == "1":
    import agentrun.preload_clients
    from agentrun.providers.warm_up import warm_up
    warmed = warm_up(sdk)
loads = []
load = ssl.SSLContext.load_verify_locations
def counted(self, *args, **kwargs):
    loads.append(1)
    return load(self, *args, **kwargs)
ssl.SSLContext.load_verify_locations = counted
from agentrun.providers.base import Message, Request
from agentrun.tools.registry import tool_specs
module = importlib.import_module(adapter)
cls = module.AnthropicProvider if sdk == "anthropic" else module.OpenAIProvider
provider = cls("m-1", api_key="k", base_url=base_url, env={})
before = set(sys.modules)
turn = provider.complete(Request(system="s", messages=[Message("user", "do G1")],
                                 tools=tool_specs(), max_tokens=100))
print(json.dumps({"warmed": warmed, "loads": len(loads),
                  "imported": sorted(set(sys.modules) - before),
                  "calls": [c.name for c in turn.tool_calls]}))
"""


def probe(sdk: str, warm: bool) -> dict[str, object]:
    reply = Reply(tool_calls=[{"name": "read_file", "arguments": {"path": "a.txt"}}],
                  usage={"input_tokens": 5, "output_tokens": 3})
    with FakeModelServer(lambda _r: reply) as server:
        url = server.anthropic_base_url if sdk == "anthropic" else server.openai_base_url
        out = subprocess.run(
            [sys.executable, "-c", PROBE, sdk, f"agentrun.providers.{sdk}_provider", url,
             "1" if warm else "0"], cwd=REPO, capture_output=True, text=True, timeout=60,
            check=True)
        assert len(server.requests) == 1  # the call went out through the SDK
    return json.loads(out.stdout)


@pytest.mark.parametrize("sdk", ["anthropic", "openai"])
def test_a_warmed_up_process_makes_its_first_call_without_loading_anything(sdk: str) -> None:
    cold = probe(sdk, warm=False)
    # the control: without the warm-up, the first call loads the CA bundle and imports modules
    assert cold["loads"] >= 1 and cold["imported"], cold
    assert cold["calls"] == ["read_file"]

    warm = probe(sdk, warm=True)
    assert warm["warmed"] is True  # the warm-up's own call went through the SDK, in memory
    assert warm["loads"] == 0, warm
    assert warm["imported"] == [], warm
    assert warm["calls"] == ["read_file"]


def test_clients_share_one_tls_context_per_trust_setting(monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    import anthropic

    first, second = http_client(anthropic), http_client(anthropic)
    assert first is not second  # each provider its own connection pool...
    library = sys.modules[type(first).__mro__[1].__module__.partition(".")[0]]
    shared = tls_context(library)
    assert shared is not None and tls_context(library) is shared  # ...and one CA bundle load
    # a different trust store named in the environment is honoured, not served from the cache
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))
    assert tls_context(library) is not shared


def test_a_client_with_the_shared_tls_context_still_goes_through_the_proxy(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The shared context changes nothing else: `HTTP(S)_PROXY` from the environment is still
    honoured, as by the SDK's own client."""
    import socketserver
    import threading

    from fake_model_server import anthropic_message_json

    from agentrun.providers.anthropic_provider import AnthropicProvider
    from agentrun.providers.base import Message, Request

    seen: list[str] = []
    body = json.dumps(anthropic_message_json(text="via the proxy")).encode()

    class Proxy(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            seen.append(self.rfile.readline().decode().strip())  # the request line
            length = 0
            while (line := self.rfile.readline().strip()):
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            self.rfile.read(length)
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
                             + body)

    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), Proxy) as proxy:
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.server_address[1]}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        provider = AnthropicProvider("m-1", api_key="k", base_url="http://models.invalid",
                                     env={})
        turn = provider.complete(Request(system="s", messages=[Message("user", "hi")]))
        proxy.shutdown()
    assert turn.text == "via the proxy"
    assert seen == ["POST http://models.invalid/v1/messages HTTP/1.1"]
