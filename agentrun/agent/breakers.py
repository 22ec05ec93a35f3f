"""Circuit breakers and stuck detection: the counters that keep an agent out of failure loops.

Level 1: `reflection_after_errors` consecutive tool errors force a reflection turn (the model
must explain what is wrong, with no tools offered). Level 2: `max_backtracks` backtracks end the
attempt. Separately, `max_consecutive_failures` steps in a row whose calls all failed end it too
(the terminator reads `failed_steps`); a backtrack does not reset that count, a success does.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any


@dataclass
class CircuitBreaker:
    reflection_after_errors: int = 3
    max_backtracks: int = 5
    consecutive_errors: int = 0  # tool results, reset by a success or a backtrack
    failed_steps: int = 0  # steps whose calls all failed, reset by a success only
    backtracks: int = 0
    reflected: bool = False  # a reflection was forced during the current error streak

    def record(self, is_error: bool) -> None:
        if is_error:
            self.consecutive_errors += 1
        else:
            self.consecutive_errors = 0
            self.reflected = False

    def record_step(self, all_failed: bool) -> None:
        self.failed_steps = self.failed_steps + 1 if all_failed else 0

    def should_reflect(self) -> bool:
        """Level 1: enough errors in a row and no reflection forced yet in this streak."""
        return (not self.reflected
                and self.consecutive_errors >= self.reflection_after_errors)

    def reflection_forced(self) -> None:
        self.reflected = True

    def backtracked(self) -> None:
        self.backtracks += 1
        self.consecutive_errors = 0
        self.reflected = False

    @property
    def tripped(self) -> bool:
        """Level 2: too many backtracks, the attempt is beyond recovery."""
        return self.backtracks >= self.max_backtracks


def call_signature(name: str, arguments: dict[str, Any], content: str, is_error: bool) -> str:
    """A short fingerprint of one call and its result, to spot exact repetitions."""
    raw = json.dumps([name, arguments, content, is_error], sort_keys=True, default=str)
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class StuckDetector:
    """Same tool, same arguments, same result `repeats` times in a row: no progress."""

    repeats: int = 3
    _recent: deque[tuple[str, str]] = field(default_factory=deque)

    def record(self, call_id: str, signature: str) -> list[str] | None:
        """Remember a call; return the ids of the repeated run when it makes the agent stuck."""
        if self._recent and self._recent[-1][1] != signature:
            self._recent.clear()
        self._recent.append((call_id, signature))
        if len(self._recent) >= self.repeats:
            run = [cid for cid, _ in self._recent]
            self._recent.clear()
            return run
        return None

    def clear(self) -> None:
        self._recent.clear()
