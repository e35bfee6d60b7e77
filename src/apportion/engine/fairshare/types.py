"""What the fair-share computation takes and gives: one workload's demand
(:class:`DemandItem`) and a pool's :class:`Entitlements`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from apportion.engine.fairshare.reserved import OrderKey

_ZERO = Fraction(0)


@dataclass(frozen=True, slots=True)
class DemandItem:
    """One workload's demand in a pool (milli-GPU), as the caller counts it.

    The caller leaves out work that could never run. Reserved work is ordered
    by (priority descending, submitted_at, workload_id).
    """

    team: str
    is_reserved: bool
    priority: int
    milli: int
    submitted_at: int = 0
    workload_id: int = 0

    @property
    def order_key(self) -> OrderKey:
        return (-self.priority, self.submitted_at, self.workload_id)


@dataclass(frozen=True, slots=True)
class Entitlements:
    """Entitlements of every team in one pool, exact, in milli-GPU.

    ``by_team`` holds every team of the tree, leaf or not: the total granted to
    its subtree. ``surplus`` is step 3's surplus. ``counters`` count work done
    (teams_visited, levels, items, reserved_pieces, fills). ``scale`` (the
    least common denominator of ``by_team``, 0 when not given) and ``scaled``
    (``by_team`` times it, as ints; shared, never to be changed) serve exact
    comparisons without Fractions.
    """

    pool: str
    capacity: int
    by_team: Mapping[str, Fraction]
    surplus: Fraction
    counters: Mapping[str, int]
    scale: int = field(default=0, compare=False, repr=False)
    scaled: Mapping[str, int] = field(default_factory=dict, compare=False, repr=False)

    def of(self, team: str) -> Fraction:
        """The entitlement of ``team``; 0 for an unknown team or no grant."""
        return self.by_team.get(team, _ZERO)
