"""Explicit conversions between rows (JSON columns) and domain types.

The stored spec is the normalised submit body; reading it back goes through
``make_spec`` so a stored workload is validated like a new one.
"""

from __future__ import annotations

from typing import Any

from apportion.domain.cluster import Node, NodeState, Packing, Pool, parse_typical_pods
from apportion.domain.host import cpu_number
from apportion.domain.lifecycle import Attempt, Exiting, Status, WorkloadState
from apportion.domain.org import Team
from apportion.domain.placement_json import placement_from_json as placement_from_json
from apportion.domain.placement_json import placement_to_json as placement_to_json
from apportion.domain.quantities import RequestKind
from apportion.domain.reasons import Reason, ReasonCode
from apportion.domain.workload import WorkloadSpec, gpu_types_value, make_spec
from apportion.store.models import ExitingRow, NodeRow, PoolRow, TeamRow, WorkloadRow


def spec_to_dict(spec: WorkloadSpec) -> dict[str, Any]:
    """The normalised submit body of ``spec`` (what the API shows as ``spec``)."""
    req = spec.request
    gpus: int | float | None = None
    mem: int | None = None
    if req.kind is RequestKind.WHOLE:
        gpus = req.value
    elif req.kind is RequestKind.FRACTION:
        gpus = req.value / 1000
    else:
        mem = req.value
    topo = None
    if spec.topology is not None:
        topo = {"level": spec.topology.level, "mode": spec.topology.mode.value}
    return {
        "name": spec.name,
        "team": spec.team,
        "class": spec.wclass.value,
        "priority": spec.priority,
        "gpus": gpus,
        "gpu_memory_mib": mem,
        "pods": spec.pods,
        "min_pods": spec.min_pods,
        "gang": spec.gang,
        "topology": topo,
        "gpu_type": gpu_types_value(spec.gpu_types),
        "pool": spec.pool,
        "node_selector": dict(spec.node_selector),
        "requeue_on_preemption": spec.requeue_on_preemption,
        "command": list(spec.command),
        "image": spec.image,
        "env": dict(spec.env),
        "labels": dict(spec.labels),
        "duration": spec.duration,
        "cpu": cpu_number(spec.cpu_milli),
        "memory_mib": spec.memory_mib,
        **_job_control(spec),
    }


def _job_control(spec: WorkloadSpec) -> dict[str, Any]:
    """The job-control keys of a stored spec (issue 16), only where set, so that
    a spec without them reads back as before."""
    out: dict[str, Any] = {}
    if spec.time_limit is not None:
        out["time_limit"] = spec.time_limit
    if spec.requeue_on_timeout:
        out["requeue_on_timeout"] = True
    if spec.after:
        out["after"] = [d.to_json() for d in spec.after]
    return out


def spec_from_dict(data: dict[str, Any]) -> WorkloadSpec:
    args = dict(data)
    args["wclass"] = args.pop("class", "elastic")
    return make_spec(**args)


def _opt_int(value: float | None) -> int | None:
    return None if value is None else int(value)


def attempts_to_json(attempts: tuple[Attempt, ...]) -> list[dict[str, Any]]:
    return [
        {
            "attempt": a.attempt,
            "status": a.status.value,
            "pool": a.pool,
            "placement": placement_to_json(a.placement),
            "started_at": a.started_at,
            "running_at": a.running_at,
            "ended_at": a.ended_at,
            "preempted_by": a.preempted_by,
        }
        for a in attempts
    ]


def attempts_from_json(data: list[Any] | None) -> tuple[Attempt, ...]:
    return tuple(
        Attempt(
            attempt=int(a["attempt"]),
            status=Status(a["status"]),
            pool=a.get("pool"),
            placement=placement_from_json(a.get("placement")),
            started_at=a.get("started_at"),
            running_at=a.get("running_at"),
            ended_at=a.get("ended_at"),
            preempted_by=a.get("preempted_by"),
        )
        for a in (data or [])
    )


