"""Job control before the engine (issue 16): one pure pass over a snapshot,
shared by the service's scheduler and the simulator.

:func:`gate` takes the snapshot a cycle would see and returns the one the
engine sees, plus the changes job control makes by itself:

1. time limits: a Running workload whose run reached its effective time limit
   (:func:`effective_time_limit`) ends ``Failed`` with reason ``TIME_LIMIT``,
   or, with ``requeue_on_timeout``, starts a new attempt in ``Pending``; its
   devices stay held for the pool's preemption grace (an ``Exiting`` entry,
   as after a preemption) and the agent is told to stop it (:class:`Stop`);
2. dependencies: a waiting workload whose dependency can no longer be met is
   ``Cancelled`` with reason ``DEPENDENCY_NEVER_SATISFIED``; one whose
   dependencies are not all met yet waits with reason ``DEPENDENCY``;
3. holds: a held waiting workload waits with reason ``HELD``;
4. arrays: of an array's waiting members that passed 1-3, only as many as its
   ``%N`` limit leaves room for (members Starting, Running or nominated count)
   go on, lowest index first; the others wait with reason ``ARRAY_LIMIT``.

Workloads gated by 2-4 are left out of the engine's snapshot: they take no
share, claim no device and start nothing. The engine itself knows nothing of
job control.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from apportion.domain.cluster import Pool
from apportion.domain.jobcontrol import DepCondition, Dependency, format_seconds
from apportion.domain.lifecycle import (
    Exiting,
    Status,
    WorkloadState,
    evolve,
    requeue_after_failure,
    transition,
)
from apportion.domain.reasons import Reason, ReasonCode
from apportion.domain.workload import Placement, WorkloadSpec
from apportion.engine.snapshot import Snapshot

TIME_LIMIT_CAUSE = "time limit"
DEPENDENCY_CAUSE = "dependency"

MET, WAIT, NEVER = "met", "wait", "never"


@dataclass(frozen=True, slots=True)
class Stop:
    """An attempt ended by its time limit: the agent stops its pods, which
    have ``grace`` seconds to exit."""

    workload_id: int
    attempt: int
    pool: str
    placement: Placement
    grace: int


@dataclass(frozen=True, slots=True)
class Gated:
    """What :func:`gate` made: the engine's snapshot, the new states of the
    workloads job control changed (by id), and the stops to send."""

    snapshot: Snapshot
    changed: dict[int, WorkloadState]
    stops: tuple[Stop, ...] = ()

    @property
    def is_identity(self) -> bool:
        return not self.changed and not self.stops


def effective_time_limit(spec: WorkloadSpec, pool: Pool | None) -> int | None:
    """The workload's time limit in ``pool``: its own, else the pool's default,
    never above the pool's maximum; None: no limit."""
    limit = spec.time_limit
    if pool is None:
        return limit
    if limit is None:
        limit = pool.default_time_limit
    if pool.max_time_limit is not None:
        limit = pool.max_time_limit if limit is None else min(limit, pool.max_time_limit)
    return limit


def timeout_at(w: WorkloadState, pool: Pool | None) -> int | None:
    """When a Running workload's time limit ends its run (None: never)."""
    if w.status is not Status.RUNNING or w.running_at is None:
        return None
    limit = effective_time_limit(w.spec, pool)
    return None if limit is None else w.running_at + limit


def dependency_state(dep: Dependency, status: Status | None) -> str:
    """MET, WAIT or NEVER for a dependency on a workload now in ``status``
    (None: no such workload, or one that is gone)."""
    if status is None:
        return NEVER
    if not status.is_terminal:
        return WAIT
    if dep.condition is DepCondition.ANY:
        return MET
    ok = status is Status.COMPLETED
    return MET if ok == (dep.condition is DepCondition.OK) else NEVER


def time_out(w: WorkloadState, pool: Pool, now: int) -> tuple[WorkloadState, Exiting | None, Stop]:
    """End ``w``'s run at its time limit: Failed (TIME_LIMIT), or requeued."""
    limit = effective_time_limit(w.spec, pool)
    text = f"ran past its time limit of {format_seconds(limit or 0)}"
    grace = pool.preemption_grace
    if w.spec.requeue_on_timeout:
        new = requeue_after_failure(w, now, TIME_LIMIT_CAUSE, text)
    else:
        new = transition(w, Status.FAILED, now, TIME_LIMIT_CAUSE, text,
                         reason=Reason(ReasonCode.TIME_LIMIT, text))
    leaving = None
    if grace > 0 and w.pool is not None:
        leaving = Exiting(w.id, w.attempt, w.team, w.pool, w.placement, now + grace,
                          cpu_milli=w.spec.cpu_milli, memory_mib=w.spec.memory_mib)
    return new, leaving, Stop(w.id, w.attempt, pool.name, w.placement, grace)


