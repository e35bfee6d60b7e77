"""Decisions become lifecycle transitions here, in one function (:func:`effect`).

The engine's statement calls it while a cycle decides; the simulator and the
service call :func:`apply_plan`, which runs it over a whole plan. So a
decision means the same thing everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from apportion.domain.lifecycle import (
    Exiting,
    Status,
    WorkloadState,
    evolve,
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
    cause = cycle_cause(plan.cycle_id)
    for d in plan.decisions:
        w = out[d.workload_id]
        done = effect(w, d, plan.now, cause)
        if done.exiting is not None:
            leaving.append(done.exiting)
        if done.preemption is not None:
            preemptions.append(done.preemption)
        if done.state is not w:
            out[d.workload_id] = done.state
            changed[d.workload_id] = None
    return Applied(out, tuple(leaving), tuple(changed), tuple(preemptions))


def cycle_cause(cycle_id: int) -> str:
    """The cause written into the events of a cycle's decisions."""
    return f"cycle {cycle_id}"


@dataclass(frozen=True, slots=True)
class Effect:
    """What one decision does to its workload: the new state, and for a
    preemption the devices left exiting (None with no grace) and the record."""

    state: WorkloadState
    exiting: Exiting | None = None
    preemption: Preemption | None = None


def effect(w: WorkloadState, d: Decision, now: int, cause: str) -> Effect:
    """The one function that turns a decision into a workload's next state.

    The engine's :class:`~apportion.engine.statement.Statement` calls it for
    its working copy as each decision is taken, and :func:`apply_plan` for the
    stored states afterwards, so both mean the same thing by a decision.
    """
    kind = d.kind
    msg = d.message
    if kind is DecisionKind.PREEMPT:
        return _preempt(w, d, now, cause)
    if kind is DecisionKind.ROUTE:
        new = transition(w, Status.QUEUED, now, cause, msg or f"pool {d.pool} chosen",
                         pool=d.pool, reason=d.reason, head_since=None)
    elif kind is DecisionKind.UNROUTE:
        new = transition(w, Status.PENDING, now, cause, msg, pool=None, reason=d.reason,
                         nomination=(), is_hold=False, head_since=None)
    elif kind is DecisionKind.MOVE:
        new = evolve(w, pool=d.pool, reason=d.reason, nomination=(), is_hold=False,
                      head_since=None)
    elif kind is DecisionKind.START:
        new = transition(w, Status.STARTING, now, cause, msg or "admitted and placed",
                         placement=d.placement, pool=d.pool or w.pool, head_since=None)
    elif kind is DecisionKind.NOMINATE:
        new = evolve(w, nomination=d.placement, is_hold=False, reason=d.reason)
    elif kind is DecisionKind.HOLD:
        new = evolve(w, nomination=d.placement, is_hold=True, reason=d.reason)
    elif kind is DecisionKind.DENOMINATE:
        new = evolve(w, nomination=(), is_hold=False, reason=d.reason)
    elif w.reason == d.reason and w.head_since == d.head_since:
        new = w  # WAIT: only the reason (and when it became head of line) change
    else:
        new = evolve(w, reason=d.reason, head_since=d.head_since)
    return Effect(new)


def _preempt(w: WorkloadState, d: Decision, now: int, cause: str) -> Effect:
    exits_at = d.exits_at if d.exits_at is not None else now
    if d.pods:
        return _shrink(w, d, now, cause, exits_at)
    victim = transition(
        w,
        Status.PREEMPTED,
        now,
        cause,
        d.message or f"preempted by workload {d.by}",
        preempted_by=d.by,
        ended_at=exits_at,
    )
    record = Preemption(now, w.id, d.by or 0, placement_milli(w.placement), w.attempt, exits_at)
    leaving = None
    if exits_at > now and w.pool is not None:
        leaving = Exiting(w.id, w.attempt, w.team, w.pool, w.placement, exits_at,
                          cpu_milli=w.spec.cpu_milli, memory_mib=w.spec.memory_mib)
    if w.spec.requeue_on_preemption:
        victim = requeue(victim, now, cause, "requeued after preemption")
    return Effect(victim, leaving, record)


def _shrink(w: WorkloadState, d: Decision, now: int, cause: str, exits_at: int) -> Effect:
    """SPEC 6.5's shrink: the taken pods stop (holding their devices for the
    grace), the workload stays Running on the rest."""
    taken = tuple(w.placement[i] for i in sorted(d.pods))
    by = f"workload {d.by}" if d.by is not None else "the scheduler"
    message = d.message or f"shrunk: {pods_phrase(d.pods)} preempted by {by}"
    shrunk = shrink(w, d.pods, now, cause, message)
    record = Preemption(now, w.id, d.by or 0, placement_milli(taken), w.attempt, exits_at, d.pods)
    leaving = None
    if exits_at > now and w.pool is not None:
        leaving = Exiting(w.id, w.attempt, w.team, w.pool, taken, exits_at, part=min(d.pods) + 1,
                          cpu_milli=w.spec.cpu_milli, memory_mib=w.spec.memory_mib)
    return Effect(shrunk, leaving, record)
