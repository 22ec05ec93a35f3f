"""The bubblewrap jail, run for real: each escape a model's command could try, and the work it
must still be able to do."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from gitutil import init_repo, run_git

from agentrun.sandbox.jail import Jail, confine, unavailable_reason

REASON = unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"bubblewrap unusable: {REASON}")


def jailed(command: str, jail: Jail, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(confine(["/bin/bash", "-c", command], jail), capture_output=True,
                          text=True, timeout=timeout, check=False)


@pytest.fixture
def setup(tmp_path: Path):
    """A repository, a linked worktree of it, and a fake home holding a key."""
    repo = init_repo(tmp_path / "repo", {"a.txt": "a\n"})
    worktree = tmp_path / "repo" / ".specflow" / "runs" / "r1" / "worktrees" / "G1"
    run_git(repo, "worktree", "add", "-q", "-b", "agentrun/g1", str(worktree))
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    jail = Jail(worktree=worktree, git_dir=repo / ".git", home=home)
    return repo, worktree, home, jail


def test_writes_land_in_the_worktree_only(setup, tmp_path):
    repo, worktree, _home, jail = setup
    outside = tmp_path / "outside.txt"
    proc = jailed(f"echo in > inside.txt; echo out > {outside}; "
                  f"python3 -c \"open('{repo}/planted.txt', 'w').write('x')\"; "
                  "touch /usr/planted", jail)
    assert (worktree / "inside.txt").read_text() == "in\n"
    assert not outside.exists() and not (repo / "planted.txt").exists()
    assert not Path("/usr/planted").exists()
    assert "Read-only file system" in proc.stderr


def test_home_is_empty_but_tools_on_path_still_run(setup):
    _repo, _worktree, home, jail = setup
    proc = jailed(f"cat {home}/.ssh/id_ed25519; ls -A {home}; python3 -c 'print(6 * 7)'", jail)
    assert "PRIVATE KEY" not in proc.stdout
    assert "42" in proc.stdout


def test_home_allowlist_exposes_a_path_read_only(setup):
    _repo, _worktree, home, jail = setup
    (home / ".tool").mkdir()
    (home / ".tool" / "conf").write_text("setting\n")
    allowed = Jail(**{**jail.__dict__, "home_allow": (Path(".tool"),)})
    proc = jailed(f"cat {home}/.tool/conf; echo x > {home}/.tool/conf", allowed)
    assert proc.stdout == "setting\n"
    assert (home / ".tool" / "conf").read_text() == "setting\n"


def test_git_reads_work_but_hooks_config_and_pointer_cannot_be_planted(setup):
    repo, worktree, _home, jail = setup
    (worktree / "new.txt").write_text("n\n")
    proc = jailed("git status --porcelain; git log --oneline | wc -l; "
                  "echo 'touch /tmp/pwned' > .git-hook; "
                  f"cp .git-hook {repo}/.git/hooks/post-commit; "
                  "git config core.fsmonitor 'touch pwned'; "
                  "echo 'gitdir: /elsewhere' > .git", jail)
    assert "?? new.txt" in proc.stdout
    assert not (repo / ".git" / "hooks" / "post-commit").exists()
    assert "fsmonitor" not in (repo / ".git" / "config").read_text()
    assert (worktree / ".git").read_text().startswith(f"gitdir: {repo}")


def test_nothing_outlives_the_command(setup):
    _repo, worktree, _home, jail = setup
    jailed("setsid bash -c 'sleep 1; echo late > late.txt' > /dev/null 2>&1 & "
           "nohup bash -c 'sleep 1; echo late > late2.txt' > /dev/null 2>&1 &", jail)
    time.sleep(2)
    assert not (worktree / "late.txt").exists() and not (worktree / "late2.txt").exists()


def test_tmp_is_private(setup, tmp_path):
    _repo, _worktree, _home, jail = setup
    jailed("echo secret > /tmp/left-behind", jail)
    assert not Path("/tmp/left-behind").exists()


def _listener() -> tuple[socket.socket, int, list[bytes]]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    got: list[bytes] = []

    def serve() -> None:
        server.settimeout(5)
        try:
            conn, _ = server.accept()
            got.append(conn.recv(100))
            conn.close()
        except OSError:
            pass

    threading.Thread(target=serve, daemon=True).start()
    return server, server.getsockname()[1], got


def test_no_network_unless_allowed(setup):
    _repo, _worktree, _home, jail = setup
    code = ("import socket,sys; s=socket.create_connection(('127.0.0.1', int(sys.argv[1])), 2);"
            " s.sendall(b'hello')")
    server, port, got = _listener()
    jailed(f"{sys.executable} -c \"{code}\" {port}", jail)
    time.sleep(0.2)
    assert got == []
    server.close()

    server, port, got = _listener()
    allowed = Jail(**{**jail.__dict__, "network": True})
    proc = jailed(f"{sys.executable} -c \"{code}\" {port}", allowed)
    deadline = time.monotonic() + 5
    while not got and time.monotonic() < deadline:
        time.sleep(0.05)
    server.close()
    assert got == [b"hello"], proc.stderr


def test_read_only_jail_for_auditors(setup):
    _repo, worktree, _home, jail = setup
    readonly = Jail(**{**jail.__dict__, "writable": False})
    proc = jailed("cat a.txt; echo x > a.txt", readonly)
    assert proc.stdout == "a\n"
    assert (worktree / "a.txt").read_text() == "a\n"


def test_a_symlink_pointing_out_leads_nowhere_writable(setup, tmp_path):
    _repo, worktree, _home, jail = setup
    target = tmp_path / "target.txt"
    target.write_text("original\n")
    (worktree / "link.txt").symlink_to(target)
    jailed("echo changed > link.txt", jail)
    assert target.read_text() == "original\n"


def test_a_virtualenv_under_tmp_stays_usable(setup, tmp_path):
    """/tmp is private inside the jail, but a tool installed there (a CI job's virtualenv)
    still runs, read-only."""
    _repo, _worktree, _home, jail = setup
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    with_venv = Jail(**{**jail.__dict__, "path_env": f"{venv / 'bin'}:/usr/bin:/bin"})
    proc = jailed(f"{venv}/bin/python -c 'print(6 * 7)'; touch {venv}/planted", with_venv)
    assert proc.stdout == "42\n", proc.stderr
    assert not (venv / "planted").exists()
