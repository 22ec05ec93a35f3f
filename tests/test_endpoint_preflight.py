"""Before a run creates anything, the model endpoint must answer and accept the key: one
`GET /v1/models`, not a worker's 12 s of retries after its worktree was made."""

from __future__ import annotations

import socket
import time

import pytest
from clirun import agentrun
from fake_model_server import Error
from gitutil import run_git
from runkit import make_project, spec_text

from agentrun.providers.catalog import ProviderConfig
from agentrun.run.endpoint import EndpointUnusable, check_endpoint


def config(provider: str) -> ProviderConfig:
    return ProviderConfig(provider=provider, model="m", base_url=None, request_retries=0,
                          timeout_s=5, source="test")


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (connections are refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_key_reaches_the_models_list_as_each_sdk_sends_it(fake_model_server):
    url = fake_model_server.base_url
    ant = check_endpoint(config("anthropic"), {"ANTHROPIC_API_KEY": "sk-ant-1",
                                               "ANTHROPIC_BASE_URL": url})
    oai = check_endpoint(config("openai"), {"OPENAI_BASE_URL": f"{url}/v1?api-key=q1",
                                            "OPENAI_API_KEY": "sk-2"})
    assert ant.status == oai.status == 200 and "127.0.0.1" in ant.describe()
    first, second = fake_model_server.preflights
    assert first.path == second.path == "/v1/models"
    assert first.headers["x-api-key"] == "sk-ant-1" and "anthropic-version" in first.headers
    assert second.headers["authorization"] == "Bearer sk-2"
    assert fake_model_server.requests == []  # no model call, nothing taken from the queue
    assert "q1" not in oai.url  # shown without the query's credentials
    assert check_endpoint(config("scripted"), {}) is None  # nothing to call


def test_a_refused_key_or_no_server_is_bad_input_naming_the_endpoint(fake_model_server):
    fake_model_server.models_reply = Error(401, "invalid x-api-key")
    with pytest.raises(EndpointUnusable) as refused:
        check_endpoint(config("anthropic"), {"ANTHROPIC_API_KEY": "sk-bad",
                                             "ANTHROPIC_BASE_URL": fake_model_server.base_url})
    assert refused.value.exit_code == 2
    assert f"{fake_model_server.base_url}/v1/models refused the key in ANTHROPIC_API_KEY: " \
           "HTTP 401 (invalid x-api-key)" in refused.value.message
    assert "sk-bad" not in refused.value.message
    fake_model_server.models_reply = Error(404, "no models list here")  # still answers
    assert check_endpoint(config("openai"), {
        "OPENAI_BASE_URL": f"{fake_model_server.base_url}/v1"}).status == 404
    port = closed_port()
    with pytest.raises(EndpointUnusable) as nobody:
        check_endpoint(config("openai"), {"OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1",
                                          "OPENAI_API_KEY": "k"})
    assert f"cannot reach the model endpoint http://127.0.0.1:{port}/v1/models" \
        in nobody.value.message and "OPENAI_BASE_URL" in nobody.value.hint
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        started = time.monotonic()
        with pytest.raises(EndpointUnusable):
            check_endpoint(config("anthropic"), {
                "ANTHROPIC_API_KEY": "k",
                "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{silent.getsockname()[1]}"},
                timeout_s=0.3)
        assert time.monotonic() - started < 2


def test_a_run_against_an_unreachable_endpoint_stops_before_creating_anything(tmp_path):
    root = make_project(tmp_path / "p", "SPEC-70", spec_text("SPEC-70", [("G1", [], "a.py"),
                                                                         ("G2", [], "b.py")]),
                        {})
    head = run_git(root, "rev-parse", "HEAD")
    (root / ".specflow/specs/SPEC-70.md").write_text(
        (root / ".specflow/specs/SPEC-70.md").read_text() + "\n")  # its commit would be first
    port = closed_port()
    started = time.monotonic()
    proc = agentrun("run", "SPEC-70", "--provider", "anthropic", "--yes", "--json",
                    env={"ANTHROPIC_API_KEY": "sk-ant-x",
                         "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}"}, cwd=root)
    assert time.monotonic() - started < 5
    assert proc.returncode == 2, proc.stderr
    assert f"http://127.0.0.1:{port}/v1/models" in proc.json["error"]["message"]
    assert "Traceback" not in proc.stderr
    assert run_git(root, "rev-parse", "HEAD") == head  # no commit
    assert run_git(root, "worktree", "list").count("\n") == 0  # no worktree
    assert not (root / ".specflow/runs").exists() and not (root / ".specflow/execution").exists()
    assert "agentrun/" not in run_git(root, "branch", "--list")
