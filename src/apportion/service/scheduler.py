"""The scheduler: load a snapshot -> run_cycle -> apply_plan -> commit.

Three parts, joined here by :class:`Scheduler`:

- ``service/lease.py`` — the lease: the holder identity, acquiring and
  renewing the lease row, the fencing token (+1 at every change of holder);
- ``service/cycle_runner.py`` — the cycle runner: per organization, a snapshot
  -> the engine's plan -> the states it makes (optimistic twice, then under the
  org's lock);
- ``service/plan_committer.py`` — the plan committer: a plan is written in one
  transaction only if this instance still holds the token it acquired (the
  lease re-read inside the transaction, row-locked on PostgreSQL) and only if
  the snapshot the plan came from is still current (the organization's
  scheduling version); otherwise it is dropped and recomputed.

The names other modules and tests use (``Scheduler``, ``CycleOutcome``,
``default_holder``, ``LEASE``, ``_run``) stay importable from here.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from apportion.engine.apply import Applied
from apportion.engine.plan import Plan
from apportion.service.cycle_runner import CycleRunner
from apportion.service.cycle_runner import run_engine as _run
from apportion.service.lease import LEASE as LEASE
from apportion.service.lease import Lease
from apportion.service.lease import default_holder as default_holder
from apportion.service.metrics import Metrics
from apportion.service.plan_committer import CycleOutcome as CycleOutcome
from apportion.service.plan_committer import PlanCommitter
from apportion.service.snapshots import Loaded, StateCache
from apportion.store.db import Database, Session

__all__ = ["LEASE", "CycleOutcome", "Scheduler", "_run", "default_holder"]


class Scheduler:
    """One scheduler instance, named ``holder``: its lease, cycle runner and
    plan committer."""

    def __init__(
        self, db: Database, holder: str, *, lease_ttl: float = 15.0,
        metrics: Metrics | None = None, clock: Callable[[], float] = time.time,
    ) -> None:
        self.db = db
        self.holder = holder
        self.lease_ttl = lease_ttl
        self.metrics = metrics
        self.clock = clock
        self.lease = Lease(db, holder, ttl=lease_ttl, clock=clock)
        self.runner = CycleRunner(db, clock=clock)
        self.committer = PlanCommitter(self.lease, metrics=metrics, clock=clock)

    @property
    def token(self) -> int | None:
        """The fencing token this instance holds (None: it does not lead)."""
        return self.lease.token

    @token.setter
    def token(self, value: int | None) -> None:
        self.lease.token = value

    @property
    def cache(self) -> StateCache:
        return self.runner.cache

    # -- the lease --------------------------------------------------------------
    def acquire(self) -> bool:
        """Take or renew the lease; True while this instance is the leader."""
        return self.lease.acquire()

    def release(self) -> None:
        self.lease.release()

    # -- cycles ------------------------------------------------------------------
    def orgs(self) -> list[int]:
        return self.runner.orgs()

    def run_org(self, org_id: int) -> CycleOutcome:
        """One cycle for ``org_id``: optimistic twice, then under the org's lock."""
        # ``_run`` is looked up here at each call, so that replacing this module's
        # ``_run`` (tests add decisions to the engine's plan) reaches the runner.
        return self._committed(self.runner.run_org(org_id, self._commit, _run))

    def _committed(self, outcome: CycleOutcome) -> CycleOutcome:
        """After the transaction committed: remember the entitlements written."""
        return self.committer.committed(outcome)

    def _commit(
        self, session: Session, org_id: int, loaded: Loaded, plan: Plan, started: float,
        applied: Applied | None = None,
    ) -> CycleOutcome:
        return self.committer.commit(session, org_id, loaded, plan, started, applied)