def state_from_row(row: WorkloadRow) -> WorkloadState:
    """The engine's view of a stored workload (events are not loaded: the
    service appends only the new ones after a change)."""
    reason = None
    if row.reason_code:
        reason = Reason(ReasonCode(row.reason_code), row.reason_message or "")
    return WorkloadState(
        id=row.id,
        spec=spec_from_dict(row.spec),
        submitted_at=int(row.submitted_at),
        status=Status(row.status),
        attempt=row.attempt,
        pool=row.pool,
        placement=placement_from_json(row.placement),
        nomination=placement_from_json(row.nomination),
        is_hold=row.is_hold,
        started_at=_opt_int(row.started_at),
        running_at=_opt_int(row.running_at),
        ended_at=_opt_int(row.ended_at),
        preempted_by=row.preempted_by,
        head_since=_opt_int(row.head_since),
        reason=reason,
        attempts=attempts_from_json(row.attempts),
        held=bool(row.held),
        array_id=row.array_id,
        array_index=row.array_index,
        array_limit=row.array_limit,
    )


def state_to_row(state: WorkloadState, row: WorkloadRow, now: float) -> None:
    """Copy the mutable fields of ``state`` onto ``row`` and bump its version."""
    row.status = state.status.value
    row.is_active = not state.status.is_terminal
    row.attempt = state.attempt
    row.pool = state.pool
    row.placement = placement_to_json(state.placement)
    row.nomination = placement_to_json(state.nomination)
    row.is_hold = state.is_hold
    row.reason_code = state.reason.code.value if state.reason else None
    row.reason_message = state.reason.message if state.reason else None
    row.started_at = state.started_at
    row.running_at = state.running_at
    row.ended_at = state.ended_at
    row.preempted_by = state.preempted_by
    row.head_since = state.head_since
    row.attempts = attempts_to_json(state.attempts)
    row.held = state.held
    row.version = row.version + 1
    row.updated_at = now


def team_from_row(row: TeamRow) -> Team:
    return Team(
        slug=row.slug,
        name=row.name,
        parent=row.parent,
        bursting_priority=row.bursting_priority,
        burst_limit_percent=row.burst_limit_percent,
    )


def pool_from_row(row: PoolRow) -> Pool:
    return Pool(
        name=row.name,
        gpu_type=row.gpu_type,
        gpu_memory_mib=row.gpu_memory_mib,
        topology=tuple(row.topology or ()),
        start_delay=row.start_delay,
        preemption_grace=row.preemption_grace,
        starvation_hold_after=row.starvation_hold_after,
        packing=Packing(row.packing or "fragmentation"),
        typical_pods=parse_typical_pods(row.typical_pods),
        default_time_limit=row.default_time_limit,
        max_time_limit=row.max_time_limit,
    )


def node_state(row: NodeRow) -> NodeState:
    """What the scheduler sees: down; cordoned (cordoned, or health unknown:
    it keeps its work and takes no new pods); else ready."""
    return node_state_of(row.health, row.cordoned)


def node_state_of(health: str, cordoned: bool) -> NodeState:
    """:func:`node_state` of a node's health and cordon flag."""
    if health == "down":
        return NodeState.DOWN
    if cordoned or health == "unknown":
        return NodeState.CORDONED
    return NodeState.READY


def typical_pods_json(pool: Pool) -> list[dict[str, Any]] | None:
    """The pool's typical pods as stored and shown (None: the default prior)."""
    if pool.typical_pods is None:
        return None
    return [t.to_json() for t in pool.typical_pods]


def node_from_row(row: NodeRow) -> Node:
    return Node(
        name=row.name,
        pool=row.pool,
        gpus=row.gpus,
        gpu_type=row.gpu_type,
        gpu_memory_mib=row.gpu_memory_mib,
        labels=dict(row.labels or {}),
        state=node_state(row),
        cpu_milli=row.cpu_milli,
        memory_mib=row.memory_mib,
    )


def exiting_from_row(row: ExitingRow) -> Exiting:
    return Exiting(
        workload_id=row.workload_id,
        attempt=row.attempt,
        team=row.team,
        pool=row.pool,
        placement=placement_from_json(row.placement),
        exits_at=int(row.exits_at),
        part=int(row.part or 0),
    )
