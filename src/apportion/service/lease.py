"""The scheduler's lease: who may commit plans.

Exactly one instance acts at a time: a lease row in the database names its
holder and carries a fencing token (+1 at every change of holder). A holder
renews the lease before it expires; every plan commit re-reads the row inside
its own transaction (row-locked on PostgreSQL) through :meth:`Lease.check_fence`,
which refuses the commit unless this instance still holds the token it
acquired.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Callable
from pathlib import Path

from apportion.service.errors import LostLease
from apportion.store.db import Database, IntegrityError, Session
from apportion.store.repos import security as sec_repo

log = logging.getLogger("apportion.scheduler")
LEASE = "scheduler"


def default_holder(database_url: str) -> str:
    """The scheduler's holder identity when ``APPORTION_HOLDER`` is not set.

    With an SQLite file it is kept next to the database (``<file>.holder``), so a
    crashed and restarted server proves it is the same holder and takes its own
    lease back at once instead of waiting out the TTL. Otherwise (PostgreSQL,
    in-memory) one per process, as several servers may share the database.
    """
    per_process = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
    prefix = "sqlite:///"
    path = database_url[len(prefix):] if database_url.startswith(prefix) else ""
    if not path or path == ":memory:" or "mode=memory" in database_url:
        return per_process
    file = Path(path.split("?", 1)[0] + ".holder")
    try:
        if not file.exists():
            file.write_text(f"{socket.gethostname()}:{uuid.uuid4().hex[:12]}\n")
        return file.read_text().strip() or per_process
    except OSError:
        return per_process


class Lease:
    """The lease as ``holder`` sees it: ``token`` is the fencing token it holds
    (None while it does not lead)."""

    def __init__(
        self, db: Database, holder: str, *, ttl: float, clock: Callable[[], float]
    ) -> None:
        self.db = db
        self.holder = holder
        self.ttl = ttl
        self.clock = clock
        self.token: int | None = None
        #: True until this process first holds the lease: a restarted process with
        #: the same (persisted) holder identity may take its own lease at once
        self._is_fresh = True

    def acquire(self) -> bool:
        """Take or renew the lease; True while this instance is the leader."""
        now = self.clock()
        try:
            with self.db.write() as session:
                row = sec_repo.lock_lease(session, LEASE)
                if row is None:
                    sec_repo.add_lease(session, LEASE, holder=self.holder, token=1,
                                       expires_at=now + self.ttl)
                    self.token = 1
                    self._is_fresh = False
                    return True
                if row.holder == self.holder and row.token == self.token:
                    sec_repo.renew_lease(row, now + self.ttl)
                    return True
                # Expired; or this process was restarted (same holder identity, never
                # held the lease yet): take it at once with a new token, so whatever a
                # previous incarnation still tries to commit is refused by the fence.
                if row.expires_at <= now or (row.holder == self.holder and self._is_fresh):
                    self.token = sec_repo.take_lease(row, self.holder, now + self.ttl)
                    self._is_fresh = False
                    log.info("scheduler %s took the lease (fencing token %d)",
                             self.holder, self.token)
                    return True
                self.token = None
                return False
        except IntegrityError:  # another instance inserted the first lease row
            self.token = None
            return False

    def release(self) -> None:
        with self.db.write() as session:
            row = sec_repo.lock_lease(session, LEASE)
            if row is not None and row.holder == self.holder and row.token == self.token:
                sec_repo.renew_lease(row, 0.0)
        self.token = None

    def check_fence(self, session: Session) -> int:
        """The fencing token, read again in ``session`` (the commit's transaction,
        the row locked until its end); :class:`LostLease` unless this instance
        still holds it."""
        row = sec_repo.lock_lease(session, LEASE)
        if row is None or self.token is None or row.holder != self.holder or (
            row.token != self.token
        ):
            raise LostLease(f"scheduler {self.holder} no longer holds the lease")
        return row.token
