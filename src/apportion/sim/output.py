"""The JSON outcome of a simulation (SPEC section 8). A public contract: other
tools parse it, so keys only ever get added, never renamed or removed.
Documented in docs/simulate.md.

GPU figures are numbers of GPUs (``gpus_number``); ``milli`` inside a
placement's devices is milli-GPU, as in the SPEC.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from apportion.domain.cluster import pool_capacity
from apportion.domain.host import cpu_number
from apportion.domain.lifecycle import Attempt, Status, WorkloadState, all_attempts
from apportion.domain.placement_json import placement_to_json
from apportion.domain.quantities import gpus_number
from apportion.domain.workload import WorkloadClass, gpu_types_value
from apportion.sim.runner import SimResult


def to_json(result: SimResult) -> dict[str, Any]:
    """The whole outcome as one JSON-ready dict."""
    return {
        "time": result.time,
        "workloads": {
            w.name: workload_json(result, w)
            for w in sorted(result.states.values(), key=lambda s: s.id)
        },
        "preemptions": [
            {
                "at": p.at,
                "victim": result.name(p.victim),
                "by": result.name(p.by),
                "gpus": gpus_number(p.milli),
                "attempt": p.attempt,
                "exits_at": p.exits_at,
                **({"pods": list(p.pods)} if p.pods else {}),  # a shrink: these pods went
            }
            for p in result.preemptions
        ],
        "teams": teams_json(result),
        "pools": pools_json(result),
        "ignored_events": [
            {"at": n.at, "event": n.kind, "target": n.target, "path": n.path,
             "message": n.message}
            for n in result.notes
            if n.is_ignored
        ],
    }


def workload_json(result: SimResult, w: WorkloadState) -> dict[str, Any]:
    """Top-level fields describe the latest attempt; ``attempts`` lists all.
    ``gpu_type`` (null, a type, or the list), ``cpu`` (cores) and ``memory_mib``
    are what each pod asks for (0: nothing), next to where the pods went."""
    return {
        "id": w.id,
        "team": w.team,
        "class": w.spec.wclass.value,
        "priority": w.spec.priority,
        "gpus": gpus_number(sum(p.milli for p in w.placement)),
        "gpu_type": gpu_types_value(w.spec.gpu_types),
        "cpu": cpu_number(w.spec.cpu_milli),
        "memory_mib": w.spec.memory_mib,
        "pods": w.spec.pods,
        "pods_running": len(w.placement) if w.status.is_placed else 0,
        "status": w.status.value,
        "attempt": w.attempt,
        "pool": w.pool,
        "reason": w.reason.to_dict() if w.reason is not None else None,
        "placement": placement_to_json(w.placement),
        "preempted_by": _name(result, w.preempted_by),
        "submitted_at": w.submitted_at,
        "started_at": w.started_at,
        "running_at": w.running_at,
        "ended_at": w.ended_at,
        "attempts": [_attempt_json(result, a) for a in all_attempts(w)],
        "events": [
            {"at": e.at, "status": e.status.value, "attempt": e.attempt, "cause": e.cause,
             "message": e.message}
            for e in w.events
        ],
    }


def _attempt_json(result: SimResult, a: Attempt) -> dict[str, Any]:
    return {
        "attempt": a.attempt,
        "status": a.status.value,
        "pool": a.pool,
        "started_at": a.started_at,
        "running_at": a.running_at,
        "ended_at": a.ended_at,
        "preempted_by": _name(result, a.preempted_by),
    }


def _name(result: SimResult, workload_id: int | None) -> str | None:
    return None if workload_id is None else result.name(workload_id)


def usage_by_team(
    result: SimResult,
) -> dict[tuple[str, str], list[int]]:
    """(team, pool) -> [reserved milli, elastic milli] of Starting and Running
    work, summed up the tree so a parent counts its whole subtree."""
    tree = result.scenario.tree
    usage: dict[tuple[str, str], list[int]] = {}
    for w in _placed(result.states.values()):
        slot = 0 if w.spec.wclass is WorkloadClass.RESERVED else 1
        for team in tree.path(w.team):
            usage.setdefault((team, w.pool or ""), [0, 0])[slot] += w.placed_milli
    return usage


def teams_json(result: SimResult) -> dict[str, dict[str, dict[str, int | float]]]:
    """Every team in every pool: reservation, reserved and elastic in use
    (Starting + Running, whole subtree), and entitlement (fair share)."""
    tree = result.scenario.tree
    usage = usage_by_team(result)
    out: dict[str, dict[str, dict[str, int | float]]] = {}
    for team in result.scenario.team_order:
        out[team] = {}
        for pool in result.scenario.pools:
            reserved, elastic = usage.get((team, pool), [0, 0])
            share = result.entitlements.get(pool, {}).get(team, 0)
            out[team][pool] = {
                "reservation": gpus_number(tree.reservation(team, pool)),
                "reserved": gpus_number(reserved),
                "elastic": gpus_number(elastic),
                "entitlement": gpus_number(share),
            }
    return out


def pools_json(result: SimResult) -> dict[str, dict[str, int | float]]:
    """Capacity (GPUs of nodes not down) and used (devices held by Starting
    and Running work and by preempted work that has not exited yet)."""
    used: dict[str, int] = {}
    for w in _placed(result.states.values()):
        used[w.pool or ""] = used.get(w.pool or "", 0) + w.placed_milli
    for e in result.exiting:
        used[e.pool] = used.get(e.pool, 0) + sum(p.milli for p in e.placement)
    return {
        pool: {
            "capacity": gpus_number(pool_capacity(n for n in result.nodes if n.pool == pool)),
            "used": gpus_number(used.get(pool, 0)),
        }
        for pool in result.scenario.pools
    }


def _placed(states: Iterable[WorkloadState]) -> Iterable[WorkloadState]:
    return (w for w in states if w.status in (Status.STARTING, Status.RUNNING))
