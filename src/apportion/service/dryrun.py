"""Dry run: what would happen if a workload were submitted now (SPEC 6.8).

The same engine code as the scheduler, on a snapshot read in a read-only
transaction; nothing is stored."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from apportion.domain.lifecycle import Status, submitted
from apportion.domain.quantities import gpus_number
from apportion.domain.reasons import Reason
from apportion.domain.workload import WorkloadSpec
from apportion.engine.gating import gate
from apportion.engine.snapshot import CycleConfig, Snapshot
from apportion.service.authz import require_submit
from apportion.service.context import Ctx
from apportion.service.eta import spec_eta
from apportion.service.gcpause import paused_gc
from apportion.service.loading import load_parents
from apportion.service.snapshots import load_snapshot
from apportion.service.views import iso
from apportion.service.workloads import check_job_control, check_team
from apportion.store import codec
from apportion.store.db import Session
from apportion.store.repos import workloads as wl_repo


def dry_run(session: Session, ctx: Ctx, spec: WorkloadSpec, *, held: bool = False
            ) -> dict[str, Any]:
    from apportion.engine.cycle import dry_run as engine_dry_run

    parents = load_parents(session, ctx.org_id)
    check_team(parents, spec.team)
    require_submit(ctx, parents, spec.team)
    if spec.after or spec.time_limit is not None:
        check_job_control(session, ctx.org_id, spec)
    loaded = load_snapshot(session, ctx.org_id, time.time())
    gated = _job_control_reason(session, ctx.org_id, loaded.snapshot, spec, held)
    if gated is not None:  # held, or waiting for dependencies (engine/gating.py)
        return {"pool": None, "starts_now": False, "reason": gated.to_dict(), "victims": [],
                "placement": []}
    with paused_gc():
        result = engine_dry_run(loaded.snapshot, spec, CycleConfig(cycle_id=loaded.cycle_id))
    snap = loaded.snapshot
    if result.starts_now:
        eta: dict[str, Any] = {
            "workload_id": result.workload_id, "name": spec.name, "pool": result.pool,
            "status": "Pending", "start": iso(snap.now), "waits_for": [], "basis": "",
            "assumption": "starts at the next cycle", "computed_at": iso(snap.now),
            "cycles": 1}
    else:
        eta = spec_eta(session, ctx, snap, spec, result.workload_id)
    return {
        "pool": result.pool,
        "starts_now": result.starts_now,
        "reason": result.reason.to_dict() if result.reason is not None else None,
        "victims": [{"workload_id": wid, "gpus": gpus_number(milli)}
                    for wid, milli in result.victims],
        "placement": codec.placement_to_json(
            loaded.devices.placement(result.placement, physical=True)),
        "eta": eta,
    }


def _job_control_reason(session: Session, org_id: int, snap: Snapshot, spec: WorkloadSpec,
                        held: bool) -> Reason | None:
    """Why job control would keep ``spec`` from the engine if submitted now
    (HELD, DEPENDENCY, DEPENDENCY_NEVER_SATISFIED), as the scheduler's gate says."""
    if not held and not spec.after:
        return None
    probe = replace(submitted(max((w.id for w in snap.workloads), default=0) + 1, spec,
                              snap.now, cause="dry-run"), held=held)
    outside = {i: Status(s) for i, s in wl_repo.statuses_of(
        session, org_id, [d.workload_id for d in spec.after]).items()}
    gated = gate(replace(snap, workloads=(*snap.workloads, probe)), outside)
    state = gated.changed.get(probe.id)
    return state.reason if state is not None else None