def gate(snapshot: Snapshot, outside: Mapping[int, Status] | None = None) -> Gated:
    """The engine's snapshot, and job control's own changes (module doc).

    ``outside`` gives the status of dependencies that are not in the snapshot
    (ended workloads); a dependency found in neither can never be met."""
    outside = outside or {}
    now = snapshot.now
    status_of: dict[int, Status] = dict(outside)
    status_of.update((w.id, w.status) for w in snapshot.workloads)
    changed: dict[int, WorkloadState] = {}
    stops: list[Stop] = []
    exiting: list[Exiting] = []
    keep: list[WorkloadState] = []
    gated_waiting: list[WorkloadState] = []
    array_ids: set[int] = set()
    for w in snapshot.workloads:
        if w.array_id is not None and w.array_limit is not None:
            array_ids.add(w.array_id)
        pool = snapshot.pools.get(w.pool or "")
        at = timeout_at(w, pool)
        if at is not None and pool is not None and now >= at:
            new, leaving, stop = time_out(w, pool, now)
            changed[w.id] = new
            stops.append(stop)
            if leaving is not None:
                exiting.append(leaving)
            status_of[w.id] = new.status
            if not new.status.is_terminal:
                keep.append(new)
            continue
        keep.append(w)
    # a time-out above may have ended a dependency: statuses are final now
    engine: list[WorkloadState] = []
    for w in keep:
        if not w.status.is_waiting:
            engine.append(w)
            continue
        reason = _waiting_gate(w, status_of)
        if reason is None:
            engine.append(w)
            continue
        if reason.code is ReasonCode.DEPENDENCY_NEVER_SATISFIED:
            new = transition(w, Status.CANCELLED, now, DEPENDENCY_CAUSE, reason.message,
                             reason=reason)
            changed[w.id] = new
            continue
        gated_waiting.append(w)
        _wait(changed, w, reason)
    if array_ids:
        engine = _array_limits(engine, array_ids, changed)
    if not changed and len(engine) == len(snapshot.workloads):
        return Gated(snapshot, {})
    gated = replace(snapshot, workloads=tuple(engine),
                    exiting=(*snapshot.exiting, *exiting))
    return Gated(gated, changed, tuple(stops))


def _wait(changed: dict[int, WorkloadState], w: WorkloadState, reason: Reason) -> None:
    """``w`` waits with ``reason`` (changed only if that is news); a gated
    workload keeps no nomination and no place as head of line."""
    if w.reason == reason and not w.nomination and w.head_since is None:
        return
    changed[w.id] = evolve(w, reason=reason, nomination=(), is_hold=False, head_since=None)


def _waiting_gate(w: WorkloadState, status_of: Mapping[int, Status]) -> Reason | None:
    never: list[str] = []
    waiting: list[str] = []
    for dep in w.spec.after:
        status = status_of.get(dep.workload_id)
        state = dependency_state(dep, status)
        if state == NEVER:
            seen = "does not exist" if status is None else f"ended {status.value}"
            never.append(f"workload {dep.workload_id} {seen} (after {dep.condition.value})")
        elif state == WAIT:
            waiting.append(f"{dep.workload_id} ({dep.condition.value})")
    if never:
        return Reason(ReasonCode.DEPENDENCY_NEVER_SATISFIED,
                      "DependencyNeverSatisfied: " + "; ".join(never))
    if w.held:
        return Reason(ReasonCode.HELD, "held by a user; release it to let it be scheduled")
    if waiting:
        return Reason(ReasonCode.DEPENDENCY, "waits for workload"
                      + ("s " if len(waiting) > 1 else " ") + ", ".join(waiting))
    return None


def _array_limits(
    engine: list[WorkloadState], array_ids: set[int], changed: dict[int, WorkloadState]
) -> list[WorkloadState]:
    """Keep at most ``array_limit`` members of each limited array running or
    about to start; the waiting rest (highest indexes first) wait."""
    busy: dict[int, int] = {}
    waiting: dict[int, list[WorkloadState]] = {}
    limit_of: dict[int, int] = {}
    for w in engine:
        aid = w.array_id
        if aid is None or aid not in array_ids or w.array_limit is None:
            continue
        limit_of[aid] = w.array_limit
        if w.status.is_placed or (w.nomination and not w.is_hold):
            busy[aid] = busy.get(aid, 0) + 1
        else:
            waiting.setdefault(aid, []).append(w)
    blocked: set[int] = set()
    for aid, members in waiting.items():
        room = max(0, limit_of[aid] - busy.get(aid, 0))
        members.sort(key=lambda m: (m.array_index or 0, m.id))
        for m in members[room:]:
            blocked.add(m.id)
            # the message names no changing count, so an idle cycle rewrites nothing
            _wait(changed, m, Reason(ReasonCode.ARRAY_LIMIT, (
                f"array {aid} runs at most {limit_of[aid]} members at once")))
    return [w for w in engine if w.id not in blocked] if blocked else engine
