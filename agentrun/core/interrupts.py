"""The interrupts (SIGINT, SIGTERM) the CLI's handler took, by name.

The handler raises, and Python ignores an exception raised inside a weakref callback or a
destructor ("Exception ignored in ..."): a signal that lands there would be lost, and the command
would go on. A run, once its own handlers are in place (`run/session.cancel_on_signals`), acts
on what is recorded here, so such a signal still ends it as interrupted.
"""

from __future__ import annotations

RECEIVED: list[str] = []
