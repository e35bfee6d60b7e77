"""Read models of the dashboard: allocation history, usage per team, waiting
reasons and recent events, computed from what the store already keeps.

Every attempt of a workload keeps its pool, placement, start and end (the
``attempts`` column plus the current attempt's own columns), so the GPUs a
team held at any moment are the sum over the attempt intervals that cover it.
Nothing here writes.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from apportion.service.authz import deny, visible_teams
from apportion.service.context import Ctx, Role
from apportion.service.loading import load_parents
from apportion.service.views import event_view, gpus
from apportion.store.models import EventRow, WorkloadRow

PLACED = ("Starting", "Running")
WAITING = ("Pending", "Queued")
_COLUMNS = (WorkloadRow.id, WorkloadRow.team, WorkloadRow.wclass, WorkloadRow.pool,
            WorkloadRow.status, WorkloadRow.attempt, WorkloadRow.placement,
            WorkloadRow.started_at, WorkloadRow.ended_at, WorkloadRow.attempts)


@dataclass(frozen=True, slots=True)
class Interval:
    """One attempt's hold on GPUs: ``milli`` in ``pool`` from ``start`` to
    ``end`` (None: still held). ``status`` is how the attempt ended (or its
    current status)."""

    workload_id: int
    attempt: int
    team: str
    pool: str
    is_reserved: bool
    milli: int
    start: float
    end: float | None
    status: str


def _milli(placement: Iterable[Any] | None) -> int:
    return sum(int(d["milli"]) for p in placement or () for d in p["devices"])


def intervals(session: Session, org_id: int, since: float) -> list[Interval]:
    """Attempt intervals that were still open at ``since`` or began after it."""
    q = select(*_COLUMNS).where(
        WorkloadRow.org_id == org_id,
        or_(WorkloadRow.is_active.is_(True), WorkloadRow.ended_at >= since),
    )
    out: list[Interval] = []
    for row in session.execute(q):
        is_reserved = row.wclass == "reserved"
        for a in row.attempts or ():
            start, end = a.get("started_at"), a.get("ended_at")
            if start is None or a.get("pool") is None or (end is not None and end < since):
                continue
            out.append(Interval(row.id, int(a["attempt"]), row.team, a["pool"], is_reserved,
                                _milli(a.get("placement")), float(start),
                                None if end is None else float(end), a["status"]))
        if row.started_at is None or row.pool is None:
            continue
        end = None if row.status in PLACED else row.ended_at
        if end is not None and end < since:
            continue
        out.append(Interval(row.id, row.attempt, row.team, row.pool, is_reserved,
                            _milli(row.placement), float(row.started_at), end, row.status))
    return out


def allocation_series(
    spans: list[Interval], start: float, end: float, buckets: int, pool: str | None = None,
    top: int = 8,
) -> dict[str, Any]:
    """Mean GPUs held per team in each of ``buckets`` equal slices of
    [start, end): the ``top`` largest teams by GPU-hours, the rest as ``other``.
    Returns ``{"t": [slice starts], "series": [{"team", "values"}]}``."""
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


def usage_report(spans: list[Interval], start: float, end: float) -> list[dict[str, Any]]:
    """Per team over [start, end): GPU-hours reserved and elastic, preemptions
    (attempts that ended Preempted in the window) and the GPU-hours those
    attempts had run (lost work), sorted by total GPU-hours, then team."""
    rows: dict[str, dict[str, Any]] = {}
    for s in spans:
        lo, hi = max(s.start, start), min(s.end if s.end is not None else end, end)
        row = rows.setdefault(s.team, {"team": s.team, "reserved_gpu_hours": 0.0,
                                       "elastic_gpu_hours": 0.0, "preemptions": 0,
                                       "lost_gpu_hours": 0.0})
        hours = max(0.0, hi - lo) * s.milli / 1000 / 3600
        row["reserved_gpu_hours" if s.is_reserved else "elastic_gpu_hours"] += hours
        if s.status == "Preempted" and s.end is not None and start <= s.end < end:
            row["preemptions"] += 1
            row["lost_gpu_hours"] += (s.end - s.start) * s.milli / 1000 / 3600
    out = []
    for row in rows.values():
        row["gpu_hours"] = row["reserved_gpu_hours"] + row["elastic_gpu_hours"]
        if row["gpu_hours"] > 0 or row["preemptions"]:
            out.append(row)
    out.sort(key=lambda r: (-r["gpu_hours"], r["team"]))
    for row in out:
        for key in ("reserved_gpu_hours", "elastic_gpu_hours", "lost_gpu_hours", "gpu_hours"):
            row[key] = round(row[key], 4)
    return out


def pool_status(session: Session, org_id: int, pools: list[str], now: float | None = None
                ) -> dict[str, dict[str, Any]]:
    """Per pool: GPUs held by reserved and elastic work, workloads Running and
    waiting, preemptions in the last hour, and the waiting reasons with counts
    (most frequent first). Waiting work with no pool yet counts under ``""``."""
    now = time.time() if now is None else now
    out: dict[str, dict[str, Any]] = {
        p: {"reserved_milli": 0, "elastic_milli": 0, "running": 0, "waiting": 0,
            "preempted_last_hour": 0, "reasons": {}} for p in [*pools, ""]}
    q = select(WorkloadRow.pool, WorkloadRow.status, WorkloadRow.wclass, WorkloadRow.placement,
               WorkloadRow.reason_code, WorkloadRow.spec).where(
        WorkloadRow.org_id == org_id, WorkloadRow.is_active.is_(True))
    for row in session.execute(q):
        if row.status in WAITING:
            key = row.pool or (row.spec or {}).get("pool") or ""
            st = out.get(key, out[""])
            st["waiting"] += 1
            code = row.reason_code or "NOT_YET_CONSIDERED"
            st["reasons"][code] = st["reasons"].get(code, 0) + 1
        elif row.status in PLACED and row.pool in out:
            st = out[row.pool]
            st["running"] += row.status == "Running"
            st["reserved_milli" if row.wclass == "reserved" else "elastic_milli"] += _milli(
                row.placement)
    for s in intervals(session, org_id, now - 3600):
        if s.status == "Preempted" and s.end is not None and s.end >= now - 3600 and (
                s.pool in out):
            out[s.pool]["preempted_last_hour"] += 1
    for st in out.values():
        st["reasons"] = sorted(st["reasons"].items(), key=lambda kv: (-kv[1], kv[0]))
        st["reserved_in_use"] = gpus(st.pop("reserved_milli"))
        st["elastic_in_use"] = gpus(st.pop("elastic_milli"))
    return out


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
    q = select(EventRow).where(EventRow.org_id == ctx.org_id)
    if types:
        q = q.where(EventRow.type.in_(types))
    if workload_id is not None:
        q = q.where(EventRow.workload_id == workload_id)
    if teams is not None:
        q = q.where(EventRow.team.in_(teams))
    if team:
        q = q.where(EventRow.team == team)
    rows = session.scalars(q.order_by(EventRow.id.desc()).limit(limit))
    return [{**event_view(r), "team": r.team} for r in rows]


def last_event_id(session: Session, org_id: int, after: int) -> int:
    """The id of the newest event of the org if it is above ``after``, else ``after``
    (one indexed probe: the live-update signal polls it)."""
    q = (select(EventRow.id).where(EventRow.org_id == org_id, EventRow.id > after)
         .order_by(EventRow.id.desc()).limit(1))
    found = session.scalar(q)
    return after if found is None else int(found)


def victims_of(session: Session, org_id: int, workload_id: int) -> list[dict[str, Any]]:
    """Workloads that ``workload_id`` preempted: ``[{id, name, team, attempt}]``,
    from the victims' current attempt and (for requeued ones) their earlier ones."""
    q = select(WorkloadRow.id, WorkloadRow.name, WorkloadRow.team, WorkloadRow.attempt,
               WorkloadRow.preempted_by, WorkloadRow.attempts).where(
        WorkloadRow.org_id == org_id, WorkloadRow.id != workload_id,
        or_(WorkloadRow.preempted_by == workload_id, WorkloadRow.attempt > 1))
    out = []
    for row in session.execute(q):
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
    q = select(WorkloadRow.id, WorkloadRow.name, WorkloadRow.team, WorkloadRow.status,
               WorkloadRow.placement).where(
        WorkloadRow.org_id == ctx.org_id, WorkloadRow.is_active.is_(True),
        WorkloadRow.pool == pool, WorkloadRow.status.in_(PLACED))
    out: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for row in s.execute(q.order_by(WorkloadRow.id)):
        visible = readable is None or row.team in readable
        for pod_index, p in enumerate(row.placement or ()):
            for d in p["devices"]:
                out.setdefault((p["node"], int(d["index"])), []).append({
                    "id": row.id if visible else None, "name": row.name if visible else None,
                    "team": row.team, "status": row.status, "pod": pod_index,
                    "milli": int(d["milli"]), "pct": int(d["milli"]) / 10})
    return out
