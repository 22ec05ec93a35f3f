"""Start `agentrun` processes without paying for their imports each time.

The suite starts hundreds of `agentrun` processes, and most of each one's CPU is the import of
typer, pydantic, rich, markdown-it, jinja2 and the package itself. A launcher is one Python
process per test process that has imported all of that once; for each call it forks, and the
child becomes the CLI process: its own stdin, stdout and stderr pipes, working directory,
environment and argv, then the installed `agentrun` script run as `__main__` — what Python does
with the script — ending in the interpreter's normal exit (threads joined, atexit, flush). The
test gets the real exit code and output, as from `subprocess.run`.

What the child does not repeat is Python's start-up, which reads the environment. So a call
whose environment differs in anything the start-up or those imports read (every `PYTHON*`,
`LANG`/`LC_*`/`TZ`, and each variable a preloaded module looked up while importing) gets a fresh
process instead, as does a call made while the launcher is busy. The model SDKs and tiktoken are
not preloaded: whether a command imports them stays observable. Set
`AGENTRUN_TEST_FRESH_PROCESSES=1` to start every call as a fresh process.

Run as a script, this module is the launcher; `Launcher` is its client.
"""

from __future__ import annotations

import json
import locale
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import MutableMapping, Sequence
from pathlib import Path

_STARTUP_PREFIXES = ("PYTHON", "LC_")
_STARTUP_NAMES = {"LANG", "TZ"}
# a script; the worker pool's set-up (which asks, once, whether bubblewrap works: a cached
# answer would hide a test's own PATH)
_NOT_PRELOADED = ("agentrun.__main__", "agentrun.preload", "agentrun.preload_sandbox",
                  "agentrun.preload_clients", "agentrun.preload_provider")


# --- the launcher process -------------------------------------------------------------------

class _RecordingEnviron(MutableMapping):
    """Stands in for `os.environ` during the preload, noting every name looked up; a module
    that kept a reference to it reads the real environment through it afterwards."""

    def __init__(self, real: MutableMapping) -> None:
        self.real, self.read = real, set()

    def __getitem__(self, key):
        self.read.add(key)
        return self.real[key]

    def __contains__(self, key) -> bool:
        self.read.add(key)
        return key in self.real

    def __iter__(self):
        self.read.add("*")  # every name: no call would differ from the preload's environment
        return iter(self.real)

    def __len__(self) -> int:
        return len(self.real)

    def copy(self) -> dict:
        self.read.add("*")
        return dict(self.real)

    def __setitem__(self, key, value) -> None:
        self.real[key] = value

    def __delitem__(self, key) -> None:
        del self.real[key]


def _preload() -> set[str]:
    """Import what an `agentrun` process imports; return the variables the imports read."""
    import importlib
    import pkgutil

    real, recording = os.environ, _RecordingEnviron(os.environ)
    os.environ = recording  # noqa: B003 - a view, not a new environment
    try:
        for name in ("typer", "typer.main", "rich.console", "rich.table", "rich.live",
                     "rich.markup", "yaml", "markdown_it", "jinja2", "pydantic"):
            importlib.import_module(name)
        import agentrun
        for module in pkgutil.walk_packages(agentrun.__path__, "agentrun."):
            if module.name not in _NOT_PRELOADED:
                importlib.import_module(module.name)
    finally:
        os.environ = real  # noqa: B003 - the real one back
    return recording.read


def _become(request: dict, fds: list[int]) -> None:
    """In the forked child: take the call's streams, directory, environment and argv, then run
    the script as Python would. Its `sys.exit` ends this process normally."""
    import runpy

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = list(request["argv"])
    runpy.run_path(request["argv"][0], run_name="__main__")
    sys.exit(0)


