"""Wake-ups for the streams (SSE, ``logs --follow``, the dashboard's live feed).

A stream marks the topics it follows (``events:<org id>``, ``logs:<workload id>``),
reads, then waits until one of them changes. On PostgreSQL a change is
published by the process's ``LISTEN`` connection (``store/notify.py``), so a
stream wakes as soon as any process commits what it follows; the wait still ends
after ``FALLBACK_SECONDS`` (a safety net, and the keep-alive tick). Where nothing
publishes — SQLite, or while the ``LISTEN`` connection is down — a wait is the
old poll interval, ``POLL_SECONDS``.

The mark closes the race between a read and the wait: a change published after
the mark and before the wait ends the wait at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Sequence

POLL_SECONDS = 0.5
FALLBACK_SECONDS = 5.0
#: topics remembered at most; beyond it the book is cleared (a cleared topic
#: reads as changed: a spurious wake-up, never a lost one)
_MAX_TOPICS = 10_000


def events_topic(org_id: int) -> str:
    return f"events:{org_id}"


def logs_topic(workload_id: int) -> str:
    return f"logs:{workload_id}"


class ChangeFeed:
    """Per-topic change counters and the streams waiting on them; ``publish`` may
    be called from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counter = 0
        self._epoch = 0
        self._seen: dict[str, int] = {}
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}
        #: True while a publisher is connected (then waits need no polling)
        self.live = False

    def mark(self, topics: Sequence[str]) -> tuple[int, ...]:
        """Where ``topics`` stand now; pass it to :meth:`wait` after reading."""
        with self._lock:
            return (self._epoch, *(self._seen.get(t, 0) for t in topics))

    async def wait(self, topics: Sequence[str], mark: tuple[int, ...],
                   poll: float = POLL_SECONDS) -> None:
        """Until one of ``topics`` changed since ``mark`` (at once if it already
        did), or ``poll`` seconds (nothing publishes) / ``FALLBACK_SECONDS``
        (a publisher is live) passed."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        with self._lock:
            now = (self._epoch, *(self._seen.get(t, 0) for t in topics))
            if now != mark:
                return
            for t in topics:
                self._waiters.setdefault(t, set()).add(fut)
            timeout = FALLBACK_SECONDS if self.live else poll
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            pass
        finally:
            with self._lock:
                for t in topics:
                    waiting = self._waiters.get(t)
                    if waiting is not None:
                        waiting.discard(fut)
                        if not waiting:
                            del self._waiters[t]

    def publish(self, topic: str) -> None:
        """``topic`` changed: wake its streams."""
        with self._lock:
            self._counter += 1
            if len(self._seen) >= _MAX_TOPICS:
                self._seen.clear()
                self._epoch += 1
            self._seen[topic] = self._counter
            woken = list(self._waiters.get(topic, ()))
        _wake(woken)

    def publish_all(self) -> None:
        """Anything may have changed (a publisher (re)connected): wake every stream."""
        with self._lock:
            self._epoch += 1
            self._seen.clear()
            woken = [f for waiting in self._waiters.values() for f in waiting]
        _wake(woken)

    def set_live(self, live: bool) -> None:
        self.live = live
        self.publish_all()


def _wake(futures: list[asyncio.Future[None]]) -> None:
    for fut in futures:
        with contextlib.suppress(RuntimeError):  # its event loop has closed
            fut.get_loop().call_soon_threadsafe(_resolve, fut)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
