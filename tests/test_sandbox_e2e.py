"""The command sandbox through `agentrun run`: every escape a model's command might try, made
by a scripted model in a real repository, and the legitimate work that must still pass.

Each escape test runs the default mode (`auto`, which is bubblewrap here); the same commands
with `--sandbox off` do escape (see test_an_unconfined_run_escapes), which is what makes each of
these tests able to fail.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml
from clirun import agentrun
from gitutil import run_git
from runkit import command, make_project, scripted, spec_text, submit, writes

from agentrun.sandbox.jail import unavailable_reason

REASON = unavailable_reason()
needs_bwrap = pytest.mark.skipif(REASON is not None, reason=f"bubblewrap unusable: {REASON}")
ONE = [("G1", [], "src/a.py")]
ON = "on (bubblewrap)"


def project(tmp_path: Path, *commands: str, files: dict[str, str] | None = None) -> Path:
    """A one-group project whose model writes its file, runs `commands`, and finishes (the
    file first: failing commands in a row make the loop force a reflection turn)."""
    write, *finish = writes("src/a.py", "A = 1\n")
    script = {"groups": {"G1": [write, *(command(c) for c in commands), *finish]}}
    return make_project(tmp_path / "p", "SPEC-1", spec_text("SPEC-1", ONE), script, files)


def run(root: Path, *extra: str, env: dict[str, str] | None = None):
    proc = agentrun("run", "SPEC-1", *scripted(*extra), cwd=root, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.json["status"] == "complete"
    return proc


def ran_outputs(root: Path) -> str:
    """Everything the model's commands printed, from the run's transcripts."""
    return "\n".join(p.read_text() for p in (root / ".specflow/runs").rglob("*.jsonl"))


def python_writes(path: Path, text: str) -> str:
    """A `python3 -c` one-liner that writes `text` to `path` without naming it."""
    hidden = base64.b64encode(str(path).encode()).decode()
    return (f"python3 -c \"import base64; open(base64.b64decode('{hidden}').decode(), 'w')"
            f".write('{text}')\"")


def fake_home(tmp_path: Path) -> Path:
    """A home directory holding a private key and a git identity."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE-KEY-MARKER\n")
    (home / ".gitconfig").write_text("[user]\n\tname = T\n\temail = t@example.com\n")
    return home


def escapes_project(tmp_path: Path, groups: dict[str, list[str]],
                    files: dict[str, str] | None = None) -> Path:
    """A project with one group per entry of `groups`: each writes its own file
    src/<group>.py, runs its commands, and finishes (the file first: failing commands in a row
    make the loop force a reflection turn, which takes the next turn: the submission is there
    twice, for a group whose reflection took the first)."""
    script: dict[str, dict] = {"groups": {}}
    for gid, commands in groups.items():
        write, *finish = writes(f"src/{gid}.py", f"{gid} = 1\n")
        script["groups"][gid] = [write, *(command(c) for c in commands), *finish, *finish]
    spec = spec_text("SPEC-1", [(gid, [], f"src/{gid}.py") for gid in groups])
    return make_project(tmp_path / "p", "SPEC-1", spec, script, files)


