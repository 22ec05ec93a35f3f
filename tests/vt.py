"""A pseudo-terminal for tests: run the CLI on one, type answers, and read the screen back.

`Screen` replays what a terminal would draw from the bytes written to it — text, carriage
returns, line feeds, cursor moves and line erases (what Rich's live display uses) — so a test
can say what a person sees at a moment, not just what was ever written.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import termios
import time
from pathlib import Path

from clirun import ENTRY_POINT, cli_env

_CSI = re.compile(r"\x1b\[([?0-9;]*)([A-Za-z])")


class Screen:
    def __init__(self) -> None:
        self.lines: list[str] = [""]
        self.row = 0
        self.col = 0

    def feed(self, text: str) -> Screen:
        i = 0
        while i < len(text):
            m = _CSI.match(text, i)
            if m:
                self._control(m.group(1), m.group(2))
                i = m.end()
                continue
            ch = text[i]
            i += 1
            if ch == "\r":
                self.col = 0
            elif ch == "\n":
                self.row += 1
                while len(self.lines) <= self.row:
                    self.lines.append("")
            elif ch == "\x1b" or ch < " " and ch != "\t":
                continue  # other escapes and controls draw nothing
            else:
                line = self.lines[self.row].ljust(self.col)
                self.lines[self.row] = line[:self.col] + ch + line[self.col + 1:]
                self.col += 1
        return self

    def _control(self, args: str, code: str) -> None:
        n = int(args) if args.isdigit() else 1
        if code == "A":
            self.row = max(0, self.row - n)
        elif code == "B":
            self.row += n
            while len(self.lines) <= self.row:
                self.lines.append("")
        elif code == "C":
            self.col += n
        elif code == "D":
            self.col = max(0, self.col - n)
        elif code == "G":
            self.col = n - 1
        elif code == "K":
            mode = int(args) if args.isdigit() else 0
            line = self.lines[self.row]
            self.lines[self.row] = ("" if mode == 2 else " " * self.col if mode == 1
                                    else line[:self.col])

    @property
    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.lines)

    @property
    def cursor_line(self) -> str:
        return self.lines[self.row]


class Terminal:
    """`agentrun ARGS` with a pseudo-terminal as its stdin, stdout and stderr (no `CI`)."""

    def __init__(self, *args: str, cwd: Path, columns: int = 140, rows: int = 50) -> None:
        env = {k: v for k, v in cli_env({"TERM": "xterm-256color"}).items() if k != "CI"}
        pid, fd = pty.fork()
        if pid == 0:  # the child: the CLI, on the terminal
            try:
                os.chdir(cwd)
                os.execve(str(ENTRY_POINT), [str(ENTRY_POINT), *args], env)
            finally:
                os._exit(127)
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        self.pid, self.fd = pid, fd
        self.output = ""
        self.returncode: int | None = None

    def read(self, seconds: float) -> str:
        """What the CLI writes within `seconds` (less if it ends)."""
        got, end = [], time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                break
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            got.append(chunk.decode("utf-8", errors="replace"))
        text = "".join(got)
        self.output += text
        return text

    def wait_for(self, needle: str, timeout: float = 120) -> None:
        end = time.monotonic() + timeout
        while needle not in self.output:
            if time.monotonic() > end:
                raise AssertionError(f"{needle!r} never appeared; screen:\n{self.screen.text}")
            if not self.read(0.2) and self._exited():
                raise AssertionError(f"exited before {needle!r}; screen:\n{self.screen.text}")

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    @property
    def screen(self) -> Screen:
        return Screen().feed(self.output)

    def finish(self, timeout: float = 120) -> int:
        end = time.monotonic() + timeout
        while not self._exited():
            if time.monotonic() > end:
                os.kill(self.pid, 9)
                raise AssertionError(f"still running; screen:\n{self.screen.text}")
            self.read(0.2)
        self.read(0.5)
        os.close(self.fd)
        assert self.returncode is not None
        return self.returncode

    def _exited(self) -> bool:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode is not None
