"""The plan committer: a cycle's plan, written only if it is still valid.

A plan commits in one write transaction, only if this instance still holds the
lease (the fencing token, :meth:`Lease.check_fence`, read again inside the
transaction) and only if the snapshot it came from is still current (the
organization's scheduling version, advanced by a conditional update):
otherwise :class:`LostLease` or :class:`StaleSnapshot`, nothing is written and
the cycle runner recomputes the plan. What a committed plan writes: the
workloads' new states and their events, the agents' instructions (start, stop,
shrink), the victims' preemption histories, the exiting devices, the cycle's
record and the entitlements.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from apportion.domain.lifecycle import Status, WorkloadState
from apportion.engine.apply import Applied, apply_plan
from apportion.engine.gating import effective_time_limit
from apportion.engine.plan import DecisionKind, Plan
from apportion.service.errors import StaleSnapshot
from apportion.service.events import event_row, lifecycle_rows, write_events
from apportion.service.lease import Lease
from apportion.service.metrics import Metrics
from apportion.service.snapshots import Loaded
from apportion.store import codec
from apportion.store.db import Session
from apportion.store.repos import orgs as repo
from apportion.store.repos import security as sec_repo
from apportion.store.repos import workloads as wl_repo


@dataclass(frozen=True, slots=True)
class CycleOutcome:
    committed: bool
    changed: int
    decisions: int
    duration_s: float


class PlanCommitter:
    """Commits the plans of the scheduler that holds ``lease``."""

    def __init__(
        self, lease: Lease, *, metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.lease = lease
        self.metrics = metrics
        self.clock = clock
        #: entitlements last committed per org (a plan that changes only these commits too)
        self._shares: dict[int, object] = {}
        self._committing: tuple[int, object] | None = None

    def committed(self, outcome: CycleOutcome) -> CycleOutcome:
        """After the transaction committed: remember the entitlements written."""
        if outcome.committed and self._committing is not None:
            org_id, shares = self._committing
            self._shares[org_id] = shares
        self._committing = None
        return outcome

    def commit(
        self, session: Session, org_id: int, loaded: Loaded, plan: Plan, started: float,
        applied: Applied | None = None,
    ) -> CycleOutcome:
        """Write ``plan`` (made from ``loaded``, ``applied``: its states, computed
        here if not given) in ``session``, the caller's write transaction; a plan
        that changes nothing is not written (``committed`` False). Raises
        :class:`LostLease` if the lease is no longer held and
        :class:`StaleSnapshot` if the organization changed since the snapshot."""
        token = self.lease.check_fence(session)
        snap = loaded.snapshot
        states = {w.id: w for w in snap.workloads}
        if applied is None:
            applied = apply_plan(states, snap.exiting, plan)
        if loaded.gated:  # job control's changes (engine/gating.py) are the cycle's too
            states = {**states, **loaded.ungated}
            if not set(loaded.gated) <= set(applied.changed):
                applied = Applied({**loaded.gated, **applied.states}, applied.exiting,
                                  tuple(dict.fromkeys((*loaded.gated, *applied.changed))),
                                  applied.preemptions)
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
        sec_repo.add_cycle(session, org_id, plan.cycle_id, holder=self.lease.holder,
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
                    exec_=_exec(row.spec, effective_time_limit(
                        new.spec, loaded.snapshot.pools.get(new.pool or "")),
                        row.array_id, row.array_index),
                    created_at=now)
                if self.metrics is not None:
                    self.metrics.admission.labels(loaded.org_slug, row.team).observe(
                        max(0.0, now - loaded.submitted_at.get(wid, now)))
        for stop in loaded.stops:  # runs ended by their time limit (engine/gating.py)
            ended = phys.state(old[stop.workload_id], physical=True,
                               known_attempts=len(old[stop.workload_id].attempts))
            wl_repo.add_decision(
                session, org_id, kind="stop", pool=stop.pool, workload_id=stop.workload_id,
                attempt=stop.attempt, placement=codec.placement_to_json(ended.placement),
                reason="time_limit", grace_seconds=stop.grace, created_at=now)
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


def _exec(spec: dict[str, object], time_limit: int | None = None,
          array_id: int | None = None, array_index: int | None = None) -> dict[str, object]:
    """What the agent runs: the program, and what each pod asks of its node
    (host ``cpu`` cores and ``memory_mib``, 0 = none; the acceptable
    ``gpu_type`` as the spec shows it), for executors that tell a node
    scheduler (Kubernetes requests, limits and node affinity)."""
    keys = ("name", "team", "image", "command", "env", "labels", "duration", "cpu",
            "memory_mib", "gpu_type")
    out = {k: spec.get(k) for k in keys}
    if time_limit is not None:  # the effective one (the pool's default and maximum applied)
        out["time_limit"] = time_limit
    if array_id is not None:  # an array member learns its place from its environment
        env = dict(out.get("env") or {})  # type: ignore[call-overload]
        env.update(APPORTION_ARRAY_ID=str(array_id), APPORTION_ARRAY_INDEX=str(array_index))
        out["env"] = env
    return out
