"""Who holds devices in the book: owners of a workload's claim and pods.

An owner is ``(workload id, attempt, part)``: part 0 is a claim, or the first
``min_pods`` pods (all of them unless the workload scales elastically); part
i + 1 is pod i of an elastically scaled workload, held apart so that a shrink
(SPEC 6.5) can take exactly it; an exiting shrink's devices are under the
lowest pod taken + 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from apportion.domain.lifecycle import Exiting, WorkloadState
from apportion.domain.workload import Placement
from apportion.engine.placement import Owner
from apportion.engine.preemption.index import PodVictim, split_pods

if TYPE_CHECKING:
    from apportion.engine.pool_state import PoolState


def owner_of(w: WorkloadState) -> Owner:
    """The book's owner of ``w``'s claim, or of its first ``min_pods`` pods (all
    of them unless it scales elastically); of the one pod of a PodVictim."""
    if isinstance(w, PodVictim):
        return (w.id, w.attempt, w.pod + 1)
    return (w.id, w.attempt, 0)


def parts_of(w: WorkloadState, placement: Placement | None = None) -> list[tuple[Owner, Placement]]:
    """``w``'s placed pods as the book holds them: an elastically scaled
    workload's pods beyond ``min_pods`` each under an owner of its own (part
    = pod index + 1), so a shrink (SPEC 6.5) can take exactly them."""
    if placement is None:
        placement = w.placement
    spec = w.spec
    base = (w.id, w.attempt, 0)
    if spec.min_pods >= spec.pods or len(placement) <= spec.min_pods:
        return [(base, placement)]
    out: list[tuple[Owner, Placement]] = [(base, placement[:spec.min_pods])]
    out += [((w.id, w.attempt, i + 1), (placement[i],))
            for i in range(spec.min_pods, len(placement))]
    return out


def freed_by(
    ps: PoolState, v: WorkloadState, taken: Mapping[int, set[int]]
) -> tuple[list[Owner], int]:
    """The owners, and the milli, that taking candidate ``v`` frees now, with
    the pods in ``taken`` (id -> pod indices) already taken as shrinks: a
    pod frees itself; a whole workload everything it still holds."""
    if isinstance(v, PodVictim):
        return [owner_of(v)], v.placement[0].milli
    full = ps.victims.milli.get(v.id)
    if full is None:
        full = v.placed_milli if v.status.is_placed else v.nominated_milli
    owners = [owner_of(v)]
    done = taken.get(v.id, ())
    for i in split_pods(v):
        if i in done:
            full -= v.placement[i].milli
        else:
            owners.append((v.id, v.attempt, i + 1))
    return owners, full


def owners_of(w: WorkloadState) -> list[Owner]:
    """Every owner of placed ``w``'s pods (see :func:`parts_of`)."""
    base = (w.id, w.attempt, 0)
    return [base, *((w.id, w.attempt, i + 1) for i in split_pods(w))]


def exit_owner(ex: Exiting) -> Owner:
    """The book's owner of an exiting victim's devices."""
    return (ex.workload_id, ex.attempt, ex.part)
