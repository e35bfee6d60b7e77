"""Apply a Plan to workload states: the one place where decisions become
lifecycle transitions. The simulator and the service both call it, so a plan
means the same thing everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from apportion.domain.lifecycle import (
    Exiting,
    Status,
    WorkloadState,
    pods_phrase,
    requeue,
    shrink,
    transition,
)
from apportion.domain.workload import placement_milli
from apportion.engine.plan import Decision, DecisionKind, Plan


@dataclass(frozen=True, slots=True)
class Preemption:
    """A preemption as users see it: who, by whom, how many GPUs, when.

    ``pods`` names the pods a shrink took (the victim kept running on the
    others); empty when the whole attempt ended.
    """

    at: int
    victim: int
    by: int
    milli: int
    attempt: int
    exits_at: int
    pods: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Applied:
    """The states after a plan, and what changed.

    ``states`` holds every workload passed in (terminal ones included, so a
    caller can store them); ``exiting`` the devices still held by victims.
    """

    states: dict[int, WorkloadState]
    exiting: tuple[Exiting, ...]
    changed: tuple[int, ...]
    preemptions: tuple[Preemption, ...]


def apply_plan(
    states: Mapping[int, WorkloadState], exiting: Sequence[Exiting], plan: Plan
) -> Applied:
    """Return new states after applying every decision of ``plan`` in order.

    Nothing passed in is modified. A decision about an unknown workload is a bug
    (KeyError); one that the lifecycle forbids raises IllegalTransition.
    """
    out = dict(states)
    leaving = list(exiting)
    changed: dict[int, None] = {}
    preemptions: list[Preemption] = []
    cause = f"cycle {plan.cycle_id}"
    for d in plan.decisions:
        w = out[d.workload_id]
        new = _apply_one(w, d, plan.now, cause, leaving, preemptions)
        if new is not w:
            out[d.workload_id] = new
            changed[d.workload_id] = None
    return Applied(out, tuple(leaving), tuple(changed), tuple(preemptions))


def _apply_one(
    w: WorkloadState,
    d: Decision,
    now: int,
    cause: str,
    leaving: list[Exiting],
    preemptions: list[Preemption],
) -> WorkloadState:
    kind = d.kind
    msg = d.message
    if kind is DecisionKind.ROUTE:
        return transition(w, Status.QUEUED, now, cause, msg or f"pool {d.pool} chosen",
                          pool=d.pool, reason=d.reason, head_since=None)
    if kind is DecisionKind.UNROUTE:
        return transition(w, Status.PENDING, now, cause, msg, pool=None, reason=d.reason,
                          nomination=(), is_hold=False, head_since=None)
    if kind is DecisionKind.MOVE:
        return replace(w, pool=d.pool, reason=d.reason, nomination=(), is_hold=False,
                       head_since=None)
    if kind is DecisionKind.START:
        return transition(w, Status.STARTING, now, cause, msg or "admitted and placed",
                          placement=d.placement, pool=d.pool or w.pool, head_since=None)
    if kind is DecisionKind.PREEMPT:
        return _preempt(w, d, now, cause, leaving, preemptions)
    if kind is DecisionKind.NOMINATE:
        return replace(w, nomination=d.placement, is_hold=False, reason=d.reason)
    if kind is DecisionKind.HOLD:
        return replace(w, nomination=d.placement, is_hold=True, reason=d.reason)
    if kind is DecisionKind.DENOMINATE:
        return replace(w, nomination=(), is_hold=False, reason=d.reason)
    # WAIT: only the reason (and when it became head of line) change.
    head = d.head_since
    if w.reason == d.reason and w.head_since == head:
        return w
    return replace(w, reason=d.reason, head_since=head)


def _preempt(
    w: WorkloadState,
    d: Decision,
    now: int,
    cause: str,
    leaving: list[Exiting],
    preemptions: list[Preemption],
) -> WorkloadState:
    exits_at = d.exits_at if d.exits_at is not None else now
    if d.pods:
        return _shrink(w, d, now, cause, exits_at, leaving, preemptions)
    milli = placement_milli(w.placement)
    victim = transition(
        w,
        Status.PREEMPTED,
        now,
        cause,
        d.message or f"preempted by workload {d.by}",
        preempted_by=d.by,
        ended_at=exits_at,
    )
    preemptions.append(Preemption(now, w.id, d.by or 0, milli, w.attempt, exits_at))
    if exits_at > now and w.pool is not None:
        leaving.append(Exiting(w.id, w.attempt, w.team, w.pool, w.placement, exits_at))
    if w.spec.requeue_on_preemption:
        return requeue(victim, now, cause, "requeued after preemption")
    return victim


def _shrink(
    w: WorkloadState,
    d: Decision,
    now: int,
    cause: str,
    exits_at: int,
    leaving: list[Exiting],
    preemptions: list[Preemption],
) -> WorkloadState:
    """SPEC 6.5's shrink: the taken pods stop (holding their devices for the
    grace), the workload stays Running on the rest."""
    taken = tuple(w.placement[i] for i in sorted(d.pods))
    by = f"workload {d.by}" if d.by is not None else "the scheduler"
    message = d.message or f"shrunk: {pods_phrase(d.pods)} preempted by {by}"
    shrunk = shrink(w, d.pods, now, cause, message)
    preemptions.append(
        Preemption(now, w.id, d.by or 0, placement_milli(taken), w.attempt, exits_at, d.pods)
    )
    if exits_at > now and w.pool is not None:
        leaving.append(Exiting(w.id, w.attempt, w.team, w.pool, taken, exits_at,
                               part=min(d.pods) + 1))
    return shrunk
