"""Start-time estimates of waiting work (``engine/forecast.py`` on the live
snapshot), for ``GET /v1/workloads/{id}/eta``, ``GET /v1/eta``, the CLI and the
dry run.

All waiting work of a pool is estimated by ONE forward run; the run is kept
per (database, organization, pool) until the organization's scheduling version
moves (a cycle committed, work arrived or ended: the snapshot changed) or
``TTL`` seconds pass, whichever comes first. Runtimes for the medians are the
Completed workloads of the last ``HISTORY_DAYS`` days (start to end).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from typing import Any

from apportion.domain.lifecycle import Status, submitted
from apportion.domain.workload import WorkloadSpec
from apportion.engine.forecast import Estimate, Forecast, History, forecast
from apportion.engine.snapshot import Snapshot
from apportion.service import workloads as wl_svc
from apportion.service.authz import visible_teams
from apportion.service.context import Ctx
from apportion.service.filters import known_pool
from apportion.service.gcpause import paused_gc
from apportion.service.loading import load_parents
from apportion.service.snapshots import load_snapshot
from apportion.service.views import iso
from apportion.store.db import Session
from apportion.store.repos import orgs as org_repo
from apportion.store.repos import workloads as wl_repo

TTL = 60.0
HISTORY_DAYS = 30


@dataclass(frozen=True, slots=True)
class ForecastRun:
    """One forward run: its estimates, and the names, teams and statuses of the
    snapshot's workloads (to show what an estimate waits for)."""

    version: int
    made_at: float  # monotonic
    computed_at: float  # the snapshot's time
    result: Forecast
    names: dict[int, str]
    teams: dict[int, str]


class RunCache:
    """Runs by (database, org, pool key); thread-safe."""

    def __init__(self) -> None:
        self._runs: dict[tuple[str, int, str], ForecastRun] = {}
        self._lock = threading.Lock()
        self.runs = 0  # forward runs made (hits do not count)

    def get(self, key: tuple[str, int, str], version: int) -> ForecastRun | None:
        with self._lock:
            hit = self._runs.get(key)
        if hit is None or hit.version != version or time.monotonic() - hit.made_at > TTL:
            return None
        return hit

    def put(self, key: tuple[str, int, str], run: ForecastRun) -> None:
        with self._lock:
            self._runs[key] = run
            self.runs += 1


CACHE = RunCache()


def history(session: Session, org_id: int, now: float) -> History:
    """Sorted runtimes (seconds) of recently Completed work, per team and pool."""
    by_team: dict[str, list[int]] = {}
    by_pool: dict[str, list[int]] = {}
    for team, pool, start, end in wl_repo.finished_runtimes(
            session, org_id, now - HISTORY_DAYS * 86400):
        runtime = max(0, int(end - start))
        by_team.setdefault(team, []).append(runtime)
        by_pool.setdefault(pool, []).append(runtime)
    return History({k: tuple(sorted(v)) for k, v in by_team.items()},
                   {k: tuple(sorted(v)) for k, v in by_pool.items()})


def _targets(snapshot: Snapshot, pool_key: str) -> list[int]:
    return [w.id for w in snapshot.workloads
            if w.status.is_waiting and (w.pool or "") == pool_key]


def pool_run(session: Session, org_id: int, pool_key: str, now: float, *,
             is_fresh: bool = False) -> ForecastRun:
    """The run that estimates every waiting workload of ``pool_key`` ("" for
    work not routed yet), from the cache unless stale or ``is_fresh``."""
    version = org_repo.get_org(session, org_id).sched_version
    key = (str(session.get_bind().engine.url), org_id, pool_key)
    hit = None if is_fresh else CACHE.get(key, version)
    if hit is not None:
        return hit
    loaded = load_snapshot(session, org_id, now)
    snap = loaded.snapshot
    with paused_gc():
        result = forecast(snap, history(session, org_id, now), _targets(snap, pool_key))
    run = ForecastRun(version, time.monotonic(), float(snap.now), result,
              {w.id: w.name for w in snap.workloads}, {w.id: w.spec.team for w in snap.workloads})
    CACHE.put(key, run)
    return run


