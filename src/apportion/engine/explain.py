"""Reasons a workload waits (SPEC section 7), with messages that give numbers."""

from __future__ import annotations

from fractions import Fraction

from apportion.domain.lifecycle import WorkloadState
from apportion.domain.quantities import format_gpus as _format_gpus
from apportion.domain.reasons import Reason, ReasonCode
from apportion.domain.workload import Placement
from apportion.engine.placement import FailureKind, PlacementResult
from apportion.engine.pool_state import PoolState

_BY_FAILURE = {
    FailureKind.NO_NODE_FITS: ReasonCode.NO_ELIGIBLE_POOL,
    FailureKind.TOPOLOGY_UNSATISFIABLE: ReasonCode.TOPOLOGY_UNSATISFIABLE,
    FailureKind.TOPOLOGY_WAITING: ReasonCode.TOPOLOGY_WAITING,
    FailureKind.HOST_RESOURCES: ReasonCode.HOST_RESOURCES,
    FailureKind.FRAGMENTED: ReasonCode.FRAGMENTED,
    FailureKind.GANG_WAITING: ReasonCode.GANG_WAITING,
    FailureKind.WAITING_FOR_CAPACITY: ReasonCode.WAITING_FOR_CAPACITY,
}

_ORDER = {code: i for i, code in enumerate(ReasonCode)}

_GPUS_TEXT: dict[int | Fraction, str] = {}  # memo of format_gpus (the same few amounts recur)
_GPUS_KEPT = 4096


def format_gpus(milli: int | Fraction) -> str:
    """The domain's ``format_gpus``, remembered (it depends on the value only)."""
    text = _GPUS_TEXT.get(milli)
    if text is None:
        if len(_GPUS_TEXT) >= _GPUS_KEPT:
            _GPUS_TEXT.clear()
        text = _GPUS_TEXT[milli] = _format_gpus(milli)
    return text


def needs(ps: PoolState, w: WorkloadState) -> str:
    """``needs 8 GPUs`` / ``needs 4 x 0.5 GPU`` for messages."""
    spec = w.spec
    key = (ps.charge(w), spec.pods, spec.min_pods)
    text = _NEEDS_TEXT.get(key)
    if text is None:
        if len(_NEEDS_TEXT) >= _GPUS_KEPT:
            _NEEDS_TEXT.clear()
        text = _NEEDS_TEXT[key] = _needs(*key)
    return text


_NEEDS_TEXT: dict[tuple[int, int, int], str] = {}


def _needs(charge: int, pods: int, min_pods: int) -> str:
    if pods == 1:
        return f"needs {format_gpus(charge)} GPU{'s' if charge != 1000 else ''}"
    count = f"{min_pods}-{pods}" if min_pods < pods else str(pods)
    return f"needs {count} pods x {format_gpus(charge)} GPU"


def needs_any(w: WorkloadState) -> str:
    """``needs ...`` without a pool (memory-sized requests say MiB)."""
    spec = w.spec
    each = spec.request.describe()
    if spec.pods == 1:
        return f"needs {each}"
    return f"needs {spec.pods} pods x {each}"


def first(reasons: list[Reason]) -> Reason:
    """The reason whose code comes first in SPEC section 7's table."""
    return min(reasons, key=lambda r: _ORDER[r.code])


def never_reason(ps: PoolState, w: WorkloadState) -> Reason | None:
    """Why ``w`` could never run in this pool, or None if it could.

    It depends only on the spec, the tree and the pool's nodes, none of which
    change during a PoolState's life, so it is kept per workload there.
    """
    known = ps.never.get(w.id)
    if known is not None and known[0] is w.spec:
        return known[1]
    reason = _never_reason(ps, w)
    ps.never[w.id] = (w.spec, reason)
    return reason


