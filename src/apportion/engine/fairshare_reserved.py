"""Step 1 of SPEC 4: reserved demand granted from the buckets on each leaf's path.

Each leaf's own bucket serves its reserved work first; what overflows goes to
the parent's bucket, which serves its subtree's overflowing work in order
(priority descending, submission time, id), and so on up to the top-level
team. Grants are fluid (a workload may be partly granted). Every grant also
respects the burst caps on the leaf's path (SPEC 2: caps always hold), and the
pool total never exceeds the capacity.

Cost: one aggregate pass over the teams decides where the answer is already
known from the totals: a subtree whose demand never leaves it (overflow 0) and
where no cap could bind is fully granted, with no per-workload work. Only
where a bucket is short (or a cap could bind) are the workloads sorted and
merged, and only those that overflow travel upward.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from apportion.engine.fairshare_fill import ROOT, PoolIndex

OrderKey = tuple[int, int, int]  # (-priority, submitted_at, workload_id)
Piece = tuple[OrderKey, str, int]  # (order, leaf, milli still wanted)
PiecesOf = Callable[[str], Sequence[tuple[OrderKey, int]]]


@dataclass(frozen=True, slots=True)
class ReservedGrant:
    """Result of step 1: reserved milli-GPU granted per leaf, own bucket left per team."""

    by_leaf: Mapping[str, int]
    bucket_left: Mapping[str, int]
    pieces: int  # workloads handled one by one (a work counter)


@dataclass(frozen=True, slots=True)
class _Flow:
    """Totals of the aggregate pass (caps ignored): per team."""

    demand: Mapping[str, int]  # reserved demand of the subtree
    used: Mapping[str, int]  # own bucket used
    overflow: Mapping[str, int]  # reserved demand leaving the team upward
    may_hit_cap: Mapping[str, bool]  # some cap in the subtree is below its demand


def grant_reserved(
    index: PoolIndex, capacity: int, totals: Mapping[str, int], pieces_of: PiecesOf
) -> ReservedGrant:
    """Grant reserved demand from the buckets (SPEC 4 step 1).

    ``totals`` maps leaf -> reserved demand; ``pieces_of(leaf)`` returns that
    leaf's reserved workloads as (order key, milli), sorted by the key. It is
    called only for leaves whose order matters. Returns the grants per leaf and
    what is left of every team's own bucket.
    """
    flow = _aggregate(index, totals)
    run = _ExactRun(index, flow, pieces_of)
    for top in index.children[ROOT]:
        run.serve_subtree(top)
    by_leaf = run.by_leaf
    if sum(by_leaf.values()) > capacity:
        by_leaf = _trim_to_capacity(by_leaf, capacity, pieces_of)
    bucket_left = {team: index.bucket[team] - run.used[team] for team in index.teams}
    return ReservedGrant(by_leaf, bucket_left, run.pieces)


def _aggregate(index: PoolIndex, totals: Mapping[str, int]) -> _Flow:
    """Bucket flows from totals alone, bottom-up (SPEC 2's overflow formulas)."""
    demand: dict[str, int] = {}
    used: dict[str, int] = {}
    overflow: dict[str, int] = {}
    may_hit_cap: dict[str, bool] = {}
    for team in index.bottom_up:
        children = index.children[team]
        if children:
            demand[team] = sum(demand[c] for c in children)
            incoming = sum(overflow[c] for c in children)
            risky = any(may_hit_cap[c] for c in children)
        else:
            demand[team] = incoming = totals.get(team, 0)
            risky = False
        cap = index.cap[team]
        used[team] = min(index.bucket[team], incoming)
        overflow[team] = incoming - used[team]
        may_hit_cap[team] = risky or (cap is not None and demand[team] > cap)
    return _Flow(demand, used, overflow, may_hit_cap)


class _ExactRun:
    """Serves the buckets of the subtrees that need per-workload order."""

    __slots__ = ("by_leaf", "flow", "granted", "index", "pieces", "pieces_of", "used")

    def __init__(self, index: PoolIndex, flow: _Flow, pieces_of: PiecesOf) -> None:
        self.index = index
        self.flow = flow
        self.pieces_of = pieces_of
        self.used: dict[str, int] = dict.fromkeys(index.teams, 0)
        self.granted: dict[str, int] = dict.fromkeys(index.teams, 0)  # subtree, so far
        self.by_leaf: dict[str, int] = {}
        self.pieces = 0

    def serve_subtree(self, team: str) -> list[Piece]:
        """Serve every bucket in ``team``'s subtree, children first.

        Returns the reserved work still ungranted when it leaves ``team``,
        sorted by order key.
        """
        if self.flow.overflow[team] == 0 and not self.flow.may_hit_cap[team]:
            self._grant_whole_subtree(team)
            return []
        children = self.index.children[team]
        if not children:
            waiting = [(key, team, milli) for key, milli in self.pieces_of(team)]
            self.pieces += len(waiting)
        else:
            streams = [s for s in (self.serve_subtree(c) for c in children) if s]
            waiting = streams[0] if len(streams) == 1 else list(heapq.merge(*streams))
        return self._serve_bucket(team, waiting)

    def _serve_bucket(self, team: str, waiting: list[Piece]) -> list[Piece]:
        """``team``'s bucket serves ``waiting`` in order, within the caps on each path."""
        left = self.index.bucket[team]
        rest: list[Piece] = []
        for i, (key, leaf, milli) in enumerate(waiting):
            if left == 0:
                rest.extend(waiting[i:])
                break
            give = max(0, min(left, self._headroom(leaf, milli)))
            if give > 0:
                self._grant(leaf, give)
                left -= give
            if milli > give:
                rest.append((key, leaf, milli - give))
        self.used[team] = self.index.bucket[team] - left
        return rest

    def _headroom(self, leaf: str, milli: int) -> int:
        """min(milli, least cap headroom on the leaf's path); the pool is handled later."""
        room = milli
        for slug in self.index.path[leaf][:-1]:
            cap = self.index.cap[slug]
            if cap is not None:
                room = min(room, cap - self.granted[slug])
        return room

    def _grant(self, leaf: str, milli: int) -> None:
        self.by_leaf[leaf] = self.by_leaf.get(leaf, 0) + milli
        for slug in self.index.path[leaf][:-1]:
            self.granted[slug] += milli

    def _grant_whole_subtree(self, team: str) -> None:
        """Everything in ``team``'s subtree is granted; bucket use as the totals say."""
        stack = [team]
        while stack:
            slug = stack.pop()
            self.used[slug] = self.flow.used[slug]
            self.granted[slug] = self.flow.demand[slug]
            children = self.index.children[slug]
            if not children and self.flow.demand[slug]:
                self.by_leaf[slug] = self.flow.demand[slug]
            stack.extend(children)
        for slug in self.index.path[team][1:-1]:
            self.granted[slug] += self.flow.demand[team]


def _trim_to_capacity(
    by_leaf: Mapping[str, int], capacity: int, pieces_of: PiecesOf
) -> dict[str, int]:
    """Keep the first ``capacity`` of the granted reserved work, pool-wide, in order.

    Only when reservations exceed the pool (a node went down, SPEC 2). Each
    leaf's grant is a prefix of its own order, so the granted pieces are
    rebuilt from the sorted lists and merged.
    """
    streams: list[list[Piece]] = []
    for leaf in sorted(by_leaf):
        left = by_leaf[leaf]
        stream: list[Piece] = []
        for key, milli in pieces_of(leaf):
            if left <= 0:
                break
            stream.append((key, leaf, min(milli, left)))
            left -= milli
        streams.append(stream)
    kept: dict[str, int] = {}
    room = capacity
    for _key, leaf, milli in heapq.merge(*streams):
        if room <= 0:
            break
        give = min(milli, room)
        kept[leaf] = kept.get(leaf, 0) + give
        room -= give
    return kept
