"""The control plane: the database, settings, metrics, token verifier, change
feed and the scheduler loop of one server process, started and stopped together.

On PostgreSQL the process also listens (``store/notify.py``) for what other
processes commit: new events and log chunks wake this process's streams, a
revoked token leaves its token cache, and a change of scheduling input wakes its
scheduler loop (which acts on it only while it holds the lease).
"""

from __future__ import annotations

import logging

from apportion.clock import SYSTEM_CLOCK, Clock
from apportion.service.changes import ChangeFeed, events_topic, logs_topic
from apportion.service.loop import SchedulerLoop
from apportion.service.metrics import Metrics
from apportion.service.scheduler import default_holder
from apportion.service.settings import Settings
from apportion.service.tokens import TokenVerifier, bootstrap
from apportion.store import notify
from apportion.store.db import Database

log = logging.getLogger("apportion.server")
#: seconds a revocation waits for the other server processes to drop the token
ACK_TIMEOUT = 2.0


class ControlPlane:
    def __init__(self, settings: Settings, clock: Clock = SYSTEM_CLOCK) -> None:
        self.settings = settings
        #: the clock of the scheduler loop, the silence sweep, heartbeats and the rate limiter
        self.clock = clock
        self.db = Database(settings.database_url, sqlite_synchronous=settings.sqlite_synchronous,
                           pg_idle_timeout=settings.pg_idle_timeout)
        self.metrics = Metrics(self.db)
        self.tokens = TokenVerifier(self.db)
        self.changes = ChangeFeed()
        holder = settings.holder or default_holder(settings.database_url)
        self.loop = SchedulerLoop(self.db, settings, holder, self.metrics, clock)
        self.bootstrap_token: str | None = None
        self.listener: notify.PgListener | None = None
        if not self.db.is_sqlite:
            # Until the listener runs, another process's revocation would not reach
            # the cache: verify every request against the database.
            self.tokens.use_cache = False
            self.listener = notify.PgListener(self.db.url, self._on_notify,
                                              self._on_listening)

    def start(self) -> None:
        """Migrate, bootstrap the first organization, listen, start the scheduler."""
        self.db.migrate()
        self.bootstrap_token = bootstrap(
            self.db, self.settings.bootstrap_org, self.settings.bootstrap_token
        )
        if self.listener is not None:
            self.listener.start()
        if self.settings.run_scheduler:
            self.loop.start()

    def stop(self) -> None:
        # also without a scheduler thread: cycles run by hand (loop.tick) took the
        # lease, and the next process must not wait lease_ttl to schedule
        self.loop.stop()
        if self.listener is not None:
            self.listener.stop()
        self.db.dispose()

    def poke(self) -> None:
        """Something the scheduler cares about changed: run a cycle soon."""
        self.loop.poke()

    @property
    def notify_state(self) -> str:
        """``listening`` (PostgreSQL, LISTEN connected), ``reconnecting``, or ``polling``
        (SQLite: streams poll; nothing from other processes is heard)."""
        if self.listener is None:
            return "polling"
        return "listening" if self.changes.live else "reconnecting"

    def token_changed(self, token_id: str, *, wait: bool = True) -> None:
        """A token was revoked through this process: drop it from the cache here
        and, on PostgreSQL, wait (at most ``ACK_TIMEOUT`` s) until every listening
        server process has acknowledged dropping it, so that the next request to
        any of them is refused (``store/notify.py``)."""
        self.tokens.forget(token_id)
        if self.listener is None or not wait:
            return
        with self.db.read() as session:
            pids = notify.listener_pids(session)
        if not self.listener.wait_acks(token_id, pids, ACK_TIMEOUT):
            log.warning("revocation of token %s: not every server process acknowledged "
                        "within %.0f s", token_id, ACK_TIMEOUT)

    def _on_notify(self, channel: str, payload: str) -> None:
        if channel == notify.TOKENS:
            self.tokens.forget(payload)
        elif channel == notify.EVENTS:
            self.changes.publish(events_topic(int(payload)))
        elif channel == notify.LOGS:
            self.changes.publish(logs_topic(int(payload)))
        elif channel == notify.POKE:
            self.loop.poke()

    def _on_listening(self, live: bool) -> None:
        # (Re)connected: revocations and changes sent meanwhile were missed.
        self.tokens.clear()
        self.tokens.use_cache = live
        self.changes.set_live(live)
        if live:
            self.loop.poke()
