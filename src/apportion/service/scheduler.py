"""The scheduler: load a snapshot -> run_cycle -> apply_plan -> commit.

Exactly one instance acts at a time: a lease row in the database carries a
fencing token (+1 at every change of holder). Every plan commit re-reads the
lease inside its own transaction (row-locked on PostgreSQL) and writes only if
this instance still holds the token it acquired, and only if the snapshot the
plan came from is still current (the organization's scheduling version);
otherwise the plan is dropped and recomputed.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from apportion.domain.lifecycle import Status, WorkloadState
from apportion.engine.apply import Applied, apply_plan
from apportion.engine.plan import DecisionKind, Plan
from apportion.engine.snapshot import CycleConfig
from apportion.service.errors import LostLease, StaleSnapshot
from apportion.service.events import event_row, lifecycle_rows, write_events
from apportion.service.gcpause import paused_gc
from apportion.service.metrics import Metrics
from apportion.service.snapshots import Loaded, StateCache, load_snapshot
from apportion.store import codec
from apportion.store.db import Database
from apportion.store.repos import orgs as repo
from apportion.store.repos import security as sec_repo
from apportion.store.repos import workloads as wl_repo

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


@dataclass(frozen=True, slots=True)
class CycleOutcome:
    committed: bool
    changed: int
    decisions: int
    duration_s: float


class Scheduler:
    """One scheduler instance, named ``holder``."""

    def __init__(
        self, db: Database, holder: str, *, lease_ttl: float = 15.0,
        metrics: Metrics | None = None, clock: Callable[[], float] = time.time,
    ) -> None:
        self.db = db
        self.holder = holder
        self.lease_ttl = lease_ttl
        self.metrics = metrics
        self.clock = clock
        self.token: int | None = None
        self.cache = StateCache()
        #: entitlements last committed per org (a plan that changes only these commits too)
        self._shares: dict[int, object] = {}
        self._committing: tuple[int, object] | None = None
        #: True until this process first holds the lease: a restarted process with
        #: the same (persisted) holder identity may take its own lease at once
        self._is_fresh = True

    # -- the lease --------------------------------------------------------------
    def acquire(self) -> bool:
        """Take or renew the lease; True while this instance is the leader."""
        now = self.clock()
        try:
            with self.db.write() as session:
                row = sec_repo.lock_lease(session, LEASE)
                if row is None:
                    sec_repo.add_lease(session, LEASE, holder=self.holder, token=1,
                                       expires_at=now + self.lease_ttl)
                    self.token = 1
                    self._is_fresh = False
                    return True
                if row.holder == self.holder and row.token == self.token:
                    sec_repo.renew_lease(row, now + self.lease_ttl)
                    return True
                # Expired; or this process was restarted (same holder identity, never
                # held the lease yet): take it at once with a new token, so whatever a
                # previous incarnation still tries to commit is refused by the fence.
                if row.expires_at <= now or (row.holder == self.holder and self._is_fresh):
                    self.token = sec_repo.take_lease(row, self.holder, now + self.lease_ttl)
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

    def _check_fence(self, session: Session) -> int:
        row = sec_repo.lock_lease(session, LEASE)
        if row is None or self.token is None or row.holder != self.holder or (
            row.token != self.token
        ):
            raise LostLease(f"scheduler {self.holder} no longer holds the lease")
        return row.token

    # -- cycles ------------------------------------------------------------------
    def orgs(self) -> list[int]:
        with self.db.read() as session:
            return [o.id for o in repo.list_orgs(session)]

    def run_org(self, org_id: int) -> CycleOutcome:
        """One cycle for ``org_id``: optimistic twice, then under the org's lock."""
        for _attempt in range(2):
            started = time.perf_counter()
            with self.db.read() as session:
                loaded = load_snapshot(session, org_id, self.clock(), self.cache)
            plan = _run(loaded)
            applied = _apply(loaded, plan)  # pure: outside the write transaction
            try:
                with self.db.write() as session:
                    outcome = self._commit(session, org_id, loaded, plan, started, applied)
                return self._committed(outcome)
            except StaleSnapshot:
                continue
        started = time.perf_counter()
        with self.db.write() as session:
            repo.lock_org(session, org_id)
            loaded = load_snapshot(session, org_id, self.clock(), self.cache)
            plan = _run(loaded)
            outcome = self._commit(session, org_id, loaded, plan, started, _apply(loaded, plan))
        return self._committed(outcome)

    def _committed(self, outcome: CycleOutcome) -> CycleOutcome:
        """After the transaction committed: remember the entitlements written."""
        if outcome.committed and self._committing is not None:
            org_id, shares = self._committing
            self._shares[org_id] = shares
        self._committing = None
        return outcome

    def _commit(
        self, session: Session, org_id: int, loaded: Loaded, plan: Plan, started: float,
        applied: Applied | None = None,
    ) -> CycleOutcome:
        token = self._check_fence(session)
        snap = loaded.snapshot
        states = {w.id: w for w in snap.workloads}
        if applied is None:
            applied = apply_plan(states, snap.exiting, plan)
        duration = time.perf_counter() - started
        if self.metrics is not None:
            self.metrics.cycle_duration.observe(duration)
        shares = {p: dict(t) for p, t in plan.entitlements.items()}
        if (not applied.changed and applied.exiting == snap.exiting
                and self._shares.get(org_id) == shares):
            return CycleOutcome(False, 0, len(plan.decisions), duration)
        now = self.clock()
        if not repo.advance_if_current(session, org_id, snap.version, plan.cycle_id, now):
            raise StaleSnapshot(f"org {org_id} changed since version {snap.version}")
        self._write_states(session, org_id, states, applied, plan, loaded, now)
        sec_repo.add_cycle(session, org_id, plan.cycle_id, holder=self.holder,
                           fencing_token=token, snapshot_version=snap.version, at=now,
                           duration_ms=duration * 1000, decisions=len(plan.decisions))
        sec_repo.replace_entitlements(session, org_id, plan.entitlements)
        self._committing = (org_id, shares)
        return CycleOutcome(True, len(applied.changed), len(plan.decisions), duration)

    def _write_states(
        self, session: Session, org_id: int, old: dict[int, WorkloadState], applied: Applied,
        plan: Plan, loaded: Loaded, now: float,
    ) -> None:
        rows = {r.id: r for r in wl_repo.workloads_by_ids(session, org_id, applied.changed)}
        starts = {d.workload_id for d in plan.decisions if d.kind is DecisionKind.START}
        events: list[dict[str, object]] = []
        phys = loaded.devices
        for wid in applied.changed:
            new, before, row = applied.states[wid], old[wid], rows[wid]
            fresh = new.events[len(before.events):]
            new = phys.state(new, physical=True, known_attempts=len(before.attempts))
            wl_repo.save_state(row, new, now)
            held = len(new.placement) if new.status in (Status.STARTING, Status.RUNNING) else 0
            events += lifecycle_rows(org_id, wid, row.team, fresh, now, row.name,
                                     pool=new.pool, pods_running=held)
            if not fresh and new.reason != before.reason and new.reason is not None:
                events.append(event_row(
                    org_id, "workload.reason", cause=f"cycle {plan.cycle_id}",
                    message=new.reason.message, workload_id=wid, team=row.team,
                    attempt=new.attempt, status=new.status.value,
                    data={"code": new.reason.code.value}, at=now))
            if wid in starts and new.placement:
                wl_repo.add_decision(
                    session, org_id, kind="start", pool=new.pool or "", workload_id=wid,
                    attempt=new.attempt, placement=codec.placement_to_json(new.placement),
                    exec_=_exec(row.spec), created_at=now)
                if self.metrics is not None:
                    self.metrics.admission.labels(loaded.org_slug, row.team).observe(
                        max(0.0, now - loaded.submitted_at.get(wid, now)))
        for wid, entry in self._write_preemptions(session, org_id, old, applied, plan, loaded,
                                                  now):
            wl_repo.add_preemption(rows[wid], entry)
        write_events(session, events)
        wl_repo.clear_exiting(session, org_id)
        for e in applied.exiting:
            wl_repo.add_exiting(session, org_id, phys.exiting(e, physical=True))

    def _write_preemptions(
        self, session: Session, org_id: int, old: dict[int, WorkloadState], applied: Applied,
        plan: Plan, loaded: Loaded, now: float,
    ) -> list[tuple[int, dict[str, Any]]]:
        """Per preemption: the agent's instruction (``stop`` the run, or ``shrink``
        it: stop only the taken pods) and the metric (a shrink counts as a
        preemption of the victim's team); returns the entries of the victims'
        preemption histories, (victim id, entry) in order."""
        phys = loaded.devices
        entries: list[tuple[int, dict[str, Any]]] = []
        for p in applied.preemptions:
            victim = phys.state(old[p.victim], physical=True,
                                known_attempts=len(old[p.victim].attempts))
            placement = victim.placement
            if p.pods:
                placement = tuple(victim.placement[i] for i in sorted(p.pods))
            wl_repo.add_decision(
                session, org_id, kind="shrink" if p.pods else "stop", pool=victim.pool or "",
                workload_id=p.victim, attempt=p.attempt,
                placement=codec.placement_to_json(placement), reason="preempted",
                grace_seconds=max(0, p.exits_at - plan.now), pods=sorted(p.pods),
                created_at=now)
            entries.append((p.victim, {
                "at": float(p.at), "attempt": p.attempt, "by": p.by or None,
                "pods": sorted(p.pods), "gpus_milli": p.milli}))
            if self.metrics is not None:
                self.metrics.preemptions.labels(loaded.org_slug, victim.team).inc()
        return entries


def _apply(loaded: Loaded, plan: Plan) -> Applied:
    snap = loaded.snapshot
    return apply_plan({w.id: w for w in snap.workloads}, snap.exiting, plan)


def _run(loaded: Loaded) -> Plan:
    from apportion.engine.cycle import run_cycle

    with paused_gc():
        return run_cycle(loaded.snapshot, CycleConfig(cycle_id=loaded.cycle_id))


def _exec(spec: dict[str, object]) -> dict[str, object]:
    """What the agent runs: the program, and what each pod asks of its node
    (host ``cpu`` cores and ``memory_mib``, 0 = none; the acceptable
    ``gpu_type`` as the spec shows it), for executors that tell a node
    scheduler (Kubernetes requests, limits and node affinity)."""
    keys = ("name", "team", "image", "command", "env", "labels", "duration", "cpu",
            "memory_mib", "gpu_type")
    return {k: spec.get(k) for k in keys}
