"""Steps 1-2 of SPEC 4: what the buckets grant, for a whole pool or one top-level subtree.

Helpers of :mod:`apportion.engine.fairshare.demand`. Top-level subtrees share no
bucket and no cap; the only thing they share is the pool capacity (ROOT's
cap). Steps 1-2 only grant from buckets, so when the buckets of all teams
together fit in the capacity, ROOT's cap can never bind in them and each
top-level subtree's steps 1-2 give exactly what they give in the whole pool:
:class:`~apportion.engine.fairshare.demand.DemandBook` then keeps them per top-level
team and redoes only those whose demand changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from apportion.engine.fairshare.fill import (
    ROOT,
    Grants,
    LevelFill,
    Milli,
    PoolIndex,
    active_children,
    fill_level,
)
from apportion.engine.fairshare.reserved import PiecesOf, TopGrant, grant_reserved


@dataclass(frozen=True, slots=True)
class BucketGrant:
    """Result of steps 1-2 over ``index``'s teams.

    ``granted``: team (and ROOT) -> granted to its subtree; ``demand``: level ->
    leaf -> elastic demand still wanted (every leaf with elastic demand at that
    level, 0 included). Work counters: ``fills``, ``visits``, ``pieces``.
    """

    granted: Mapping[str, Milli]
    demand: Mapping[int, Mapping[str, Milli]]
    fills: int
    visits: int
    pieces: int


class BucketTotals:
    """Steps 1-2 of every top-level subtree put together, replaced one subtree at a time.

    ``granted`` holds every team and ROOT (in ``index.teams`` order, ROOT
    last); ``demand`` the levels where some leaf has elastic demand.
    """

    __slots__ = ("demand", "granted", "parts")

    def __init__(self, index: PoolIndex) -> None:
        self.granted: dict[str, Milli] = dict.fromkeys((*index.teams, ROOT), 0)
        self.demand: dict[int, dict[str, Milli]] = {}
        self.parts: dict[str, BucketGrant] = {}

    def put(self, top: str, part: BucketGrant) -> None:
        """Count ``part`` (``top``'s subtree) instead of what was counted for it."""
        root = self.granted[ROOT]
        old = self.parts.get(top)
        if old is not None:
            root -= old.granted[ROOT]
            for p, wanted in old.demand.items():
                level = self.demand[p]
                for leaf in wanted:
                    del level[leaf]
                if not level:
                    del self.demand[p]
        self.granted.update(part.granted)
        self.granted[ROOT] = root + part.granted[ROOT]
        for p, wanted in part.demand.items():
            self.demand.setdefault(p, {}).update(wanted)
        self.parts[top] = part

    def copy(self) -> tuple[dict[str, Milli], dict[int, dict[str, Milli]]]:
        """Fresh copies of ``granted`` and ``demand``, for the caller to change."""
        return dict(self.granted), {p: dict(wanted) for p, wanted in self.demand.items()}


def grant_buckets(
    index: PoolIndex,
    capacity: int,
    totals: Mapping[str, int],
    elastic: Mapping[int, Mapping[str, int]],
    pieces_of: PiecesOf,
    cache: dict[str, TopGrant] | None = None,
) -> BucketGrant:
    """Steps 1-2 for ``index`` (the whole pool or one top-level subtree).

    ``totals``: leaf -> reserved demand; ``elastic``: level -> leaf -> elastic
    demand; ``pieces_of`` and ``cache`` as for :func:`grant_reserved`.
    """
    reserved = grant_reserved(index, capacity, totals, pieces_of, cache)
    grants = Grants(index, capacity)
    for leaf in sorted(reserved.by_leaf):
        grants.add_to_path(leaf, reserved.by_leaf[leaf])
    demand: dict[int, dict[str, Milli]] = {p: dict(elastic[p]) for p in elastic}
    fills = _serve_from_buckets(grants, reserved.bucket_left, demand)
    return BucketGrant(grants.granted, demand, fills, grants.visits, reserved.pieces)


def _serve_from_buckets(
    grants: Grants, bucket_left: Mapping[str, int], demand: dict[int, dict[str, Milli]]
) -> int:
    """Step 2: guaranteed-backed elastic. Changes ``grants`` and ``demand``; returns fills run.

    a. Each leaf's own bucket leftover serves that leaf, level by level; the
       leaves only compete when a cap above them binds, and then share it by
       water-filling.
    b. Each ancestor's leftover, deepest ancestors first (then by slug), is
       shared in its subtree by water-filling, level by level.
    """
    index = grants.index
    levels = sorted(demand, reverse=True)
    kids: dict[int, dict[str, tuple[str, ...]]] = {}  # filled when needed

    def kids_of(p: int) -> dict[str, tuple[str, ...]]:
        found = kids.get(p)
        if found is None:
            found = kids[p] = active_children(index, demand[p])
        return found

    fills = 0
    own: dict[str, Milli] = {
        leaf: bucket_left[leaf] for leaf in sorted(index.leaves) if bucket_left[leaf] > 0
    }
    if own and not _serve_own_buckets(grants, own, demand, levels):
        for p in levels:
            fill_level(grants, LevelFill(ROOT, demand[p], kids_of(p), own), None)
            fills += 1
        kids.clear()  # demand changed: drop teams whose demand ran out
    for team in index.bottom_up:
        left: Milli = bucket_left[team]
        if team in index.leaves or left <= 0:
            continue
        for p in levels:
            if left <= 0:
                break
            if team in kids_of(p):
                left -= fill_level(grants, LevelFill(team, demand[p], kids_of(p)), left)
                fills += 1
    return fills


def _serve_own_buckets(
    grants: Grants, own: dict[str, Milli], demand: dict[int, dict[str, Milli]], levels: list[int]
) -> bool:
    """Step 2a without water-filling, when no cap can bind; False (nothing done) otherwise.

    Each leaf would take min(own bucket left, its elastic demand). When every
    cap (ROOT's too) has room for all that its subtree's leaves would take, no
    leaf competes with another: each takes min(bucket left, demand) level by
    level, highest first, exactly what the water-filling passes would give.
    """
    index = grants.index
    wanted: dict[str, Milli] = {}
    for p in levels:
        for leaf, milli in demand[p].items():
            wanted[leaf] = wanted.get(leaf, 0) + milli
    below: dict[str, Milli] = {}
    for leaf, left in own.items():
        take = min(left, wanted.get(leaf, 0))
        if take > 0:
            for team in index.capped_path[leaf]:
                below[team] = below.get(team, 0) + take
    if not grants.has_room(below):
        return False
    for leaf, left in own.items():
        if not wanted.get(leaf):
            continue
        given = left
        for p in levels:
            level = demand[p]
            still = level.get(leaf, 0)
            if still > 0:
                give = min(still, left)
                level[leaf] = still - give
                left -= give
                if left <= 0:
                    break
        own[leaf] = left
        grants.add_to_path(leaf, given - left)
    return True
