"""The waiting work of a pool in the order the engine considers it (SPEC 6 step 2).

The order is the engine's own ``WaitingQueue`` (reserved first, priority,
the team's share deficit after admitting the workload, submission time, id)
fed with the deficits of the last cycle: entitlement minus the GPUs the team
holds in the pool now. The cycle re-reads deficits as it admits work, so this
is the order at the start of the next cycle. Workloads nominated for GPUs that
victims are still freeing are not in that order (they wait for the victims);
they come first.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from apportion.domain.quantities import parse_gpu_request
from apportion.engine.waiting_order import WaitingQueue
from apportion.service.authz import require_reader
from apportion.service.context import Ctx
from apportion.service.insights import event_teams, held
from apportion.service.views import workload_view
from apportion.store.db import Session
from apportion.store.repos import orgs as repo
from apportion.store.repos import security as sec_repo
from apportion.store.repos import workloads as wl_repo


@dataclass(frozen=True, slots=True)
class _Spec:
    is_reserved: bool
    priority: int


@dataclass(frozen=True, slots=True)
class _Waiting:
    """The fields of a waiting workload that the engine's order reads (``id``,
    ``team``, ``submitted_at``, ``spec.is_reserved``, ``spec.priority``), read as
    plain columns: decoding whole rows into engine states costs more than the order."""

    id: int
    team: str
    submitted_at: int
    spec: _Spec
    is_nominated: bool
    #: pods x per-pod charge in this pool (6.2 reads the deficit after admitting it)
    size: int = 0


def _size(spec: dict[str, Any], device_mib: int) -> int:
    """pods x per-pod charge of a stored spec on devices of ``device_mib``."""
    request = parse_gpu_request(spec.get("gpus"), spec.get("gpu_memory_mib"))
    return int(spec.get("pods", 1)) * request.charge(device_mib)


def queue_view(session: Session, ctx: Ctx, pool: str, limit: int = 100) -> dict[str, Any]:
    """``{"pool", "entries": [{position, team, workload, deficit, is_nominated}],
    "total", "pending"}``: the first ``limit`` places of ``total``; ``workload``
    and ``team`` are None for work the caller may not read (its place in line
    still shows); ``pending`` counts work not routed to a pool yet."""
    require_reader(ctx, "queue.read", f"pool/{pool}")
    device_mib = repo.get_pool(session, ctx.org_id, pool).gpu_memory_mib
    readable = event_teams(session, ctx)
    queued = [_Waiting(r.id, r.team, int(r.submitted_at), _Spec(r.wclass == "reserved",
                                                                r.priority),
                       bool(r.nomination) and not r.is_hold, _size(r.spec, device_mib))
              for r in wl_repo.queued_columns(session, ctx.org_id, pool)]
    shares = sec_repo.list_entitlements(session, ctx.org_id)
    holding: dict[str, int] = {}
    for team, p, _is_reserved, milli in held(session, ctx.org_id):
        if p == pool:
            holding[team] = holding.get(team, 0) + milli

    def deficit(team: str) -> Fraction:
        return shares.get((team, pool), Fraction(0)) - holding.get(team, 0)

    nominated = sorted((w for w in queued if w.is_nominated), key=lambda w: w.id)
    waiting = [w for w in queued if not w.is_nominated]
    line = WaitingQueue(waiting, deficit, lambda w: w.size)  # type: ignore[arg-type, attr-defined]
    ordered: list[_Waiting] = [*nominated, *line]
    shown = ordered[:limit]
    rows = {r.id: r for r in wl_repo.workloads_by_ids(session, ctx.org_id,
                                                      [w.id for w in shown])}
    entries = []
    for position, w in enumerate(shown, start=1):
        visible = readable is None or w.team in readable
        entries.append({
            "position": position, "team": w.team if visible else None,
            "workload": workload_view(rows[w.id]) if visible else None,
            "deficit": float(deficit(w.team)) / 1000, "is_nominated": w.is_nominated,
        })
    pending = wl_repo.count_active(session, ctx.org_id, status="Pending")
    return {"pool": pool, "entries": entries, "total": len(ordered), "pending": pending}
