"""Exact entitlements per pool (SPEC section 4).

``entitlements(tree, pool, capacity, demand)`` grants each leaf's demand in
four steps and reports, for every team, everything granted to its subtree:

1. reserved demand from the buckets on each leaf's path (own bucket first, then
   upward, each bucket serving its subtree's work by priority, submission, id);
2. elastic demand from what is left of the buckets: a leaf's own bucket serves
   that leaf; an ancestor's bucket is shared in its subtree by water-filling;
3. surplus = capacity - everything granted in steps 1-2;
4. the surplus, level by level in descending workload priority, by weighted
   water-filling down the tree (bursting priorities as weights).

Every grant respects the burst caps on its path and the pool capacity. All
arithmetic is exact (``int`` milli-GPU when whole, else ``Fraction``); nothing
depends on dict, set or input order. docs/fairshare.md explains it in words.

Cost: demand is aggregated per (leaf, class, priority) first; after that the
work is per team and priority level, O(teams x depth x levels), plus sorting
the reserved workloads of the leaves in subtrees where a bucket is short.
:class:`DemandBook` keeps the aggregates between cycles so that one workload's
change costs O(1), and keeps steps 1-2 per top-level team (when all buckets
fit in the pool) so that only the changed top-level subtrees and step 4 run
again. When the pool has room for what each top-level subtree takes in step 4
on its own, step 4 is kept per subtree as well, and a subtree where no bucket
overflows and no cap binds is done from its totals alone (every team gets its
whole demand); the pool then only adds up and merges the kept parts.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from itertools import accumulate
from math import lcm
from types import MappingProxyType
from typing import NamedTuple, TypeVar

from apportion.domain.errors import ValidationError
from apportion.domain.org import OrgTree
from apportion.engine.fairshare.buckets import BucketTotals, grant_buckets
from apportion.engine.fairshare.burst import Burst, Fractions, fractions_of, lean_burst
from apportion.engine.fairshare.burst import burst as burst_step
from apportion.engine.fairshare.fill import (
    ROOT,
    Grants,
    LevelFill,
    Milli,
    PoolIndex,
    active_children,
    fill_level,
    grant_all,
    index_pool,
)
from apportion.engine.fairshare.reserved import LeafOrder, OrderKey, TopGrant
from apportion.engine.fairshare.types import DemandItem, Entitlements

__all__ = ["DemandBook", "DemandItem", "Entitlements", "entitlements"]

_ZERO = Fraction(0)
K = TypeVar("K")
Demand = dict[int, dict[str, Milli]]  # priority -> leaf -> elastic demand still wanted


def entitlements(
    tree: OrgTree,
    pool: str,
    capacity: int,
    demand: Iterable[DemandItem],
    *,
    index: PoolIndex | None = None,
) -> Entitlements:
    """Entitlements of every team of ``tree`` in ``pool`` (SPEC 4).

    ``capacity`` is the pool's capacity in milli-GPU; ``demand`` the workloads'
    demand there (leaf teams only). ``index`` is ``index_pool(tree, pool)``
    when the caller keeps one (it only depends on the tree). Nothing is
    changed. Raises ValidationError for a demand item of an unknown or non-leaf
    team, or negative amounts.
    """
    return DemandBook(tree, pool, demand, index=index).entitlements(capacity)


class Work(NamedTuple):
    """Work counters of steps 1-2 in one call."""

    fills: int
    visits: int
    pieces: int


class DemandBook:
    """Demand of one pool, aggregated per (leaf, class, priority), kept between cycles.

    ``add``/``remove`` change one workload's demand in O(1) (removing reserved
    work scans its leaf's list) and drop only the caches it touches: its leaf's
    sorted reserved work and its top-level team's results of steps 1-2 (and,
    for reserved work, of step 1 alone).
    ``entitlements`` then redoes steps 1-2 only for top-level teams whose
    demand changed (step 1 only where their reserved demand changed, sorting
    reserved work only of leaves in subtrees where a bucket is short), or, when
    the buckets exceed the pool, step 1 for those whose reserved demand changed
    and step 2 for the whole pool; then step 4, in one pass when neither the
    surplus nor any cap can bind.
    O(teams x depth x levels) at most; it never looks at elastic workloads one
    by one. Not thread-safe.
    """

    __slots__ = (
        "_buckets", "_bursts", "_elastic", "_fractions", "_granted12", "_index", "_items",
        "_lean", "_reserved", "_reserved_total", "_shares", "_sorted", "_step1", "_tops",
        "_totals", "_whole",
    )

    def __init__(
        self,
        tree: OrgTree,
        pool: str,
        demand: Iterable[DemandItem] = (),
        *,
        index: PoolIndex | None = None,
    ) -> None:
        self._index: PoolIndex = index if index is not None else index_pool(tree, pool)
        self._elastic: dict[str, dict[int, dict[str, int]]] = {  # top -> priority -> leaf
            top: {} for top in self._index.children[ROOT]
        }
        self._buckets = sum(self._index.bucket.values())
        self._fractions = Fractions()
        self._reserved_total: dict[str, int] = {}  # leaf -> milli
        self._reserved: dict[str, list[tuple[OrderKey, int]]] = {}  # leaf -> workloads
        self._sorted: dict[str, LeafOrder] = {}  # leaf -> its workloads in order (a cache)
        self._step1: dict[str, TopGrant] = {}  # top-level team -> its step 1 (a cache)
        self._totals = BucketTotals(self._index)  # steps 1-2 per top-level team (a cache)
        self._tops: set[str] = set()  # top-level teams whose part in _totals is current
        # Step 4 per top-level team when nothing binds (see Burst), kept with
        # _totals; the shares of all of them together, in index order.
        self._bursts: dict[str, Burst] = {}
        self._granted12: dict[str, Milli] = {}  # top -> granted in its subtree by steps 1-2
        self._lean: set[str] = set()  # top-level teams whose _bursts entry is current
        self._shares: dict[str, Fraction] = dict.fromkeys(self._index.teams, _ZERO)
        self._whole: dict[str, int] = dict.fromkeys(self._index.teams, 0)
        self._items = 0
        self._add_all(demand)

    @property
    def pool(self) -> str:
        return self._index.pool

    def _add_all(self, demand: Iterable[DemandItem]) -> None:
        """``add`` for many items: the same, in one tight loop (it runs on every item)."""
        leaves, path, elastic = self._index.leaves, self._index.path, self._elastic
        reserved, reserved_total = self._reserved, self._reserved_total
        count = 0
        for item in demand:
            team, milli = item.team, item.milli
            if team not in leaves or milli < 0:
                self._check(item)
            count += 1
            if item.is_reserved:
                reserved_total[team] = reserved_total.get(team, 0) + milli
                key = (-item.priority, item.submitted_at, item.workload_id)  # item.order_key
                reserved.setdefault(team, []).append((key, milli))
                continue
            if not milli:
                continue
            top = elastic[path[team][-2]]
            level = top.get(item.priority)
            if level is None:
                level = top[item.priority] = {}
            level[team] = level.get(team, 0) + milli
        self._items += count
        self._sorted.clear()
        self._step1.clear()
        self._tops.clear()
        self._lean.clear()

    def add(self, item: DemandItem) -> None:
        """Count ``item``'s demand. O(1) (a reserved item also drops its leaf's cached order)."""
        self._check(item)
        self._items += 1
        if item.is_reserved:
            self._reserved.setdefault(item.team, []).append((item.order_key, item.milli))
            self._forget_order(item.team)
        self._bump(item, item.milli)

    def remove(self, item: DemandItem) -> None:
        """Stop counting ``item``'s demand; it must have been added (else KeyError).

        O(1) for elastic work; O(the leaf's reserved workloads) for reserved work.
        """
        self._check(item)
        if item.is_reserved:
            try:
                self._reserved.get(item.team, []).remove((item.order_key, item.milli))
            except ValueError:
                raise KeyError(item) from None
            self._forget_order(item.team)
        elif self._levels(item.team).get(item.priority, {}).get(item.team, 0) < item.milli:
            raise KeyError(item)
        self._items -= 1
        self._bump(item, -item.milli)

    def _check(self, item: DemandItem) -> None:
        if item.team not in self._index.leaves:
            raise ValidationError(
                "demand.team", f"{item.team!r} is not a leaf team of the tree", "a leaf team"
            )
        if item.milli < 0:
            raise ValidationError("demand.milli", f"must be >= 0, got {item.milli}")

    def _levels(self, leaf: str) -> dict[int, dict[str, int]]:
        """Elastic demand of ``leaf``'s top-level subtree: priority -> leaf -> milli."""
        return self._elastic[self._index.top_of(leaf)]

    def _forget_order(self, leaf: str) -> None:
        """Drop what the caches know about ``leaf``'s reserved work."""
        self._sorted.pop(leaf, None)
        self._step1.pop(self._index.top_of(leaf), None)

    def _bump(self, item: DemandItem, delta: int) -> None:
        """Change the totals of ``item``'s (leaf, class, priority) by ``delta``."""
        top = self._index.top_of(item.team)
        self._tops.discard(top)
        self._lean.discard(top)
        if item.is_reserved:
            _bump(self._reserved_total, item.team, delta)
            return
        levels = self._levels(item.team)
        level = levels.setdefault(item.priority, {})
        _bump(level, item.team, delta)
        if not level:
            del levels[item.priority]

    def _pieces_of(self, leaf: str) -> LeafOrder:
        """The leaf's reserved workloads in order, with running sums; cached."""
        cached = self._sorted.get(leaf)
        if cached is None:
            pieces = sorted(p for p in self._reserved.get(leaf, ()) if p[1] > 0)
            running = tuple(accumulate(milli for _key, milli in pieces))
            cached = self._sorted[leaf] = LeafOrder(tuple(pieces), running)
        return cached

    def _steps_1_2(self, capacity: int) -> tuple[dict[str, Milli], Demand, Work]:
        """Steps 1-2: granted per team (and ROOT), elastic demand left per level, work done.

        The dicts returned are fresh (the caller changes them). When all buckets
        fit in the capacity, each top-level subtree is done on its own and kept
        until its demand changes (fairshare/buckets.py explains why that is exact).
        """
        index = self._index
        if self._buckets > capacity:  # the pool capacity may bind: the whole pool at once
            elastic: dict[int, dict[str, int]] = {}
            for levels in self._elastic.values():
                for p, level in levels.items():
                    elastic.setdefault(p, {}).update(level)
            done = grant_buckets(
                index, capacity, self._reserved_total, elastic, self._pieces_of, self._step1
            )
            fresh: Demand = {p: dict(level) for p, level in done.demand.items()}
            return dict(done.granted), fresh, Work(done.fills, done.visits, done.pieces)
        work = Work(0, 0, 0)
        for top in index.children[ROOT]:
            if top not in self._tops:
                work = _plus(work, self._refresh_part(top, capacity))
        return (*self._totals.copy(), work)

    def _refresh_part(self, top: str, capacity: int) -> Work:
        """Redo steps 1-2 of ``top``'s subtree (only when all buckets fit the pool)."""
        part = grant_buckets(
            self._index.subtrees[top], capacity, self._reserved_total, self._elastic[top],
            self._pieces_of, self._step1,
        )
        self._totals.put(top, part)
        self._tops.add(top)
        return Work(part.fills, part.visits, part.pieces)

    def _refresh_tops(self, capacity: int) -> Work:
        """Redo steps 1-2 and the subtree's own step 4 (:class:`Burst`) of the
        top-level subtrees whose demand changed; only when all buckets fit the pool.

        A subtree where no bucket overflows and no cap can bind gets everything
        it asks for: that is found from its totals (:meth:`_lean_burst`).
        """
        index = self._index
        work = Work(0, 0, 0)
        for top in index.children[ROOT]:
            if top in self._lean:
                continue
            lean = lean_burst(
                self._index.subtrees[top], top, self._reserved_total, self._elastic[top],
                self._fractions)
            if lean is None:
                if top not in self._tops:
                    work = _plus(work, self._refresh_part(top, capacity))
                part = self._totals.parts[top]
                granted12 = part.granted[ROOT]
                burst = burst_step(index.subtrees[top], top, part, self._fractions)
            else:
                granted12, burst = lean
            self._granted12[top] = granted12
            self._bursts[top] = burst
            self._shares.update(burst.shares)
            self._whole.update(burst.whole)  # read only when every scale is 1
            self._lean.add(top)
        return work

    def _all_granted(self, capacity: int, work: Work) -> Entitlements | None:
        """The entitlements when the pool has room for what every top-level
        subtree takes in step 4 on its own, from the parts kept per top-level
        team (current: see :meth:`_refresh_tops`); None when it has not.

        At each level the pool then gives every top-level team all it wants,
        and within the subtree the water-filling is the subtree's own."""
        root = sum(self._granted12.values())
        total: Milli = 0
        scale = 1
        for burst in self._bursts.values():
            total += burst.total
            scale = lcm(scale, burst.scale)
        if capacity - root < total:
            return None
        index = self._index
        shares = self._shares
        if scale == 1:
            scaled = dict(self._whole)
        else:
            scaled = {t: v.numerator * (scale // v.denominator) for t, v in shares.items()}
        counters = {
            "items": self._items,
            "levels": len({p for levels in self._elastic.values() for p in levels}),
            "teams": len(index.teams),
            "teams_visited": work.visits + len(index.teams),
            "reserved_pieces": work.pieces,
            "fills": work.fills,
        }
        return Entitlements(
            pool=index.pool,
            capacity=capacity,
            by_team=MappingProxyType(dict(shares)),
            surplus=Fraction(max(0, capacity - root)),
            counters=MappingProxyType(counters),
            scale=scale,
            scaled=scaled,
        )

    def entitlements(self, capacity: int) -> Entitlements:
        """Entitlements from the current demand in a pool of ``capacity`` milli-GPU."""
        if capacity < 0:
            raise ValidationError("capacity", f"must be >= 0, got {capacity}")
        index = self._index
        before = Work(0, 0, 0)
        if self._buckets <= capacity:
            before = self._refresh_tops(capacity)
            done = self._all_granted(capacity, before)
            if done is not None:
                return done
        granted, demand, work = self._steps_1_2(capacity)
        work = Work(*(a + b for a, b in zip(before, work, strict=True)))
        grants = Grants(index, capacity, granted)
        levels = sorted(demand, reverse=True)
        surplus = max(0, capacity - grants.granted[ROOT])
        fills = work.fills
        # Step 4: the surplus, highest workload priority first; in one go when
        # it and every cap have room for all the bursting demand.
        if not grant_all(grants, demand.values()):
            for p in levels:
                room = grants.headroom(ROOT)
                if room is None or room <= 0:
                    break
                kids = active_children(index, demand[p])
                fill_level(grants, LevelFill(ROOT, demand[p], kids, stop_when_full=True), None)
                fills += 1
        counters = {
            "items": self._items,
            "levels": len(levels),
            "teams": len(index.teams),
            "teams_visited": work.visits + grants.visits + len(index.teams),
            "reserved_pieces": work.pieces,
            "fills": fills,
        }
        by_team, scale, scaled = fractions_of(grants.granted, self._fractions)
        return Entitlements(
            pool=index.pool,
            capacity=capacity,
            by_team=MappingProxyType(by_team),
            surplus=Fraction(surplus),
            counters=MappingProxyType(counters),
            scale=scale,
            scaled=scaled,
        )


def _plus(a: Work, b: Work) -> Work:
    return Work(a.fills + b.fills, a.visits + b.visits, a.pieces + b.pieces)


def _bump(counts: dict[K, int], key: K, delta: int) -> None:
    """Add ``delta`` to ``counts[key]``, dropping the key when it reaches 0."""
    value = counts.get(key, 0) + delta
    if value:
        counts[key] = value
    else:
        counts.pop(key, None)
