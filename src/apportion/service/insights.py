"""Read models of the dashboard: allocation history, usage per team, waiting
reasons and recent events, computed from what the store already keeps.

Every attempt of a workload keeps its pool, placement, start and end (the
``attempts`` column plus the current attempt's own columns), so the GPUs a
team held at any moment are the sum over the attempt intervals that cover it.
Nothing here writes.
"""

from __future__ import annotations

from typing import Any

from apportion.service.authz import deny, visible_teams
from apportion.service.context import Ctx, Role
from apportion.service.loading import load_parents
from apportion.service.spans import PLACED, Interval, intervals, placed
from apportion.service.views import event_view, gpus
from apportion.store.db import Session
from apportion.store.repos import events as ev_repo
from apportion.store.repos import orgs as org_repo
from apportion.store.repos import workloads as wl_repo

WAITING = ("Pending", "Queued")
__all__ = ["PLACED", "Interval", "intervals"]


def allocation_series(
    spans: list[Interval], start: float, end: float, buckets: int, pool: str | None = None,
    top: int = 8, *, is_clipped: bool = True,
) -> dict[str, Any]:
    """Mean GPUs held per team in each of ``buckets`` equal slices of
    [start, end): the ``top`` largest teams by GPU-hours, the rest as ``other``.
    ``is_clipped``: start at the first allocation if that is later than ``start``.
    Returns ``{"t": [slice starts], "series": [{"team", "values"}]}``."""
    if is_clipped:  # no slice before the first allocation (e.g. a server up for minutes)
        first = min((sp.start for sp in spans if pool is None or sp.pool == pool), default=start)
        start = min(max(start, first), end - 60)
    width = (end - start) / buckets
    per_team: dict[str, list[float]] = {}
    for s in spans:
        if pool is not None and s.pool != pool:
            continue
        lo, hi = max(s.start, start), min(s.end if s.end is not None else end, end)
        if hi <= lo or s.milli == 0:
            continue
        values = per_team.setdefault(s.team, [0.0] * buckets)
        first, last = int((lo - start) // width), min(buckets - 1, int((hi - start) // width))
        for b in range(first, last + 1):
            b_lo, b_hi = start + b * width, start + (b + 1) * width
            overlap = min(hi, b_hi) - max(lo, b_lo)
            if overlap > 0:
                values[b] += s.milli / 1000 * overlap / width
    ranked = sorted(per_team, key=lambda t: (-sum(per_team[t]), t))
    series = [{"team": t, "values": [round(v, 3) for v in per_team[t]]} for t in ranked[:top]]
    if len(ranked) > top:
        rest = [sum(per_team[t][b] for t in ranked[top:]) for b in range(buckets)]
        series.append({"team": "other", "values": [round(v, 3) for v in rest]})
    return {"t": [round(start + b * width) for b in range(buckets)], "series": series}


def pool_status(session: Session, org_id: int, pools: list[str], spans: list[Interval],
                now: float) -> dict[str, dict[str, Any]]:
    """Per pool: GPUs held by reserved and elastic work and workloads Running
    (from the open attempts in ``spans``), attempts preempted in the last hour
    (``spans`` must reach back an hour), workloads waiting and their reasons
    with counts (most frequent first). Work not routed to a pool yet (Pending)
    counts under ``""``."""
    out: dict[str, dict[str, Any]] = {
        p: {"reserved_milli": 0, "elastic_milli": 0, "running": 0, "waiting": 0,
            "preempted_last_hour": 0, "reasons": {}} for p in [*pools, ""]}
    for pool, reason in wl_repo.active_reasons(session, org_id, WAITING):
        st = out.get(pool or "", out[""])
        st["waiting"] += 1
        code = reason or "NOT_YET_CONSIDERED"
        st["reasons"][code] = st["reasons"].get(code, 0) + 1
    for sp in spans:
        found = out.get(sp.pool)
        if found is None:
            continue
        if sp.end is None and sp.status in PLACED:
            found["running"] += sp.status == "Running"
            found["reserved_milli" if sp.is_reserved else "elastic_milli"] += sp.milli
        elif sp.status == "Preempted" and sp.end is not None and sp.end >= now - 3600:
            found["preempted_last_hour"] += 1
    for st in out.values():
        st["reasons"] = sorted(st["reasons"].items(), key=lambda kv: (-kv[1], kv[0]))
        st["allocated_milli"] = st["reserved_milli"] + st["elastic_milli"]
        st["reserved_in_use"] = gpus(st.pop("reserved_milli"))
        st["elastic_in_use"] = gpus(st.pop("elastic_milli"))
    return out


def node_summary(session: Session, org_id: int) -> dict[str, dict[str, int]]:
    """Per pool: nodes, GPUs total, GPUs healthy (on nodes that report ready,
    cordoned ones included, less the devices they report unavailable), nodes
    cordoned (or of unknown health) and down; read as plain columns."""
    out: dict[str, dict[str, int]] = {}
    for pool, count, health, cordoned, unavailable in org_repo.node_health(session, org_id):
        st = out.setdefault(pool, {"nodes": 0, "total": 0, "healthy_milli": 0, "cordoned": 0,
                                   "down": 0})
        st["nodes"] += 1
        st["total"] += count
        if health == "ready":
            st["healthy_milli"] += count * 1000 - sum(int(m) for _i, m in unavailable or ())
        st["down"] += health == "down"
        st["cordoned"] += health != "down" and (cordoned or health == "unknown")
    return out


def pool_names(session: Session, org_id: int) -> list[str]:
    """The org's pool names, sorted (no node is read)."""
    return org_repo.pool_names(session, org_id)


def held(session: Session, org_id: int) -> list[tuple[str, str, bool, int]]:
    """(team, pool, is_reserved, milli) of every Starting or Running workload:
    the GPUs work holds (decoded once per row version, see spans.py)."""
    return [(sp.team, sp.pool, sp.is_reserved, sp.milli)
            for d in placed(session, org_id).values() for sp in d.spans[-1:]
            if sp.end is None]


def event_teams(session: Session, ctx: Ctx) -> list[str] | None:
    """Teams whose events the caller may read (None: all); agents may read none."""
    if ctx.actor.role is Role.AGENT:
        raise deny(ctx, "event.read", "events", "a human role")
    teams = visible_teams(ctx.actor, load_parents(session, ctx.org_id))
    return None if teams is None else sorted(teams)


def recent_events(
    session: Session, ctx: Ctx, *, types: list[str], workload_id: int | None = None,
    team: str | None = None, limit: int = 100,
) -> list[dict[str, Any]]:
    """The newest ``limit`` events the caller may read, newest first, filtered
    by type (any of ``types``; empty: all), workload and team."""
    teams = event_teams(session, ctx)
    rows = ev_repo.newest_events(session, ctx.org_id, types=types, workload_id=workload_id,
                                 teams=teams, team=team, limit=limit)
    return [{**event_view(r), "team": r.team} for r in rows]


def last_event_id(session: Session, org_id: int, after: int) -> int:
    """The id of the newest event of the org if it is above ``after``, else ``after``
    (one indexed probe: the live-update signal polls it)."""
    found = ev_repo.newest_event_id(session, org_id, after)
    return after if found is None else found


def victims_of(session: Session, org_id: int, workload_id: int) -> list[dict[str, Any]]:
    """Workloads that ``workload_id`` preempted: ``[{id, name, team, attempt}]``,
    from the victims' current attempt and (for requeued ones) their earlier ones."""
    out: list[dict[str, Any]] = []
    for row in wl_repo.possible_victims(session, org_id, workload_id):
        hits = [int(a["attempt"]) for a in row.attempts or ()
                if a.get("preempted_by") == workload_id]
        if row.preempted_by == workload_id:
            hits.append(row.attempt)
        out.extend({"id": row.id, "name": row.name, "team": row.team, "attempt": n}
                   for n in hits)
    return sorted(out, key=lambda v: (v["id"], v["attempt"]))


def device_shares(s: Session, ctx: Ctx, pool: str) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """(node, device index) -> the shares of the pods placed there in ``pool``:
    workload id and name (None where the caller may not read the workload), team,
    status, pod index and milli-GPUs."""
    readable = event_teams(s, ctx)
    out: dict[tuple[str, int], list[dict[str, Any]]] = {}
    rows = placed(s, ctx.org_id, pool)
    for wid in sorted(rows):
        d = rows[wid]
        team = d.spans[-1].team if d.spans else ""
        visible = readable is None or team in readable
        for pod_index, p in enumerate(d.placement):
            for dev in p["devices"]:
                out.setdefault((p["node"], int(dev["index"])), []).append({
                    "id": wid if visible else None, "name": d.name if visible else None,
                    "team": team, "status": d.status, "pod": pod_index,
                    "milli": int(dev["milli"])})
    return out


def map_nodes(session: Session, org_id: int, pool: str) -> list[dict[str, Any]]:
    """The nodes of ``pool`` by name, as plain columns: name, gpus, labels,
    state (``down``, ``unknown``, ``cordoned`` or ``ready``; as ``node_views``
    says it), the unavailable milli-GPUs per device index, and the allocatable
    ``cpu_milli``/``memory_mib`` (None: not limited)."""
    out = []
    for name, count, labels, health, cordoned, unavailable, cpu, memory in (
            org_repo.node_map_columns(session, org_id, pool)):
        state = ("down" if health == "down" else "unknown" if health == "unknown"
                 else "cordoned" if cordoned else "ready")
        out.append({"name": name, "gpus": count, "labels": labels or {}, "state": state,
                    "unavailable": {int(i): int(m) for i, m in unavailable or ()},
                    "cpu_milli": cpu, "memory_mib": memory})
    return out


def pool_topology(session: Session, org_id: int, pool: str) -> dict[str, Any]:
    """``{"name", "topology", "packing", "typical_pods"}`` of a pool (NotFound if
    it does not exist), without reading its nodes."""
    row = org_repo.get_pool(session, org_id, pool)
    return {"name": row.name, "topology": list(row.topology or []),
            "packing": row.packing or "fragmentation", "typical_pods": row.typical_pods}
