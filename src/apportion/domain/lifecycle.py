"""The workload lifecycle of SPEC 3.1: one transition table, one function that
changes a workload's status, one event per change.

``WorkloadState`` is immutable; :func:`transition` returns a new state with the
event appended, or raises IllegalTransition (carrying the history).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, fields, replace

from apportion.domain.errors import IllegalTransition
from apportion.domain.reasons import Reason
from apportion.domain.workload import Placement, WorkloadSpec, placement_milli


class Status(enum.StrEnum):
    PENDING = "Pending"
    QUEUED = "Queued"
    STARTING = "Starting"
    RUNNING = "Running"
    COMPLETED = "Completed"
    FAILED = "Failed"
    PREEMPTED = "Preempted"
    CANCELLED = "Cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL

    @property
    def is_waiting(self) -> bool:
        return self in (Status.PENDING, Status.QUEUED)

    @property
    def is_placed(self) -> bool:
        return self in (Status.STARTING, Status.RUNNING)


TERMINAL = frozenset({Status.COMPLETED, Status.FAILED, Status.PREEMPTED, Status.CANCELLED})

S = Status
#: Every allowed move, and what it means. Nothing else is allowed.
ALLOWED: dict[tuple[Status, Status], str] = {
    (S.PENDING, S.QUEUED): "a pool was chosen",
    (S.QUEUED, S.PENDING): "its pool was removed or can no longer ever hold it",
    (S.QUEUED, S.STARTING): "admitted and placed",
    (S.STARTING, S.RUNNING): "at least min_pods pods run",
    (S.RUNNING, S.COMPLETED): "finished successfully",
    (S.RUNNING, S.FAILED): "failed (node down, executor error, non-zero exit)",
    (S.STARTING, S.FAILED): "failed while starting (node down, executor error)",
    (S.STARTING, S.PREEMPTED): "reclaimed by the scheduler",
    (S.RUNNING, S.PREEMPTED): "reclaimed by the scheduler",
    (S.PENDING, S.CANCELLED): "cancelled by a user",
    (S.QUEUED, S.CANCELLED): "cancelled by a user",
    (S.STARTING, S.CANCELLED): "cancelled by a user",
    (S.RUNNING, S.CANCELLED): "cancelled by a user",
}


@dataclass(frozen=True, slots=True)
class Event:
    """One transition: when, which attempt, to which status, caused by what."""

    at: int
    attempt: int
    status: Status
    cause: str = ""
    message: str = ""


@dataclass(frozen=True, slots=True)
class Attempt:
    """A finished attempt (kept when requeue_on_preemption starts a new one)."""

    attempt: int
    status: Status
    pool: str | None
    placement: Placement
    started_at: int | None
    running_at: int | None
    ended_at: int | None
    preempted_by: int | None


@dataclass(frozen=True, slots=True)
class WorkloadState:
    """A workload as the engine sees it: spec plus the current attempt's state.

    - ``nomination``: devices reserved for a Queued workload (SPEC 6.6/6.7);
      ``is_hold`` tells a starvation hold (no victims) from a preemption's.
    A Preempted victim that still holds its devices during the pool's grace
    period is tracked as an :class:`Exiting` entry, not here, so a requeued
    new attempt and its old attempt's devices can coexist.
    - ``head_since``: when it became head of its pool's line (starvation hold).
    """

    id: int
    spec: WorkloadSpec
    submitted_at: int
    status: Status = Status.PENDING
    attempt: int = 1
    pool: str | None = None
    placement: Placement = ()
    nomination: Placement = ()
    is_hold: bool = False
    started_at: int | None = None
    running_at: int | None = None
    ended_at: int | None = None
    preempted_by: int | None = None
    head_since: int | None = None
    reason: Reason | None = None
    events: tuple[Event, ...] = ()
    attempts: tuple[Attempt, ...] = ()
    #: job control (issue 16): held by a user (waits with reason HELD until
    #: released); member ``array_index`` of array ``array_id``, of which at
    #: most ``array_limit`` run at once
    held: bool = False
    array_id: int | None = None
    array_index: int | None = None
    array_limit: int | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def team(self) -> str:
        return self.spec.team

    @property
    def placed_milli(self) -> int:
        return placement_milli(self.placement)

    @property
    def nominated_milli(self) -> int:
        return placement_milli(self.nomination)

    def history(self) -> tuple[str, ...]:
        return tuple(f"{e.status.value}@{e.at}" for e in self.events)


@dataclass(frozen=True, slots=True)
class Exiting:
    """A preempted attempt's pods, still holding their devices until ``exits_at``.

    ``part`` is 0 when the whole attempt was preempted; for the pods a shrink
    took (SPEC 6.5, shrink before kill) it is the lowest taken pod index + 1,
    unique within the attempt because a shrink always takes the highest pods
    still running, so one attempt can have several exiting entries. The pods
    keep their CPU and memory (``cpu_milli``, ``memory_mib`` per pod) as long
    as their devices.
    """

    workload_id: int
    attempt: int
    team: str
    pool: str
    placement: Placement
    exits_at: int
    part: int = 0
    #: each pod's host request, held with its devices until it has exited
    cpu_milli: int = 0
    memory_mib: int = 0


_FIELDS = tuple(f.name for f in fields(WorkloadState))
_new = object.__new__
_set = object.__setattr__


def evolve(state: WorkloadState, **changes: object) -> WorkloadState:
    """``dataclasses.replace`` for a WorkloadState, without its per-call field
    checks (twice as fast; a cycle makes one per decision). Unknown field
    names raise TypeError, as replace does."""
    unknown = changes.keys() - _FIELDS
    if unknown:
        raise TypeError(f"WorkloadState has no field {sorted(unknown)[0]!r}")
    new = _new(WorkloadState)
    for name in _FIELDS:
        _set(new, name, changes[name] if name in changes else getattr(state, name))
    return new


def is_allowed(current: Status, target: Status) -> bool:
    return (current, target) in ALLOWED


def submitted(
    workload_id: int, spec: WorkloadSpec, at: int, cause: str = "submit", message: str = ""
) -> WorkloadState:
    """A new workload: Pending, attempt 1, with its first event."""
    event = Event(at, 1, Status.PENDING, cause, message or "submitted")
    return WorkloadState(id=workload_id, spec=spec, submitted_at=at, events=(event,))


def transition(
    state: WorkloadState,
    target: Status,
    at: int,
    cause: str = "",
    message: str = "",
    **changes: object,
) -> WorkloadState:
    """Move ``state`` to ``target``: the one function that changes a status.

    ``changes`` sets other fields at the same time (pool, placement, ...).
    Raises IllegalTransition if the table does not allow the move; terminal
    states are final.
    """
    if not is_allowed(state.status, target):
        raise IllegalTransition(state.name, state.status.value, target.value, state.history())
    event = Event(at, state.attempt, target, cause, message or ALLOWED[(state.status, target)])
    extra: dict[str, object] = dict(changes)
    if target is Status.STARTING:
        extra.setdefault("started_at", at)
    if target is Status.RUNNING:
        extra.setdefault("running_at", at)
    if target.is_terminal:
        extra.setdefault("ended_at", at)
        extra.setdefault("nomination", ())
        extra.setdefault("is_hold", False)
        extra.setdefault("reason", None)
    if target.is_placed:
        extra.setdefault("reason", None)
        extra.setdefault("nomination", ())
        extra.setdefault("is_hold", False)
    return evolve(state, status=target, events=(*state.events, event), **extra)


def shrink(
    state: WorkloadState, pods: tuple[int, ...], at: int, cause: str = "", message: str = ""
) -> WorkloadState:
    """Take ``pods`` (pod indices) away from a Running elastically scaled
    workload (SPEC 6.5, shrink before kill): it stays Running on the others.

    Pods are numbered by their place in ``placement``; a shrink takes the
    newest, i.e. the highest indices, so the pods left are always
    ``placement[:n]`` and keep their numbers. The event has status Running and
    says which pods went. Raises IllegalTransition unless the workload is
    Running, ``pods`` are exactly its highest pod indices, and at least
    ``min_pods`` pods stay.
    """
    n = len(state.placement)
    keep = n - len(pods)
    if (
        state.status is not Status.RUNNING
        or not pods
        or tuple(sorted(pods)) != tuple(range(keep, n))
        or keep < state.spec.min_pods
    ):
        raise IllegalTransition(
            state.name, state.status.value, f"Running with pods {list(pods)} taken",
            state.history(),
        )
    note = message or f"shrunk: {pods_phrase(pods)} preempted"
    event = Event(at, state.attempt, Status.RUNNING, cause, note)
    return replace(state, placement=state.placement[:keep], events=(*state.events, event))


def pods_phrase(pods: tuple[int, ...]) -> str:
    """``pod 7`` or ``pods 5-7`` (a shrink's pods are consecutive)."""
    lo, hi = min(pods), max(pods)
    return f"pod {lo}" if lo == hi else f"pods {lo}-{hi}"


def requeue(state: WorkloadState, at: int, cause: str = "", message: str = "") -> WorkloadState:
    """Start a new attempt in Pending after a preemption (requeue_on_preemption).

    The finished attempt is kept in ``attempts``; the new one keeps the original
    submission time (its place in line) and the full duration.
    """
    if state.status is not Status.PREEMPTED:
        raise IllegalTransition(
            state.name, state.status.value, "Pending (requeue)", state.history()
        )
    return _next_attempt(state, at, cause, message or "requeued after preemption")


def requeue_after_failure(
    state: WorkloadState, at: int, cause: str = "", message: str = ""
) -> WorkloadState:
    """A Starting/Running attempt fails (its node went down) and, as after a
    preemption with ``requeue_on_preemption``, a new attempt starts at once.

    Two events: the attempt's ``Failed`` (with ``message``), then attempt + 1 in
    ``Pending``. The failed attempt is kept in ``attempts`` with status Failed;
    the new one keeps the original submission time (its place in line) and the
    full duration. Raises IllegalTransition unless Starting or Running.
    """
    if not state.status.is_placed:
        raise IllegalTransition(
            state.name, state.status.value, "Failed, then Pending (requeue)", state.history()
        )
    failed = transition(state, Status.FAILED, at, cause, message)
    note = f"requeued after a failure: {message}" if message else "requeued after a failure"
    return _next_attempt(failed, at, cause, note)


def _next_attempt(state: WorkloadState, at: int, cause: str, note: str) -> WorkloadState:
    """Keep the ended attempt in ``attempts`` and start attempt + 1 in Pending,
    with the original submission time and a clean slate for everything else."""
    event = Event(at, state.attempt + 1, Status.PENDING, cause, note)
    return replace(
        state,
        status=Status.PENDING,
        attempt=state.attempt + 1,
        pool=None,
        placement=(),
        nomination=(),
        is_hold=False,
        started_at=None,
        running_at=None,
        ended_at=None,
        preempted_by=None,
        head_since=None,
        reason=None,
        events=(*state.events, event),
        attempts=(*state.attempts, _attempt_of(state)),
    )


def _attempt_of(state: WorkloadState) -> Attempt:
    return Attempt(
        attempt=state.attempt,
        status=state.status,
        pool=state.pool,
        placement=state.placement,
        started_at=state.started_at,
        running_at=state.running_at,
        ended_at=state.ended_at,
        preempted_by=state.preempted_by,
    )


def all_attempts(state: WorkloadState) -> tuple[Attempt, ...]:
    """Every attempt, finished ones first, the current one last."""
    return (*state.attempts, _attempt_of(state))
