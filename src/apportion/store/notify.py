"""PostgreSQL ``LISTEN``: one connection per server process hears what other
transactions (of this or any other process on the database) committed.

The notifications are sent by the triggers of migration 0007 at commit:
``apportion_events`` (payload: organization id), ``apportion_logs`` (workload id),
``apportion_tokens`` (token id) and ``apportion_poke`` (organization id). The
listener runs in a daemon thread with its own autocommit connection, hands each
notification to ``on_notify(channel, payload)`` and reports with
``on_state(True)`` each time it (re)starts listening — notifications sent while it
was not listening are lost, so the caller then treats everything as changed — and
``on_state(False)`` when the connection is lost (it reconnects with a backoff).

Revocations are acknowledged: after ``on_notify`` has handled an
``apportion_tokens`` notification (the token is out of this process's cache),
the listener sends ``apportion_acks`` with the token id. The process that
revoked waits (:meth:`PgListener.wait_acks`) until every listening process —
the sessions named ``apportion-listen`` in ``pg_stat_activity`` — has
acknowledged, so the next request to any process is refused.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

log = logging.getLogger("apportion.notify")

EVENTS = "apportion_events"
LOGS = "apportion_logs"
TOKENS = "apportion_tokens"
POKE = "apportion_poke"
ACKS = "apportion_acks"
CHANNELS = (EVENTS, LOGS, TOKENS, POKE, ACKS)
#: the listener's session name in ``pg_stat_activity``
APPLICATION_NAME = "apportion-listen"
#: seconds an acknowledgement is kept for a waiter that has not asked yet
_ACK_KEEP = 60.0


def listener_pids(session: Session) -> set[int]:
    """The backend pids of every listening server process on this database."""
    rows = session.execute(text(
        "SELECT pid FROM pg_stat_activity WHERE application_name = :name "
        "AND datname = current_database()"), {"name": APPLICATION_NAME})
    return {int(pid) for (pid,) in rows}


def libpq_url(url: str) -> str:
    """A SQLAlchemy PostgreSQL URL as psycopg's ``conninfo`` (driver name dropped)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class PgListener:
    """``LISTEN`` on :data:`CHANNELS` in a background thread."""

    def __init__(self, url: str, on_notify: Callable[[str, str], None],
                 on_state: Callable[[bool], None], *, poll: float = 1.0) -> None:
        self.conninfo = libpq_url(url)
        self.on_notify = on_notify
        self.on_state = on_state
        #: how often the thread looks at the stop flag while no notification comes
        self.poll = poll
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: token id -> (first ack time, backend pids that acknowledged its change)
        self._acks: dict[str, tuple[float, set[int]]] = {}
        self._acked = threading.Condition()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="apportion-listen", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * self.poll + 1)

    def _run(self) -> None:
        import psycopg

        backoff = 0.2
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.conninfo, autocommit=True, connect_timeout=10,
                                     application_name=APPLICATION_NAME) as conn:
                    for channel in CHANNELS:
                        conn.execute(f"LISTEN {channel}")
                    backoff = 0.2
                    self.on_state(True)
                    while not self._stop.is_set():
                        # stop_after: leave the generator (it holds the connection)
                        # to send acknowledgements; later ones wait in its backlog
                        notes = list(conn.notifies(timeout=self.poll, stop_after=1))
                        revoked = []
                        for note in notes:
                            if note.channel == ACKS:
                                self._ack(note.payload, note.pid)
                                continue
                            self._deliver(note.channel, note.payload)
                            if note.channel == TOKENS:
                                revoked.append(note.payload)
                        for token_id in dict.fromkeys(revoked):
                            conn.execute("SELECT pg_notify(%s, %s)", (ACKS, token_id))
            except Exception:
                if self._stop.is_set():
                    break
                log.warning("LISTEN connection lost; streams poll until it is back",
                            exc_info=True)
            self.on_state(False)
            self._stop.wait(backoff)
            backoff = min(backoff * 2, 5.0)

    def _deliver(self, channel: str, payload: str) -> None:
        try:
            self.on_notify(channel, payload)
        except Exception:  # a subscriber's bug must not end the listener
            log.exception("notification %s %r failed", channel, payload)

    def _ack(self, token_id: str, pid: int) -> None:
        now = time.monotonic()
        with self._acked:
            for key in [k for k, (at, _p) in self._acks.items() if now - at > _ACK_KEEP]:
                del self._acks[key]
            self._acks.setdefault(token_id, (now, set()))[1].add(pid)
            self._acked.notify_all()

    def wait_acks(self, token_id: str, pids: set[int], timeout: float) -> bool:
        """Until the listeners ``pids`` have acknowledged the change of ``token_id``
        (True), or ``timeout`` seconds passed (False)."""
        deadline = time.monotonic() + timeout
        with self._acked:
            while not pids <= self._acks.get(token_id, (0.0, set()))[1]:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._acked.wait(left)
            self._acks.pop(token_id, None)
            return True
