"""The clock of the layers around the engine: the service's scheduler loop, the
silence sweep, the rate limiter and the agent read time only through a
:class:`Clock`, so a test can drive it (jump past a timeout, hold a deadline)
instead of sleeping and hoping. The engine never reads a clock: ``now``
arrives in its snapshot.

Production code takes ``SYSTEM_CLOCK`` by default.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """Where time comes from, and how to wait for it."""

    def now(self) -> float:
        """Wall-clock seconds since the epoch (stored in rows, compared across processes)."""
        ...

    def monotonic(self) -> float:
        """Seconds for measuring intervals inside one process."""
        ...

    def sleep(self, seconds: float) -> None:
        """Let ``seconds`` pass."""
        ...

    def wait(self, event: threading.Event, timeout: float) -> bool:
        """Wait until ``event`` is set or ``timeout`` seconds pass; True if it is set."""
        ...


class SystemClock:
    """The real clock: ``time.time``, ``time.monotonic``, real sleeps and waits."""

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    def wait(self, event: threading.Event, timeout: float) -> bool:
        return event.wait(max(0.0, timeout))


SYSTEM_CLOCK: Clock = SystemClock()