def estimate_view(est: Estimate, run: ForecastRun, status: str,
                  visible: set[str] | None) -> dict[str, Any]:
    """An estimate as the API shows it; names of workloads the caller may not
    read are None."""
    def name(wid: int) -> str | None:
        team = run.teams.get(wid)
        return run.names.get(wid) if visible is None or team in visible else None

    return {
        "workload_id": est.workload_id, "name": name(est.workload_id), "pool": est.pool,
        "status": status, "start": iso(est.start),
        "waits_for": [{"workload_id": e.workload_id, "name": name(e.workload_id),
                       "ends_at": iso(e.at), "basis": e.basis} for e in est.waits_for],
        "basis": est.basis, "assumption": est.note, "computed_at": iso(run.computed_at),
        "cycles": run.result.cycles,
    }


def workload_eta(session: Session, ctx: Ctx, workload_id: int) -> dict[str, Any]:
    """The estimate of one workload (the caller must be able to read it). Work
    that has started or ended says so instead (``basis`` "started"/"ended")."""
    row = wl_svc.get(session, ctx, workload_id)
    now = ctx.clock.now()
    if not Status(row.status).is_waiting:
        placed = Status(row.status).is_placed
        basis = "started" if placed else "ended"
        return {"workload_id": row.id, "name": row.name, "pool": row.pool,
                "status": row.status, "start": iso(row.started_at), "waits_for": [],
                "basis": basis, "assumption": f"{basis} ({row.status})",
                "computed_at": iso(now),
                "cycles": 0}
    run = pool_run(session, ctx.org_id, row.pool or "", now)
    est = run.result.estimates.get(workload_id)
    if est is None:  # it arrived or moved after the kept run was made
        run = pool_run(session, ctx.org_id, row.pool or "", now, is_fresh=True)
        est = run.result.estimates.get(workload_id) or Estimate(
            workload_id, row.pool, None, note="unknown (not in the scheduler's snapshot yet)")
    teams = visible_teams(ctx.actor, load_parents(session, ctx.org_id))
    return estimate_view(est, run, row.status, teams)


def pool_etas(session: Session, ctx: Ctx, pool: str | None) -> dict[str, Any]:
    """Estimates of the waiting work the caller may read: of ``pool``, or of
    every pool (and of work not routed yet) when None; soonest first."""
    known_pool(session, ctx.org_id, pool)
    teams = visible_teams(ctx.actor, load_parents(session, ctx.org_id))
    now = ctx.clock.now()
    keys = [pool] if pool is not None else ["", *org_repo.pool_names(session, ctx.org_id)]
    out: list[dict[str, Any]] = []
    cycles, is_cut, computed = 0, False, now
    for key in keys:
        run = pool_run(session, ctx.org_id, key, now)
        cycles += run.result.cycles
        is_cut = is_cut or run.result.is_horizon_reached
        computed = min(computed, run.computed_at)
        for est in run.result.estimates.values():
            if teams is None or run.teams.get(est.workload_id) in teams:
                out.append(estimate_view(est, run, "Queued" if est.pool else "Pending",
                                         teams))
    out.sort(key=lambda e: (e["start"] is None, e["start"] or "", e["workload_id"]))
    return {"pool": pool, "computed_at": iso(computed), "cycles": cycles,
            "is_horizon_reached": is_cut, "estimates": out}


def spec_eta(session: Session, ctx: Ctx, snapshot: Snapshot, spec: WorkloadSpec,
             workload_id: int) -> dict[str, Any]:
    """The estimate of ``spec`` if it were submitted now as ``workload_id`` (the
    dry run): a run of the snapshot with it added, not kept."""
    probe = submitted(workload_id, spec, snapshot.now, cause="dry-run")
    snap = replace(snapshot, workloads=(*snapshot.workloads, probe))
    with paused_gc():
        result = forecast(snap, history(session, ctx.org_id, snapshot.now), [workload_id])
    run = ForecastRun(snapshot.version, time.monotonic(), float(snapshot.now), result,
              {w.id: w.name for w in snap.workloads}, {w.id: w.spec.team for w in snap.workloads})
    teams = visible_teams(ctx.actor, load_parents(session, ctx.org_id))
    return estimate_view(result.estimates[workload_id], run, "Pending", teams)