def _never_reason(ps: PoolState, w: WorkloadState) -> Reason | None:
    led = ps.ledger
    min_size = w.spec.min_pods * ps.charge(w)
    pool = ps.pool.name
    if w.spec.is_reserved and min_size > led.path_reservation(w.team):
        return Reason(
            ReasonCode.RESERVATION_TOO_SMALL,
            f"{needs(ps, w)} reserved in pool {pool}; the reservations on team {w.team}'s "
            f"path hold at most {format_gpus(led.path_reservation(w.team))}: raise a reservation "
            "or submit it as elastic",
        )
    result = ps.can_ever_place(w)
    if result is not None and result.failure is FailureKind.TOPOLOGY_UNSATISFIABLE:
        return Reason(ReasonCode.TOPOLOGY_UNSATISFIABLE, f"pool {pool}: {result.message}")
    smallest = led.smallest_cap(w.team)
    if smallest is not None and min_size > smallest.cap:
        return Reason(
            ReasonCode.NO_ELIGIBLE_POOL,
            f"{needs(ps, w)}; burst cap of team {smallest.team} in pool {pool} is "
            f"{format_gpus(smallest.cap)}: raise its burst limit or reservation",
        )
    if result is not None:
        return Reason(ReasonCode.NO_ELIGIBLE_POOL, f"pool {pool}: {result.message}")
    return None


def quota_reason(ps: PoolState, w: WorkloadState, size: int) -> Reason | None:
    """RESERVATION_EXHAUSTED or BURST_LIMIT_REACHED if quota refuses ``size`` now."""
    led = ps.ledger
    if w.spec.is_reserved and not led.reserved_fits(w.team, size):
        room = led.reserved_room(w.team)
        return Reason(
            ReasonCode.RESERVATION_EXHAUSTED,
            f"{needs(ps, w)}; team {w.team}'s reservation in pool {ps.pool.name} has "
            f"{format_gpus(room)} free (reserved in use on its path: "
            f"{format_gpus(led.reserved_usage(w.team))} of "
            f"{format_gpus(led.path_reservation(w.team))})",
        )
    breach = led.cap_breach(w.team, size)
    if breach is not None:
        return Reason(
            ReasonCode.BURST_LIMIT_REACHED,
            f"{needs(ps, w)}; team {breach.team} uses {format_gpus(breach.usage)} of its "
            f"burst cap {format_gpus(breach.cap)} in pool {ps.pool.name}",
        )
    return None


def fit_reason(
    ps: PoolState, w: WorkloadState, result: PlacementResult, others_elastic: int
) -> Reason:
    """Turn a failed placement into a reason; ``others_elastic`` is the milli of
    other teams' elastic work in the pool that 6.4 did not let W take."""
    failure = result.failure or FailureKind.WAITING_FOR_CAPACITY
    code = _BY_FAILURE[failure]
    base = result.message or needs(ps, w)
    if not base.startswith("needs"):
        base = f"{needs(ps, w)}; {base}"
    if code is ReasonCode.WAITING_FOR_CAPACITY and others_elastic > 0:
        return Reason(
            ReasonCode.FAIR_SHARE,
            f"{base}; other teams' elastic work holds {format_gpus(others_elastic)} GPUs in "
            f"pool {ps.pool.name}, and the fair-share rules do not let this workload take "
            f"enough of it to make room (entitlement of team "
            f"{w.team}: {format_gpus(ps.entitlement(w.team))}, in use "
            f"{format_gpus(ps.ledger.usage(w.team))})",
        )
    return Reason(code, base)


def preempting_reason(
    ps: PoolState, w: WorkloadState, victims: int, milli: int, placement: Placement = (),
) -> Reason:
    """PREEMPTING: what W's nomination (``placement``, else its own) waits for.
    When its own victims free nothing that must exit (it fits on devices that
    earlier victims still hold in their grace, or it took only nominations),
    the message names the workloads whose devices it waits for."""
    nominated = placement or w.nomination
    if milli == 0 and nominated:
        holders = sorted({owner[0] for owner in ps.cluster.exiting_on(nominated)})
        if holders:
            named = ", ".join(str(i) for i in holders[:5])
            more = f" and {len(holders) - 5} more" if len(holders) > 5 else ""
            return Reason(
                ReasonCode.PREEMPTING,
                f"{needs(ps, w)}; waiting for the devices of preempted workload"
                f"{'s' if len(holders) != 1 else ''} {named}{more} to be released "
                f"(preemption grace) in pool {ps.pool.name}",
            )
    return Reason(
        ReasonCode.PREEMPTING,
        f"{needs(ps, w)}; waiting for {victims} preempted workload"
        f"{'s' if victims != 1 else ''} ({format_gpus(milli)} GPUs) to exit in pool "
        f"{ps.pool.name}",
    )
