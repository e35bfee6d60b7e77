"""The control plane: the database, settings, metrics, token verifier and the
scheduler loop of one server process, started and stopped together."""

from __future__ import annotations

import logging

from apportion.clock import SYSTEM_CLOCK, Clock
from apportion.service.loop import SchedulerLoop
from apportion.service.metrics import Metrics
from apportion.service.scheduler import default_holder
from apportion.service.settings import Settings
from apportion.service.tokens import TokenVerifier, bootstrap
from apportion.store.db import Database

log = logging.getLogger("apportion.server")


class ControlPlane:
    def __init__(self, settings: Settings, clock: Clock = SYSTEM_CLOCK) -> None:
        self.settings = settings
        #: the clock of the scheduler loop, the silence sweep, heartbeats and the rate limiter
        self.clock = clock
        self.db = Database(settings.database_url, sqlite_synchronous=settings.sqlite_synchronous,
                           pg_idle_timeout=settings.pg_idle_timeout)
        self.metrics = Metrics(self.db)
        self.tokens = TokenVerifier(self.db)
        holder = settings.holder or default_holder(settings.database_url)
        self.loop = SchedulerLoop(self.db, settings, holder, self.metrics, clock)
        self.bootstrap_token: str | None = None

    def start(self) -> None:
        """Migrate, bootstrap the first organization, start the scheduler."""
        self.db.migrate()
        self.bootstrap_token = bootstrap(
            self.db, self.settings.bootstrap_org, self.settings.bootstrap_token
        )
        if self.settings.run_scheduler:
            self.loop.start()

    def stop(self) -> None:
        if self.settings.run_scheduler:
            self.loop.stop()
        self.db.dispose()

    def poke(self) -> None:
        """Something the scheduler cares about changed: run a cycle soon."""
        self.loop.poke()
