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
from bisect import bisect_right
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass

from apportion.engine.fairshare.fill import ROOT, PoolIndex

OrderKey = tuple[int, int, int]  # (-priority, submitted_at, workload_id)


@dataclass(frozen=True, slots=True)
class LeafOrder:
    """A leaf's reserved workloads as (order key, milli), sorted by key.

    ``cumulative[i]`` is the milli of ``pieces[: i + 1]``.
    """

    pieces: tuple[tuple[OrderKey, int], ...]
    cumulative: tuple[int, ...]


PiecesOf = Callable[[str], LeafOrder]


@dataclass(frozen=True, slots=True)
class _Run:
    """What is still waiting of one leaf: ``pieces[start:]``, the first only ``head`` of it."""

    leaf: str
    pieces: tuple[tuple[OrderKey, int], ...]
    start: int
    head: int


@dataclass(frozen=True, slots=True)
class ReservedGrant:
    """Result of step 1: reserved milli-GPU granted per leaf, own bucket left per team."""

    by_leaf: Mapping[str, int]
    bucket_left: Mapping[str, int]
    pieces: int  # workloads looked at one by one (a work counter)


@dataclass(frozen=True, slots=True)
class _Flow:
    """Totals of the aggregate pass (caps ignored): per team."""

    demand: Mapping[str, int]  # reserved demand of the subtree
    used: Mapping[str, int]  # own bucket used
    overflow: Mapping[str, int]  # reserved demand leaving the team upward
    may_hit_cap: Mapping[str, bool]  # some cap in the subtree is below its demand


@dataclass(frozen=True, slots=True)
class TopGrant:
    """Step 1 inside one top-level team's subtree, before the pool-wide trim."""

    by_leaf: Mapping[str, int]  # reserved milli granted per leaf
    used: Mapping[str, int]  # own bucket used per team (teams with no use may be absent)
    pieces: int


