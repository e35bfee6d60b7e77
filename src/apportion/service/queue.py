"""The waiting work of a pool in the order the engine considers it (SPEC 6 step 2).

The order is the engine's own ``WaitingQueue`` (reserved first, priority,
the team's share deficit, submission time, id) fed with the deficits of the
last cycle: entitlement minus the GPUs the team holds in the pool now. The
cycle re-reads deficits as it admits work, so this is the order at the start
of the next cycle. Workloads nominated for GPUs that victims are still
freeing are not in that order (they wait for the victims); they come first.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from apportion.engine.order import WaitingQueue
from apportion.service.authz import require_reader
from apportion.service.context import Ctx
from apportion.service.insights import PLACED, event_teams
from apportion.service.views import workload_view
from apportion.store import codec
from apportion.store.models import WorkloadRow
from apportion.store.repos import orgs as repo
from apportion.store.repos import security as sec_repo


def queue_view(session: Session, ctx: Ctx, pool: str) -> dict[str, Any]:
    """``{"pool", "entries": [{position, workload, deficit, is_nominated}],
    "pending": n}``: ``workload`` is None for work the caller may not read (its
    place in line still shows); ``pending`` counts work not yet routed."""
    require_reader(ctx, "queue.read", f"pool/{pool}")
    repo.get_pool(session, ctx.org_id, pool)
    readable = event_teams(session, ctx)
    rows = list(session.scalars(select(WorkloadRow).where(
        WorkloadRow.org_id == ctx.org_id, WorkloadRow.is_active.is_(True))))
    shares = sec_repo.list_entitlements(session, ctx.org_id)
    held: dict[str, int] = {}
    for r in rows:
        if r.pool == pool and r.status in PLACED:
            held[r.team] = held.get(r.team, 0) + sum(
                int(d["milli"]) for p in r.placement or () for d in p["devices"])

    def deficit(team: str) -> Fraction:
        return shares.get((team, pool), Fraction(0)) - held.get(team, 0)

    queued = [r for r in rows if r.pool == pool and r.status == "Queued"]
    nominated = sorted((r for r in queued if r.nomination and not r.is_hold),
                       key=lambda r: r.id)
    by_id = {r.id: r for r in queued}
    is_nominated = {r.id for r in nominated}
    waiting = [codec.state_from_row(r) for r in queued if r.id not in is_nominated]
    ordered = [*nominated, *(by_id[w.id] for w in WaitingQueue(waiting, deficit))]
    entries = []
    for position, r in enumerate(ordered, start=1):
        visible = readable is None or r.team in readable
        entries.append({
            "position": position, "team": r.team if visible else None,
            "workload": workload_view(r) if visible else None,
            "deficit": float(deficit(r.team)) / 1000, "is_nominated": r.id in is_nominated,
        })
    pending = sum(1 for r in rows if r.status == "Pending"
                  and (r.spec or {}).get("pool") in (None, pool))
    return {"pool": pool, "entries": entries, "pending": pending}
