"""Output capture that keeps a command's head and tail in bounded memory.

Build and test tools print what matters first (the command) and last (the verdict); a command
that prints gigabytes must not exhaust the worker, so only the two ends are kept.
"""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Callable


class Capture:
    """Keeps the first and the last `keep` bytes of a stream, and counts the rest."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.lock = threading.Lock()
        self._reading = threading.Lock()  # one reader at a time: the pump, or a catch-up
        self._ended = False  # the stream ended (its descriptor may be closed and reused)

    def feed(self, chunk: bytes) -> None:
        with self.lock:
            self.total += len(chunk)
            room = self.keep - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self.tail += chunk
                if len(self.tail) > 2 * self.keep:
                    del self.tail[:-self.keep]

    def text(self, cap: int, redact: Callable[[str], str]) -> str:
        """The output as text: redacted, at most `cap` chars, the middle elided."""
        with self.lock:
            tail = bytes(self.tail[-self.keep:])
            head = bytes(self.head)
            dropped = self.total - len(head) - len(tail)
        if dropped == 0:
            return _elide(redact((head + tail).decode("utf-8", "replace")), cap)
        head_text = redact(head.decode("utf-8", "replace"))
        tail_text = redact(tail.decode("utf-8", "replace"))
        keep_head = cap // 2
        keep_tail = cap - keep_head
        cut = max(0, len(head_text) - keep_head) + max(0, len(tail_text) - keep_tail) + dropped
        return (head_text[:keep_head] + _marker(cut)
                + (tail_text[-keep_tail:] if keep_tail else ""))

    def pump(self, fd: int, on_chunk: Callable[[bytes], None] | None = None) -> None:
        """Read the pipe `fd` to its end (run in a thread of its own), showing each chunk to
        `on_chunk` as it arrives. `catch_up` may read for it from another thread meanwhile:
        each read and the `on_chunk` of what it read happen under one lock, so every chunk
        is shown once, in order."""
        try:
            os.set_blocking(fd, False)
            waiting = select.poll()
            waiting.register(fd, select.POLLIN)
            while True:
                waiting.poll()  # readable, or the end
                if not self.catch_up(fd, on_chunk):
                    return
        except (OSError, ValueError):
            pass  # the pipe was closed under us
        finally:
            with self._reading:
                self._ended = True

    def catch_up(self, fd: int, on_chunk: Callable[[bytes], None] | None = None) -> bool:
        """Read what the stream holds now, without waiting, showing it to `on_chunk` before
        returning; False once the stream has ended."""
        with self._reading:
            while not self._ended:
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    return True
                if not chunk:
                    self._ended = True
                    break
                self.feed(chunk)
                if on_chunk is not None:
                    on_chunk(chunk)
            return False


def _marker(count: int) -> str:
    return f"\n... [{count} chars truncated] ...\n"


def _elide(text: str, cap: int) -> str:
    """`text` if it fits in `cap` chars, else its head and tail around a truncation marker."""
    if len(text) <= cap:
        return text
    keep_head = cap // 2
    keep_tail = cap - keep_head
    return (text[:keep_head] + _marker(len(text) - cap)
            + (text[-keep_tail:] if keep_tail else ""))
