"""Stored records and domain values as the JSON objects of docs/api.md.

One function per object; the API returns exactly these dicts as ``data``. A
record is typed by what the view reads of it (``service/records.py``), not by
the store's row class.
"""

from __future__ import annotations

from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

from apportion.domain.host import cpu_number
from apportion.domain.quantities import gpus_number
from apportion.service.records import (
    AuditRecord,
    DecisionRecord,
    EventRecord,
    NodeRecord,
    OrgRecord,
    PoolRecord,
    ReservationRecord,
    TeamRecord,
    TokenRecord,
    WorkloadRecord,
)


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(int(ts), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def gpus(milli: int | Fraction | None) -> int | float | None:
    return None if milli is None else gpus_number(milli)


def org_view(row: OrgRecord) -> dict[str, Any]:
    return {"slug": row.slug, "name": row.name, "version": row.version,
            "created_at": iso(row.created_at)}


def token_view(row: TokenRecord, secret: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": row.id,
        "name": row.name,
        "role": row.role,
        "teams": list(row.teams or []),
        "pool": row.pool,
        "created_at": iso(row.created_at),
        "expires_at": iso(row.expires_at),
        "revoked_at": iso(row.revoked_at),
        "last_used_at": iso(row.last_used_at),
    }
    if secret is not None:
        out["token"] = secret
    return out


def team_view(
    row: TeamRecord, children: list[str], reservations: dict[str, int]
) -> dict[str, Any]:
    return {
        "slug": row.slug,
        "name": row.name,
        "parent": row.parent,
        "bursting_priority": row.bursting_priority,
        "burst_limit_percent": row.burst_limit_percent,
        "children": sorted(children),
        "is_leaf": not children,
        "reservations": {p: gpus(m) for p, m in sorted(reservations.items())},
        "version": row.version,
        "created_at": iso(row.created_at),
    }


def reservation_view(row: ReservationRecord) -> dict[str, Any]:
    return {"team": row.team, "pool": row.pool, "gpus": gpus(row.milli), "version": row.version,
            "updated_at": iso(row.updated_at)}


def pool_view(row: PoolRecord, capacity_milli: int, node_count: int) -> dict[str, Any]:
    return {
        "name": row.name,
        "gpu_type": row.gpu_type,
        "gpu_memory_mib": row.gpu_memory_mib,
        "topology": list(row.topology or []),
        "start_delay": row.start_delay,
        "preemption_grace": row.preemption_grace,
        "starvation_hold_after": row.starvation_hold_after,
        "packing": row.packing or "fragmentation",
        "typical_pods": row.typical_pods,
        "default_time_limit": row.default_time_limit,
        "max_time_limit": row.max_time_limit,
        "capacity": gpus(capacity_milli),
        "node_count": node_count,
        "agent": {"status": row.agent_status, "last_heartbeat_at": iso(row.last_heartbeat_at)},
        "version": row.version,
        "created_at": iso(row.created_at),
    }


def node_view(row: NodeRecord, state: str, *, cpu_in_use: int = 0,
              memory_mib_in_use: int = 0) -> dict[str, Any]:
    """``cpu_in_use`` (milli-CPU) and ``memory_mib_in_use``: what the Starting and
    Running pods placed on the node request."""
    unavailable = [{"index": int(i), "milli": int(m)} for i, m in (row.unavailable or [])]
    return {
        "name": row.name,
        "pool": row.pool,
        "gpus": row.gpus,
        "gpu_type": row.gpu_type,
        "gpu_memory_mib": row.gpu_memory_mib,
        "labels": dict(row.labels or {}),
        "cpu": None if row.cpu_milli is None else cpu_number(row.cpu_milli),
        "memory_mib": row.memory_mib,
        "cpu_in_use": cpu_number(cpu_in_use),
        "memory_mib_in_use": memory_mib_in_use,
        "health": row.health,
        "cordoned": row.cordoned,
        "state": state,
        "unavailable": unavailable,
        "unavailable_gpus": gpus(sum(u["milli"] for u in unavailable)),
        "last_seen_at": iso(row.last_seen_at),
        "version": row.version,
    }


def _placement_milli(placement: list[Any]) -> int:
    return sum(int(d["milli"]) for p in placement for d in p["devices"])


def _size(row: WorkloadRecord) -> int | float | None:
    spec = row.spec
    if row.placement:
        return gpus(_placement_milli(row.placement))
    if spec.get("gpus") is not None:
        return gpus(round(float(spec["gpus"]) * 1000) * int(spec["pods"]))
    return None


def _pods_running(row: WorkloadRecord) -> int:
    """Pods the current attempt holds: placed while Starting, running while
    Running (fewer than ``pods`` after a shrink, SPEC 6.5); 0 otherwise."""
    return len(row.placement or []) if row.status in ("Starting", "Running") else 0


def preemption_view(entry: dict[str, Any]) -> dict[str, Any]:
    """One entry of a workload's preemption history (whole attempt or shrink)."""
    pods = [int(p) for p in entry.get("pods") or []]
    return {"at": iso(entry.get("at")), "attempt": entry.get("attempt"),
            "kind": "shrink" if pods else "whole", "by": entry.get("by"), "pods": pods,
            "gpus": gpus(int(entry.get("gpus_milli") or 0))}


def workload_view(row: WorkloadRecord) -> dict[str, Any]:
    reason = None
    if row.reason_code:
        reason = {"code": row.reason_code, "message": row.reason_message or ""}
    attempts = [
        {
            "attempt": a["attempt"],
            "status": a["status"],
            "pool": a.get("pool"),
            "started_at": iso(a.get("started_at")),
            "ended_at": iso(a.get("ended_at")),
            "preempted_by": a.get("preempted_by"),
        }
        for a in (row.attempts or [])
    ]
    attempts.append({
        "attempt": row.attempt, "status": row.status, "pool": row.pool,
        "started_at": iso(row.started_at), "ended_at": iso(row.ended_at),
        "preempted_by": row.preempted_by,
    })
    return {
        "id": row.id,
        "name": row.name,
        "team": row.team,
        "class": row.wclass,
        "priority": row.priority,
        "status": row.status,
        "attempt": row.attempt,
        "pool": row.pool,
        "reason": reason,
        "nominated": bool(row.nomination),
        "placement": row.placement or [],
        "pods": int(row.spec.get("pods") or 1),
        "pods_running": _pods_running(row),
        "gpus": _size(row),
        "submitted_by": row.submitted_by,
        "submitted_at": iso(row.submitted_at),
        "started_at": iso(row.started_at),
        "running_at": iso(row.running_at),
        "ended_at": iso(row.ended_at),
        "preempted_by": row.preempted_by,
        "attempts": attempts,
        "preemptions": [preemption_view(e) for e in row.preemptions or []],
        "spec": row.spec,
        "version": row.version,
        "held": bool(row.held),
        "array_id": row.array_id,
        "array_index": row.array_index,
        "array_limit": row.array_limit,
    }


def event_view(row: EventRecord) -> dict[str, Any]:
    return {
        "id": row.id,
        "type": row.type,
        "at": iso(row.at),
        "workload_id": row.workload_id,
        "attempt": row.attempt,
        "status": row.status,
        "cause": row.cause,
        "message": row.message,
        "data": row.data or {},
    }


def decision_view(row: DecisionRecord) -> dict[str, Any]:
    return {
        "id": row.id,
        "kind": row.kind,
        "workload_id": row.workload_id,
        "attempt": row.attempt,
        "run_id": row.run_id,
        "pool": row.pool,
        "placement": row.placement or [],
        "exec": row.exec or {},
        "grace_seconds": row.grace_seconds,
        "reason": row.reason,
        "pods": list(row.pods or []),
        "created_at": iso(row.created_at),
    }


def audit_view(row: AuditRecord) -> dict[str, Any]:
    return {
        "id": row.id,
        "at": iso(row.at),
        "actor": row.actor,
        "token_id": row.token_id,
        "request_id": row.request_id,
        "action": row.action,
        "object": row.object,
        "outcome": row.outcome,
        "message": row.message,
        "before": row.before,
        "after": row.after,
    }
