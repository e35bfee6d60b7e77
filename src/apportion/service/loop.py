"""The scheduler loop: a background thread that runs cycles when poked
(submissions, cancellations, reports, node changes) and on a timer.

Per wake-up: take or renew the lease; if leader, sweep silent agents, then
run cycles for every organization until a cycle changes nothing (at most
``MAX_CYCLES`` in a row, so a busy org cannot starve the others).

Every server process runs this loop; only the lease holder commits. A process
that does not hold the lease (a standby) ignores pokes and wakes on its timer
only, for one short transaction that finds the lease held; on PostgreSQL the
leader is poked by the ``NOTIFY`` of a change committed through any process.
"""

from __future__ import annotations

import logging
import threading

from apportion.clock import SYSTEM_CLOCK, Clock
from apportion.service import agents
from apportion.service.errors import LostLease
from apportion.service.metrics import Metrics
from apportion.service.scheduler import Scheduler
from apportion.service.settings import Settings
from apportion.store.db import Database
from apportion.store.repos import security as sec_repo

log = logging.getLogger("apportion.scheduler")
MAX_CYCLES = 20


class SchedulerLoop:
    def __init__(self, db: Database, settings: Settings, holder: str, metrics: Metrics,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.db = db
        self.settings = settings
        #: every reading of time here (lease, silence sweep, purge, waits) goes through it
        self.clock = clock
        self.scheduler = Scheduler(db, holder, lease_ttl=settings.lease_ttl, metrics=metrics,
                                   clock=clock.now)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_cycle_at: float | None = None
        self._last_purge = 0.0
        self._last_sweep = 0.0
        self._lease_until = 0.0
        #: seconds the last tick spent in cycles (the next one waits twice that, so
        #: under a stream of triggers the scheduler takes at most a third of the CPU)
        self._busy = 0.0

    @property
    def is_leader(self) -> bool:
        return self.scheduler.token is not None

    def poke(self) -> None:
        # A standby cannot schedule, and each of its tries for the lease locks the
        # row every commit of the leader checks: it tries on its timer only
        # (every min(cycle interval, TTL / 3)), however many changes it hears of.
        if self.is_leader:
            self._wake.set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="apportion-scheduler",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        try:
            if self.is_leader:
                self.scheduler.release()
        except Exception:  # the database may already be gone at shutdown
            log.debug("lease release failed", exc_info=True)

    def _run(self) -> None:
        wait = min(self.settings.cycle_interval, self.settings.lease_ttl / 3)
        self._wake.set()  # the first tick at once: a restarted server schedules again now
        while not self._stop.is_set():
            self.clock.wait(self._wake, wait)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self.tick()
            except Exception:
                log.exception("scheduler tick failed")
            self.clock.wait(self._stop, max(self.settings.cycle_min_gap, 2 * self._busy))

    def tick(self) -> int:
        """One wake-up; returns the number of committed cycles."""
        started = self.clock.monotonic()
        try:
            return self._tick()
        finally:
            self._busy = self.clock.monotonic() - started

    def _tick(self) -> int:
        now = self.clock.now()
        # Renew the lease only when a third of it is used up (each renewal is a write).
        renew_at = self._lease_until - 2 * self.settings.lease_ttl / 3
        if self.scheduler.token is None or now > renew_at:
            if not self.scheduler.acquire():
                return 0
            self._lease_until = now + self.settings.lease_ttl
        sweep = now - self._last_sweep >= min(5.0, self.settings.agent_timeout / 4)
        if sweep:
            self._last_sweep = now
        committed = 0
        for org_id in self.scheduler.orgs():
            if sweep:
                with self.db.write() as session:
                    agents.sweep_silent_agents(session, org_id, self.settings.agent_timeout,
                                               now=now)
            try:
                for _ in range(MAX_CYCLES):
                    outcome = self.scheduler.run_org(org_id)
                    self.last_cycle_at = self.clock.now()
                    if not outcome.committed:
                        break
                    committed += 1
            except LostLease:
                log.warning("lost the scheduler lease during a cycle")
                self.scheduler.token = None
                return committed
        self._purge()
        return committed

    def _purge(self) -> None:
        now = self.clock.now()
        if now - self._last_purge < 600:
            return
        self._last_purge = now
        with self.db.write() as session:
            sec_repo.purge_idempotency(session, now - self.settings.idempotency_ttl)