def survivors(token: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and token.encode() in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


class Listener:
    """A TCP listener on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.done.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self.done.set()
        self.thread.join(5)
        self.sock.close()


def connect(listener: Listener) -> str:
    return ("python3 -c \"import socket; socket.create_connection("
            f"('127.0.0.1', {listener.port}), timeout=3)\"")


@needs_bwrap
def test_every_escape_a_sandboxed_command_tries_fails(tmp_path):
    """One sandboxed run, one group per escape (each group's work still lands):
    G1 writes outside its worktree (plainly, and hidden in python, also to the user's
    README); G2 follows a symlink out (and removes it: a symlink out of the repository would
    fail the group, test_trust_landing.py); G3 reads a key in $HOME; G4 plants git hooks and
    fsmonitor settings; G5 leaves detached processes behind; G6 connects to a local listener;
    G7 reads a home path the config allows (`home_allow`) and tries to write it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    target = tmp_path / "target.txt"
    target.write_text("mine\n")
    home = fake_home(tmp_path)
    (home / ".tool").mkdir()
    (home / ".tool" / "conf").write_text("setting\n")
    marker = tmp_path / "hook-ran"
    hook = f"#!/bin/sh\\ntouch {marker}\\n"
    plant = ("python3 -c \"import os, subprocess; d = subprocess.check_output(['git', "
             "'rev-parse', '--path-format=absolute', '--git-common-dir'], text=True).strip(); "
             "[open(os.path.join(d, 'hooks', h), 'w').write('" + hook + "') or "
             "os.chmod(os.path.join(d, 'hooks', h), 0o755) for h in ('pre-commit', "
             "'post-commit', 'post-merge')]\"")
    token = f"{int(time.time() * 1000) % 10**9}.{os.getpid()}"  # a unique sleep duration
    listener = Listener()
    try:
        root = escapes_project(tmp_path, {
            "G1": [f"echo pwned > {outside}/plain.txt",
                      python_writes(outside / "hidden.txt", "pwned"),
                      python_writes(tmp_path / "p" / "README.md", "pwned")],
            "G2": [f"ln -s {target} link.txt && echo pwned >> link.txt; rm -f link.txt"],
            "G3": ["cat ~/.ssh/id_ed25519 > stolen.txt; cat stolen.txt",
                    "python3 -c \"import os; print(open(os.path.expanduser('~') + "
                    "'/.ssh/id_ed25519').read())\""],
            "G4": [plant, f"git config core.fsmonitor 'touch {marker}'",
                     f"git config --global core.fsmonitor 'touch {marker}'"],
            "G5": [f"setsid nohup sleep {token} >/dev/null 2>&1 &",
                       f"nohup sleep {token} >/dev/null 2>&1 &", "sleep 0.5"],
            "G6": [connect(listener)],
            "G7": ["cat ~/.tool/conf > seen.txt",
                     python_writes(home / ".tool" / "conf", "changed")],
        }, files={".specflow/config.yaml": yaml.safe_dump(
            {"sandbox": {"home_allow": [".tool"]}})})
        proc = run(root, env={"HOME": str(home)})
        time.sleep(0.5)
        assert survivors(token) == []  # G5
    finally:
        listener.close()
        for pid in survivors(token):
            os.kill(pid, 9)
    assert proc.json["sandbox"] == ON
    for gid in ("G1", "G2", "G3", "G4", "G5", "G6", "G7"):
        assert (root / f"src/{gid}.py").read_text() == f"{gid} = 1\n"  # the work landed
    # G1
    assert list(outside.iterdir()) == []
    assert (root / "README.md").read_text() == "# fixture\n"
    # G2
    assert target.read_text() == "mine\n"
    # G3
    assert "PRIVATE-KEY-MARKER" not in run_git(root, "log", "--all", "-p")
    assert "PRIVATE-KEY-MARKER" not in ran_outputs(root)
    # G6: closed without --allow-network
    assert listener.accepted == 0
    # G7: readable, not writable
    assert (root / "seen.txt").read_text() == "setting\n"
    assert (home / ".tool" / "conf").read_text() == "setting\n"
    # G4, last: then the user's own next commands, plain git, outside agentrun
    assert "fsmonitor" not in (home / ".gitconfig").read_text()
    for name in ("pre-commit", "post-commit", "post-merge"):
        assert not (root / ".git/hooks" / name).exists()
    assert "fsmonitor" not in (root / ".git/config").read_text()
    env = {**os.environ, "GIT_EDITOR": "true", "HOME": str(home)}
    (root / "mine.txt").write_text("mine\n")
    for args in (["status"], ["add", "mine.txt"], ["commit", "-qm", "mine"], ["status"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)
    assert not marker.exists()


@needs_bwrap
def test_the_network_is_open_when_allowed(tmp_path):
    """The control for G6 of the test above: the same connection with `--allow-network` arrives."""
    listener = Listener()
    try:
        root = project(tmp_path, connect(listener))
        proc = run(root, "--allow-network")
        assert proc.json["sandbox"] == ON
        assert listener.accepted == 1
    finally:
        listener.close()


@needs_bwrap
def test_an_unconfined_run_escapes(tmp_path):
    """The control: with `--sandbox off` the same commands do reach outside."""
    outside = tmp_path / "outside"
    outside.mkdir()
    root = project(tmp_path, python_writes(outside / "hidden.txt", "pwned"))
    proc = run(root, "--sandbox", "off")
    assert proc.json["sandbox"] == "off (sandbox mode off)"
    assert (outside / "hidden.txt").read_text() == "pwned"


@needs_bwrap
def test_a_validation_command_running_pytest_passes_inside(tmp_path):
    script = {"groups": {"G1": [
        command("git status --porcelain; git diff --stat; git log --oneline | head -1"),
        command("mkdir -p build && echo out > build/artifact.txt"),
        *writes("test_a.py", "def test_a():\n    assert 1 + 1 == 2\n")]}}
    root = make_project(tmp_path / "p", "SPEC-1",
                        spec_text("SPEC-1", [("G1", [], "test_a.py")]), script,
                        {".gitignore": ".specflow/runs/\nbuild/\n.pytest_cache/\n"})
    proc = run(root, "--validate", "python3 -m pytest -q -p no:cacheprovider")
    assert proc.json["sandbox"] == ON
    assert "1 passed" in ran_outputs(root)
    assert (root / "test_a.py").is_file()
    events = (Path(proc.json["run_dir"]) / "events.ndjson").read_text()
    assert f'"sandbox": "{ON}"' in events


def no_bwrap_path(tmp_path: Path) -> str:
    """A PATH with the venv and git, but no bwrap."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("git", "python3"):
        found = shutil.which(tool)
        assert found is not None
        (bin_dir / tool).symlink_to(found)
    return os.pathsep.join([str(Path(shutil.which("python3") or "").parent), str(bin_dir)])


def test_on_refuses_to_start_without_bwrap(tmp_path):
    root = project(tmp_path)
    env = {"PATH": no_bwrap_path(tmp_path)}
    proc = agentrun("run", "SPEC-1", *scripted("--sandbox", "on"), cwd=root, env=env)
    assert proc.returncode == 3, proc.stderr
    assert "bwrap not found" in proc.stderr and "apt-get install bubblewrap" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (root / ".specflow/runs").exists()


def test_auto_without_bwrap_runs_unconfined_and_says_so(tmp_path):
    root = project(tmp_path)
    env = {"PATH": no_bwrap_path(tmp_path)}
    proc = agentrun("run", "SPEC-1", *scripted(), cwd=root, env=env)
    assert proc.returncode == 0, proc.stderr
    said = "off (bwrap not found: apt-get install bubblewrap)"
    assert proc.json["sandbox"] == said
    assert f"Sandbox: {said}" in proc.stderr
    assert any(said in w for w in proc.json["warnings"])
    result = (Path(proc.json["run_dir"]) / "result.json").read_text()
    assert said in result


def test_sandbox_mode_comes_from_the_config_and_bad_values_are_named(tmp_path):
    root = project(tmp_path, files={".specflow/config.yaml": yaml.safe_dump(
        {"sandbox": {"mode": "off"}})})
    proc = agentrun("run", "SPEC-1", *scripted("--dry-run"), cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert proc.json["sandbox"] == "off (sandbox mode off)"
    bad = agentrun("run", "SPEC-1", *scripted("--dry-run", "--sandbox", "maybe"), cwd=root)
    assert bad.returncode == 2 and "--sandbox" in bad.stderr
    assert "'maybe' is not one of 'auto', 'on', 'off'" in bad.stderr
    (root / ".specflow/config.yaml").write_text("sandbox:\n  mode: maybe\n")
    bad = agentrun("run", "SPEC-1", *scripted("--dry-run"), cwd=root)
    assert bad.returncode == 2 and "sandbox.mode" in bad.stderr
    assert "Traceback" not in bad.stderr


@needs_bwrap
def test_a_ci_worker_sandboxes_its_commands_and_still_commits(tmp_path):
    hook = tmp_path / "p" / ".git" / "hooks" / "post-commit"
    # written by python, past the command policy's refusal of writes into .git (a guardrail):
    # the sandbox is what stops them
    root = project(tmp_path, python_writes(hook, "#!/bin/sh\\ntouch x\\n") + "; git status --short",
                   python_writes(tmp_path / "p" / ".git/info/exclude", "planted"))
    out = tmp_path / "result.json"
    proc = agentrun("worker", "--spec", "SPEC-1", "--groups", "G1", "--out", str(out),
                    "--provider", "scripted", "--script", ".specflow/script.yaml", "--json",
                    cwd=root)
    assert proc.returncode == 0, proc.stderr
    doc = proc.json
    assert doc["sandbox"] == ON and doc["status"] == "complete"
    assert len(doc["commits"]) == 1  # the worker framework commits, outside the sandbox
    assert not hook.exists() and "planted" not in (root / ".git/info/exclude").read_text()
    assert "SPEC-1" in run_git(root, "log", "-1", "--format=%s")


def test_worker_and_audit_refuse_sandbox_on_without_bwrap(tmp_path):
    root = project(tmp_path)
    env = {"PATH": no_bwrap_path(tmp_path)}
    model = ("--provider", "scripted", "--script", ".specflow/script.yaml")
    worker = agentrun("worker", "--spec", "SPEC-1", "--groups", "G1", "--out",
                      str(tmp_path / "r.json"), *model, "--sandbox", "on", cwd=root, env=env)
    audit = agentrun("audit", "SPEC-1", *model, "--sandbox", "on", cwd=root, env=env)
    for proc in (worker, audit):
        assert proc.returncode == 3, proc.stderr
        assert "apt-get install bubblewrap" in proc.stderr and "Traceback" not in proc.stderr
    assert run_git(root, "branch", "--list", "agentrun/*") == ""


@needs_bwrap
def test_the_audit_says_its_sandbox(tmp_path):
    from test_audit_cli import NO_MODEL, SPEC
    from test_audit_cli import project as audit_project
    from test_audit_cli import submit as verdict

    root = audit_project(tmp_path, {"SPEC-1": SPEC.format(id="SPEC-1")},
                         {"groups": {"SPEC-1": [verdict("APPROVED", comment="ready")]}})
    proc = agentrun("audit", "SPEC-1", "--script", "script.yaml", "--json", cwd=root,
                    env=NO_MODEL)
    assert proc.returncode == 0, proc.stderr
    assert proc.json["sandbox"] == ON and proc.json["status"] == "APPROVED"
    off = agentrun("audit", "SPEC-1", "--script", "script.yaml", "--json", "--dry-run",
                   "--sandbox", "off", cwd=root, env=NO_MODEL)
    assert off.json["sandbox"] == "off (sandbox mode off)"


@needs_bwrap
def test_a_sandboxed_worker_timeout_ends_its_commands_and_cannot_be_forged(tmp_path, bystander):
    """One sandboxed run with a worker timeout. G1's command starts a heartbeat and a detached
    one: on the timeout both stop. G2's command tries to forge what the orchestrator reads back
    (progress, results, in the git common dir): it sees them read-only, cannot write them, and
    the bystander's process group it names survives (a branch cannot carry them either: git
    tracks no `.git`)."""
    token = f"agentrun-beat-{os.getpid()}-{time.monotonic_ns()}"
    beat = "while true; do date +%s%N > {}; sleep 0.1; done"
    line = json.dumps({"type": "spawn", "pgid": bystander.pid})
    forged = json.dumps({"group": "G2", "groups": ["G2"], "status": "complete"})
    forge = ("d=$(git rev-parse --git-common-dir)/agentrun/runs; "
             f"for f in $d/*/workers/G2/progress.ndjson; do echo '{line}' >> $f; done; "
             f"for f in $d/*/workers/G2/result.json; do echo '{forged}' > $f; done; "
             "ls $d/*/workers/G2/ > seen.txt; sleep 300")
    script = {"groups": {"G1": [command(f"setsid bash -c '{beat.format('detached.beat')}' "
                                        f"{token} & {beat.format('shell.beat')}"),
                                *writes("src/a.py", "A = 1\n")],
                         "G2": [command(forge), submit("complete", "never")]}}
    two = [("G1", [], "src/a.py"), ("G2", [], "src/b.py")]
    root = make_project(tmp_path / "p", "SPEC-1", spec_text("SPEC-1", two), script)
    try:
        proc = agentrun("run", "SPEC-1", *scripted("--worker-timeout", "4", "--sandbox", "on"),
                        cwd=root)
        assert proc.returncode == 1, proc.stderr
        groups = proc.json["groups"]
        # G1
        group = groups["G1"]
        assert group["stop_reason"] == "timeout"
        beats = [Path(group["worktree"]) / name for name in ("shell.beat", "detached.beat")]
        assert all(b.exists() for b in beats)
        time.sleep(0.5)
        last = [b.read_text() for b in beats]
        time.sleep(0.5)
        assert [b.read_text() for b in beats] == last
        # G2: the command saw the control files (read-only) but could not write them
        group = groups["G2"]
        assert group["status"] == "failed" and group["stop_reason"] == "timeout"
        assert "progress.ndjson" in (Path(group["worktree"]) / "seen.txt").read_text()
        control = next((root / ".git/agentrun/runs").glob("*/workers/G2"))
        assert str(bystander.pid) not in (control / "progress.ndjson").read_text()
        assert bystander.poll() is None, "the bystander's process group was killed"
    finally:
        for pid in survivors(token):
            os.kill(pid, 9)
