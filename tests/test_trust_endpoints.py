"""A proxy URL with credentials works, and its credentials never reach a file."""

from __future__ import annotations

import subprocess

from clirun import agentrun
from fake_model_server import Reply
from runkit import make_project, spec_text

PASSWORD = "proxy-pa55word-9f8e7d"
QUERY_KEY = "query-key-1a2b3c4d5e"


def test_a_proxy_url_with_credentials_works_and_never_appears_in_a_file(tmp_path,
                                                                         fake_model_server):
    fake_model_server.queue(
        Reply(tool_calls=[{"name": "write_file",
                           "arguments": {"path": "src/a.py", "content": "A = 1\n"}}]),
        Reply(tool_calls=[{"name": "submit_result", "arguments": {
            "status": "complete", "summary": "done", "criteria_met": ["every file exists"],
            "deviations": []}}]))
    host = fake_model_server.openai_base_url.split("://", 1)[1]
    url = f"http://user:{PASSWORD}@{host}?api-key={QUERY_KEY}"
    root = make_project(tmp_path / "p", "SPEC-51", spec_text("SPEC-51", [("G1", [], "src/a.py")]),
                        {})
    proc = agentrun("run", "SPEC-51", "--provider", "openai", "--model", "gpt-4.1", "--yes",
                    "--json", "--no-review",
                    env={"OPENAI_BASE_URL": url, "OPENAI_API_KEY": "sk-test-123456"},
                    cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert (root / "src/a.py").read_text() == "A = 1\n"
    assert fake_model_server.requests, "the SDK never reached the server"
    found = subprocess.run(["grep", "-rlaE", f"{PASSWORD}|{QUERY_KEY}", str(root)],
                           capture_output=True, text=True, check=False).stdout
    assert found == ""
    assert PASSWORD not in proc.stdout + proc.stderr and QUERY_KEY not in proc.stdout