def _serve(channel: socket.socket, script: str) -> None:
    sys.path[0] = str(Path(script).parent)  # the script's folder, as when it is run directly
    read = sorted(_preload())
    channel.send(json.dumps({"read": read, "env": dict(os.environ)}).encode())
    while True:
        message, fds, _, _ = socket.recv_fds(channel, 1 << 20, 3)
        if not message:
            return
        pid = os.fork()
        if pid == 0:
            channel.close()
            _become(json.loads(message), fds)
        for fd in fds:
            os.close(fd)
        channel.send(json.dumps({"pid": pid}).encode())
        _, status = os.waitpid(pid, 0)
        channel.send(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode())


# --- the client -----------------------------------------------------------------------------

def _startup_sensitive(name: str) -> bool:
    return name.startswith(_STARTUP_PREFIXES) or name in _STARTUP_NAMES


class Launcher:
    """One launcher process for this test process, started on first use."""

    def __init__(self, script: Path, env: dict[str, str], wrap: Sequence[str] = ()) -> None:
        """`wrap`: a command the launcher runs under, e.g. bubblewrap with a read-only bind
        mount (every call then sees the files as the launcher does)."""
        self.lock = threading.Lock()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen([*wrap, sys.executable, __file__, str(theirs.fileno()),
                                      str(script)], pass_fds=[theirs.fileno()], env=env,
                                     stdin=subprocess.DEVNULL)
        theirs.close()
        self.channel = ours
        hello = json.loads(self.channel.recv(1 << 22))
        self.env: dict[str, str] = hello["env"]
        self.read = set(hello["read"])

    def serves(self, env: dict[str, str]) -> bool:
        """Whether a child of the launcher would start as a fresh process with `env` would."""
        names = set(env) | set(self.env)
        return all(env.get(n) == self.env.get(n) for n in names
                   if n in self.read or _startup_sensitive(n))

    def run(self, argv: list[str], cwd: Path | None, env: dict[str, str],
            timeout: float) -> subprocess.CompletedProcess:
        stdin = os.open(os.devnull, os.O_RDONLY)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        request = {"argv": argv, "cwd": str(cwd or os.getcwd()), "env": env}
        try:
            socket.send_fds(self.channel, [json.dumps(request).encode()], [stdin, out_w, err_w])
        finally:
            for fd in (stdin, out_w, err_w):
                os.close(fd)
        pid = json.loads(self.channel.recv(4096))["pid"]
        deadline = time.monotonic() + timeout
        try:
            out, err = _read_until_eof(out_r, err_r, deadline)
            self.channel.settimeout(max(0.1, deadline - time.monotonic()))
            returncode = json.loads(self.channel.recv(4096))["returncode"]
        except (subprocess.TimeoutExpired, TimeoutError):
            os.kill(pid, signal.SIGKILL)
            self.channel.settimeout(None)
            self.channel.recv(4096)  # its exit status: the launcher is ready for the next call
            raise subprocess.TimeoutExpired(argv, timeout) from None
        finally:
            self.channel.settimeout(None)
        return subprocess.CompletedProcess(argv, returncode, _text(out), _text(err))

    def close(self) -> None:
        self.channel.close()
        self.proc.wait(timeout=10)


def _read_until_eof(out_fd: int, err_fd: int, deadline: float) -> tuple[bytes, bytes]:
    """Both pipes to their end, as `communicate` reads them; closes them."""
    chunks: dict[int, list[bytes]] = {out_fd: [], err_fd: []}
    with selectors.DefaultSelector() as selector:
        for fd in chunks:
            selector.register(fd, selectors.EVENT_READ)
        try:
            while selector.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise subprocess.TimeoutExpired("agentrun", 0)
                for key, _ in selector.select(left):
                    data = os.read(key.fd, 1 << 16)
                    if data:
                        chunks[key.fd].append(data)
                    else:
                        selector.unregister(key.fd)
        finally:
            os.close(out_fd)
            os.close(err_fd)
    return b"".join(chunks[out_fd]), b"".join(chunks[err_fd])


def _text(data: bytes) -> str:
    """Decoded as `subprocess.run(text=True)` decodes: locale encoding, universal newlines."""
    text = data.decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")


if __name__ == "__main__":
    _serve(socket.socket(fileno=int(sys.argv[1])), sys.argv[2])