def grant_reserved(
    index: PoolIndex,
    capacity: int,
    totals: Mapping[str, int],
    pieces_of: PiecesOf,
    cache: MutableMapping[str, TopGrant] | None = None,
) -> ReservedGrant:
    """Grant reserved demand from the buckets (SPEC 4 step 1).

    ``totals`` maps leaf -> reserved demand; ``pieces_of(leaf)`` returns that
    leaf's reserved workloads in order. It is called only for leaves whose
    order matters. Returns the grants per leaf and what is left of every
    team's own bucket. Top-level subtrees share no bucket and no cap, so each
    is served on its own: ``cache`` (top-level team -> result) is read and
    filled; the caller drops the entry of a subtree whose reserved demand changed.
    """
    flow: _Flow | None = None
    by_leaf: dict[str, int] = {}
    used: dict[str, int] = {}
    pieces = 0
    for top in index.children[ROOT]:
        part = None if cache is None else cache.get(top)
        if part is None:
            flow = flow or _aggregate(index, totals)
            run = _ExactRun(index, flow, pieces_of)
            run.serve_subtree(top)
            part = TopGrant(run.by_leaf, run.used, run.pieces)
            pieces += run.pieces
            if cache is not None:
                cache[top] = part
        by_leaf.update(part.by_leaf)
        used.update(part.used)
    if sum(by_leaf.values()) > capacity:
        by_leaf = _trim_to_capacity(by_leaf, capacity, pieces_of)
    bucket_left = {team: index.bucket[team] - used.get(team, 0) for team in index.teams}
    return ReservedGrant(by_leaf, bucket_left, pieces)


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
    """Serves the buckets of the subtrees that need per-workload order.

    Waiting work travels upward as *runs* (one per leaf, each sorted); a bucket
    serves the runs merged by order key and stops when it is empty, so only
    the workloads actually served are looked at one by one. Only caps that
    could bind (``may_hit_cap``) are tracked.
    """

    __slots__ = ("by_leaf", "caps_of", "flow", "granted", "index", "pieces", "pieces_of", "used")

    def __init__(self, index: PoolIndex, flow: _Flow, pieces_of: PiecesOf) -> None:
        self.index = index
        self.flow = flow
        self.pieces_of = pieces_of
        self.used: dict[str, int] = {}
        self.granted: dict[str, int] = dict.fromkeys(index.teams, 0)  # subtree, so far
        self.by_leaf: dict[str, int] = {}
        self.caps_of: dict[str, tuple[tuple[str, int], ...]] = {}
        self.pieces = 0

    def serve_subtree(self, team: str) -> list[_Run]:
        """Serve every bucket in ``team``'s subtree, children first.

        Returns the reserved work still ungranted when it leaves ``team``.
        """
        if self.flow.overflow[team] == 0 and not self.flow.may_hit_cap[team]:
            self._grant_whole_subtree(team)
            return []
        children = self.index.children[team]
        if children:
            runs = [r for c in children for r in self.serve_subtree(c)]
            return self._serve_bucket(team, runs)
        order = self.pieces_of(team)
        if self._caps_on_path(team):
            return self._serve_bucket(team, [_Run(team, order.pieces, 0, order.pieces[0][1])])
        # No cap can bind: the own bucket takes a prefix of the leaf's order.
        served = min(self.index.bucket[team], order.cumulative[-1])
        cut = bisect_right(order.cumulative, served)
        if served:
            self.by_leaf[team] = served
        self.used[team] = served
        if cut == len(order.pieces):
            return []
        return [_Run(team, order.pieces, cut, order.cumulative[cut] - served)]

    def _serve_bucket(self, team: str, runs: list[_Run]) -> list[_Run]:
        """``team``'s bucket serves ``runs`` merged in order, within the caps on each path."""
        left = self.index.bucket[team]
        starts = [r.start for r in runs]
        heads = [r.head for r in runs]
        caps = [self._caps_on_path(r.leaf) for r in runs]
        heap = [(r.pieces[r.start][0], r.leaf, i) for i, r in enumerate(runs)]
        heapq.heapify(heap)
        granted, by_leaf = self.granted, self.by_leaf
        while heap and left > 0:
            _key, leaf, i = heap[0]
            self.pieces += 1
            head = heads[i]
            give = min(head, left)
            if caps[i]:
                for s, cap in caps[i]:
                    give = min(give, cap - granted[s])
                give = max(0, give)
                for s, _cap in caps[i]:
                    granted[s] += give
            if give:
                by_leaf[leaf] = by_leaf.get(leaf, 0) + give
                left -= give
            if give == head or left > 0:
                # Served in full, or stopped by a cap: that cap stays full for
                # every later piece of this leaf, so the whole run is done.
                pieces = runs[i].pieces
                starts[i] = start = starts[i] + 1 if give == head else len(pieces)
                if start < len(pieces):
                    heads[i] = pieces[start][1]
                    heapq.heapreplace(heap, (pieces[start][0], leaf, i))
                else:
                    heapq.heappop(heap)
            else:
                heads[i] = head - give
        self.used[team] = self.index.bucket[team] - left
        return [
            _Run(r.leaf, r.pieces, starts[i], heads[i])
            for i, r in enumerate(runs)
            if starts[i] < len(r.pieces)
        ]

    def _caps_on_path(self, leaf: str) -> tuple[tuple[str, int], ...]:
        """(team, cap) on the leaf's path for the caps that could bind (usually none)."""
        found = self.caps_of.get(leaf)
        if found is None:
            found = self.caps_of[leaf] = tuple(
                (s, cap)
                for s in self.index.path[leaf][:-1]
                if self.flow.may_hit_cap[s] and (cap := self.index.cap[s]) is not None
            )
        return found

    def _grant_whole_subtree(self, team: str) -> None:
        """Everything in ``team``'s subtree is granted; bucket use as the totals say."""
        stack = [team]
        while stack:
            slug = stack.pop()
            self.used[slug] = self.flow.used[slug]
            children = self.index.children[slug]
            if not children and self.flow.demand[slug]:
                self.by_leaf[slug] = self.flow.demand[slug]
            stack.extend(children)
        for slug in self.index.path[team][:-1]:
            self.granted[slug] += self.flow.demand[team]


def _trim_to_capacity(
    by_leaf: Mapping[str, int], capacity: int, pieces_of: PiecesOf
) -> dict[str, int]:
    """Keep the first ``capacity`` of the granted reserved work, pool-wide, in order.

    Only when reservations exceed the pool (a node went down, SPEC 2). Each
    leaf's grant is a prefix of its own order, so the granted pieces are
    rebuilt from the sorted lists and merged.
    """
    streams: list[list[tuple[OrderKey, str, int]]] = []
    for leaf in sorted(by_leaf):
        left = by_leaf[leaf]
        stream: list[tuple[OrderKey, str, int]] = []
        for key, milli in pieces_of(leaf).pieces:
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
