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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import accumulate
from math import lcm
from types import MappingProxyType
from typing import NamedTuple, TypeVar

from apportion.domain.errors import ValidationError
from apportion.domain.org import OrgTree
from apportion.engine.fairshare.buckets import BucketGrant, BucketTotals, grant_buckets
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

__all__ = ["DemandBook", "DemandItem", "Entitlements", "entitlements"]

_ZERO = Fraction(0)
K = TypeVar("K")
_MEMO_LIMIT = 4096  # whole amounts kept as Fractions between calls, at most
Demand = dict[int, dict[str, Milli]]  # priority -> leaf -> elastic demand still wanted


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


class _Fractions(dict[int, Fraction]):
    """Whole milli -> the same as a Fraction, made on first use."""

    def __missing__(self, key: int) -> Fraction:
        value = self[key] = Fraction(key)
        return value


class Work(NamedTuple):
    """Work counters of steps 1-2 in one call."""

    fills: int
    visits: int
    pieces: int


@dataclass(frozen=True, slots=True)
class _Burst:
    """Step 4 inside one top-level subtree, if the pool had room for it.

    ``total``: what the subtree takes in step 4; ``shares``: every team's
    entitlement then (Fractions, in index order); ``scale``: the least common
    denominator of ``shares``; ``whole``: ``shares`` as ints when ``scale`` is 1.
    """

    total: Milli
    shares: dict[str, Fraction]
    scale: int
    whole: dict[str, int]


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
        self._fractions = _Fractions()
        self._reserved_total: dict[str, int] = {}  # leaf -> milli
        self._reserved: dict[str, list[tuple[OrderKey, int]]] = {}  # leaf -> workloads
        self._sorted: dict[str, LeafOrder] = {}  # leaf -> its workloads in order (a cache)
        self._step1: dict[str, TopGrant] = {}  # top-level team -> its step 1 (a cache)
        self._totals = BucketTotals(self._index)  # steps 1-2 per top-level team (a cache)
        self._tops: set[str] = set()  # top-level teams whose part in _totals is current
        # Step 4 per top-level team when nothing binds (see _Burst), kept with
        # _totals; the shares of all of them together, in index order.
        self._bursts: dict[str, _Burst] = {}
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
        until its demand changes (fairshare_steps explains why that is exact).
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
        """Redo steps 1-2 and the subtree's own step 4 (:class:`_Burst`) of the
        top-level subtrees whose demand changed; only when all buckets fit the pool.

        A subtree where no bucket overflows and no cap can bind gets everything
        it asks for: that is found from its totals (:meth:`_lean_burst`).
        """
        index = self._index
        work = Work(0, 0, 0)
        for top in index.children[ROOT]:
            if top in self._lean:
                continue
            lean = self._lean_burst(top)
            if lean is None:
                if top not in self._tops:
                    work = _plus(work, self._refresh_part(top, capacity))
                part = self._totals.parts[top]
                granted12, burst = part.granted[ROOT], self._burst(index.subtrees[top], top, part)
            else:
                granted12, burst = lean
            self._granted12[top] = granted12
            self._bursts[top] = burst
            self._shares.update(burst.shares)
            self._whole.update(burst.whole)  # read only when every scale is 1
            self._lean.add(top)
        return work

    def _lean_burst(self, top: str) -> tuple[int, _Burst] | None:
        """``top``'s subtree from its leaves' totals when no bucket above a leaf
        serves reserved work in part and no cap above a leaf binds: (what
        steps 1-2 grant, the subtree's step 4); None otherwise.

        Then each leaf's own bucket takes its reserved work up to the bucket
        (an ancestor's bucket that is reached by reserved work is empty, else
        it would have to pick workloads in order: None), and nothing decides
        between leaves: with room in the pool, step 4 tops every leaf up to
        min(its cap, its granted reserved + elastic demand), and a team above
        gets what its children get. What steps 1-2 grant: the reserved part,
        each own bucket's rest up to the leaf's elastic demand (step 2a), and
        each ancestor's bucket up to what is still wanted below it within the
        caps (step 2b, deepest first). The general passes give exactly that.
        """
        sub = self._index.subtrees[top]
        bucket, cap = sub.bucket, sub.cap
        reserved = self._reserved_total
        elastic: dict[str, int] = {}
        for level in self._elastic[top].values():
            for leaf, milli in level.items():
                elastic[leaf] = elastic.get(leaf, 0) + milli
        shares = dict.fromkeys(sub.teams, 0)  # what each team ends up with
        over: dict[str, int] = {}  # reserved demand leaving a team upward
        wants: dict[str, int] = {}  # elastic still wanted (within caps) after own buckets
        granted = 0  # by steps 1-2
        for leaf in sub.leaves:
            mine, more, room = reserved.get(leaf, 0), elastic.get(leaf, 0), bucket[leaf]
            used = min(mine, room)
            take = min(room - used, more)
            most = cap[leaf]
            if most is None:
                shares[leaf] = used + more
                wants[leaf] = more - take
            elif most < room:  # pragma: no cover - a cap is never below the reservation
                return None
            else:
                shares[leaf] = min(most, used + more)
                wants[leaf] = min(most - used - take, more - take)
            over[leaf] = mine - used
            granted += used + take
        children = sub.children
        for team in sub.bottom_up:
            kids = children[team]
            if not kids:
                continue
            arriving = sum(over[c] for c in kids)
            room = bucket[team]
            if arriving and room:
                return None
            over[team] = arriving
            wanted = sum(wants[c] for c in kids)
            take = min(room, wanted)
            wants[team] = wanted - take
            granted += take
            total = sum(shares[c] for c in kids)
            most = cap[team]
            if most is not None and total > most:
                return None
            shares[team] = total
        memo = self._fractions
        if len(memo) > _MEMO_LIMIT:
            memo.clear()
        fractions = {slug: memo[milli] for slug, milli in shares.items()}
        return granted, _Burst(shares[top] - granted, fractions, 1, shares)

    def _burst(self, sub: PoolIndex, top: str, part: BucketGrant) -> _Burst:
        """Step 4 inside ``top``'s subtree as if the pool had room for it all.

        When no cap inside has room for less than its subtree's bursting
        demand, everything is granted (one pass); else the subtree's own
        level-by-level water-filling runs with the pool unbounded.
        """
        below: dict[str, Milli] = {}
        path = sub.path
        for wanted in part.demand.values():
            for leaf, milli in wanted.items():
                if milli > 0:
                    for slug in path[leaf][:-1]:  # not ROOT: the pool is checked by the caller
                        below[slug] = below.get(slug, 0) + milli
        caps, granted = sub.cap, part.granted
        fits = True
        for slug, milli in below.items():
            cap = caps[slug]
            if cap is not None and cap - granted[slug] < milli:
                fits = False
                break
        if fits:
            total = below.get(top, 0)
            final: Mapping[str, Milli] = granted
        else:
            grants = Grants(sub, 0, dict(granted))
            grants.caps[ROOT] = None  # the pool is checked by the caller
            demand = {p: dict(wanted) for p, wanted in part.demand.items()}
            for p in sorted(demand, reverse=True):
                kids = active_children(sub, demand[p])
                fill_level(grants, LevelFill(ROOT, demand[p], kids, stop_when_full=True), None)
            total = grants.granted[ROOT] - granted[ROOT]
            final, below = grants.granted, {}
        memo = self._fractions
        if len(memo) > _MEMO_LIMIT:
            memo.clear()
        shares: dict[str, Fraction] = {}
        whole: dict[str, int] = {}
        scale = 1
        for slug in sub.teams:
            value = final[slug] + below.get(slug, 0)
            if isinstance(value, int):
                shares[slug] = memo[value]
                whole[slug] = value
            else:
                shares[slug] = value
                whole[slug] = value.numerator
                scale = lcm(scale, value.denominator)
        return _Burst(total, shares, scale, whole)

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

    def _fractions_of(
        self, granted: Mapping[str, Milli]
    ) -> tuple[dict[str, Fraction], int, dict[str, int]]:
        """``granted`` without ROOT, in its order: as Fractions, and as ints
        times the least common denominator (returned between them).

        Fractions of whole amounts are kept between calls (a bounded memo).
        """
        memo = self._fractions
        if len(memo) > _MEMO_LIMIT:
            memo.clear()
        out = {t: memo[v] if isinstance(v, int) else v for t, v in granted.items()}
        del out[ROOT]
        parts = [v for t, v in granted.items() if type(v) is not int and t != ROOT]
        scale = lcm(*{v.denominator for v in parts}) if parts else 1
        if scale == 1:  # all whole (a Fraction may be, after sums)
            scaled = {t: v if type(v) is int else v.numerator for t, v in granted.items()}
        else:
            scaled = {
                t: v * scale if type(v) is int else v.numerator * (scale // v.denominator)
                for t, v in granted.items()
            }
        del scaled[ROOT]
        return out, scale, scaled

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
        by_team, scale, scaled = self._fractions_of(grants.granted)
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
