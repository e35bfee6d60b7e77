"""Scheduling policies other than the SPEC's, as switches over the same cycle.

``apportion replay`` (docs/replay.md) compares apportion's policy with the
ones users would pick instead. Each alternative is this frozen dataclass,
passed to the cycle in :class:`~apportion.engine.snapshot.CycleConfig`; the
default, :data:`SPEC_POLICY`, switches nothing off and the cycle takes
exactly the SPEC's path. The switches:

- ``preemption``: off, no victim search runs: waiting work waits for
  capacity to free up (fifo).
- ``order``: ``spec`` is SPEC 6.2 (class, priority, live share deficit,
  submission, id); ``arrival`` is submission time then id (fifo);
  ``priority`` is class, priority, submission time, id (strict-priority).
- ``quota_only``: entitlements are the SPEC's, each capped at the team's
  reservation in the pool (no surplus is split by bursting priority: work
  above a reservation is borrowed, first come, first served), and elastic
  work preempts only while its team, with it added, stays within that
  entitlement (reclaim up to quota, as Kueue and KAI do).

The organization a policy sees (one queue for fifo and strict-priority, no
tree for flat-fair-share) is chosen by the caller; this module only holds
what the cycle itself must do differently.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType

from apportion.domain.lifecycle import WorkloadState
from apportion.domain.org import OrgTree
from apportion.engine.fairshare.types import Entitlements

ORDERS = ("spec", "arrival", "priority")


@dataclass(frozen=True, slots=True)
class Policy:
    """What one cycle does differently from the SPEC (see the module doc)."""

    name: str = "apportion"
    preemption: bool = True
    order: str = "spec"
    quota_only: bool = False

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {self.order!r}")

    @property
    def is_spec(self) -> bool:
        return self.preemption and self.order == "spec" and not self.quota_only


SPEC_POLICY = Policy()


def order_key(policy: Policy, w: WorkloadState) -> tuple[int, ...]:
    """The waiting order of a policy whose order is not the SPEC's."""
    if policy.order == "arrival":
        return (w.submitted_at, w.id)
    return (0 if w.spec.is_reserved else 1, -w.spec.priority, w.submitted_at, w.id)


class FixedQueue:
    """Waiting workloads in a fixed order (no live deficits), with the
    :class:`~apportion.engine.waiting_order.WaitingQueue` interface."""

    def __init__(self, workloads: Iterable[WorkloadState], policy: Policy) -> None:
        self._order = sorted(workloads, key=lambda w: order_key(policy, w))

    def touch(self, teams: Iterable[str]) -> None:
        """Deficits play no part in this order."""

    def __iter__(self) -> Iterator[WorkloadState]:
        return iter(self._order)


def quota_entitlements(ents: Entitlements, tree: OrgTree) -> Entitlements:
    """Every team's entitlement capped at its reservation in the pool."""
    by_team = {
        team: min(value, Fraction(tree.reservation(team, ents.pool)))
        for team, value in ents.by_team.items()
    }
    return Entitlements(
        pool=ents.pool, capacity=ents.capacity, by_team=MappingProxyType(by_team),
        surplus=Fraction(0), counters=ents.counters,
    )


__all__ = ["ORDERS", "SPEC_POLICY", "FixedQueue", "Policy", "order_key", "quota_entitlements"]
