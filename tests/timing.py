"""Time in tests: wait for a condition with a bounded poll, or drive a clock.

Never sleep a fixed time and hope the event happened: ``wait_until`` polls a
condition and fails with what it waited for once ``timeout`` passes. To make
time pass on purpose (an agent's silence, a grace period, a job's duration)
hand the code under test a :class:`ManualClock` and ``advance`` it.

Every deadline of ``wait_until`` is multiplied by :data:`SLACK` (3 unless
``APPORTION_TEST_SLACK`` says otherwise). A test names the time the event
normally takes with room to spare; the suite runs in parallel (pytest-xdist) on
shared 2-core machines, where a server start or a scheduler cycle can take
several times as long. A longer deadline cannot make a test pass that should
fail: the poll returns as soon as the condition holds and fails only when it
never does. Tests that assert something does *not* happen within a time do not
use ``wait_until``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: factor on every ``wait_until`` deadline (see the module's docstring)
SLACK = float(os.environ.get("APPORTION_TEST_SLACK", "3"))


def wait_until(condition: Callable[[], T], *, timeout: float = 10.0, interval: float = 0.05,
               what: str = "the condition") -> T:
    """Poll ``condition`` every ``interval`` s until it returns something truthy
    (returned); raise AssertionError after ``timeout`` × :data:`SLACK` s of real time."""
    limit = timeout * SLACK
    end = time.monotonic() + limit
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {limit:g} s ({timeout:g} s x {SLACK:g}) "
                                 f"waiting for {what}")
        time.sleep(interval)


class ManualClock:
    """A :class:`apportion.clock.Clock` that a test drives.

    ``frozen=True`` (the default): time stands still until :meth:`advance`;
    ``sleep`` advances it, ``wait`` returns at once (after yielding the CPU
    briefly) with the event's state. Use it where the test calls the code itself.

    ``frozen=False``: real time plus the offset that :meth:`advance` adds; waits
    are real. Use it for code running in background threads (an agent loop
    against a live server) where the test only needs to make time jump.
    """

    def __init__(self, start: float | None = None, *, frozen: bool = True) -> None:
        self.is_frozen = frozen
        self._wall0 = time.time() if start is None else start
        self._mono0 = time.monotonic()
        self._offset = 0.0
        self._lock = threading.Lock()

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._offset += seconds

    def _elapsed(self) -> float:
        real = 0.0 if self.is_frozen else time.monotonic() - self._mono0
        with self._lock:
            return real + self._offset

    def now(self) -> float:
        return self._wall0 + self._elapsed()

    def monotonic(self) -> float:
        return self._mono0 + self._elapsed()

    def sleep(self, seconds: float) -> None:
        if self.is_frozen:
            self.advance(max(0.0, seconds))
            time.sleep(0)
        else:
            time.sleep(max(0.0, seconds))

    def wait(self, event: threading.Event, timeout: float) -> bool:
        if self.is_frozen:
            return event.wait(min(max(0.0, timeout), 0.001))
        return event.wait(max(0.0, timeout))
