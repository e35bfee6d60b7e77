"""The tree of one pool, grant bookkeeping, and weighted water-filling (SPEC 4).

Helpers of :mod:`apportion.engine.fairshare.demand`. Amounts are milli-GPU, exact:
``int`` when whole, ``Fraction`` otherwise; shares being handed down are
(numerator, denominator) pairs, so that no Fraction is made for them. The
*virtual root* (``ROOT``, an empty slug no team can have) has the top-level
teams as its children and the pool capacity as its cap, so "never more than
the pool" is just one more cap on every path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping, Sequence, Set
from dataclasses import dataclass, field, replace
from fractions import Fraction
from itertools import pairwise
from math import lcm
from types import MappingProxyType

from apportion.domain.org import OrgTree

Milli = int | Fraction
ROOT = ""


@dataclass(frozen=True, slots=True)
class PoolIndex:
    """One pool's view of an org tree, flattened once for the fair-share passes.

    ``children`` and ``path`` include ``ROOT`` (``path`` runs team first, ROOT
    last; ROOT's own path is just ROOT); ``capped_path`` keeps the teams of
    ``path`` that have a cap (ROOT always: the pool). ``teams`` excludes ROOT.
    ``bucket`` is the own bucket, never below 0. ``bottom_up`` lists every team deepest
    first, then by slug: children always come before parents.
    """

    pool: str
    teams: tuple[str, ...]
    children: Mapping[str, tuple[str, ...]]
    path: Mapping[str, tuple[str, ...]]
    bucket: Mapping[str, int]
    cap: Mapping[str, int | None]
    weight: Mapping[str, int]
    bottom_up: tuple[str, ...]
    leaves: frozenset[str]
    capped_path: Mapping[str, tuple[str, ...]]
    subtrees: Mapping[str, PoolIndex] = field(default_factory=lambda: MappingProxyType({}))

    def top_of(self, team: str) -> str:
        """The top-level team above (or equal to) ``team``."""
        return self.path[team][-2]


def index_pool(tree: OrgTree, pool: str) -> PoolIndex:
    """Flatten ``tree`` for ``pool``: O(teams x depth).

    ``subtrees`` holds the same view of each top-level team's subtree alone
    (ROOT's only child is that team).
    """
    teams = tuple(sorted(tree.teams))
    children = {slug: tree.children(slug) for slug in teams}
    children[ROOT] = tree.top_level()
    path = {slug: (*tree.path(slug), ROOT) for slug in teams}
    path[ROOT] = (ROOT,)
    whole = PoolIndex(
        pool=pool,
        teams=teams,
        children=MappingProxyType(children),
        path=MappingProxyType(path),
        bucket=MappingProxyType({s: max(0, tree.bucket(s, pool)) for s in teams}),
        cap=MappingProxyType({s: tree.cap(s, pool) for s in teams}),
        weight=MappingProxyType({s: tree.team(s).bursting_priority for s in teams}),
        bottom_up=tuple(sorted(teams, key=lambda s: (-len(path[s]), s))),
        leaves=frozenset(s for s in teams if not children[s]),
        capped_path=MappingProxyType({
            s: tuple(t for t in path[s] if t == ROOT or tree.cap(t, pool) is not None)
            for s in teams
        }),
    )
    subtrees = {top: _subtree(whole, top) for top in children[ROOT]}
    return replace(whole, subtrees=MappingProxyType(subtrees))


def _subtree(whole: PoolIndex, top: str) -> PoolIndex:
    """``whole`` restricted to ``top``'s subtree (ROOT kept, with ``top`` as its only child)."""
    inside = frozenset(s for s in whole.teams if whole.path[s][-2] == top)
    children = {s: whole.children[s] for s in inside}
    children[ROOT] = (top,)
    path = {s: whole.path[s] for s in (*inside, ROOT)}
    return replace(
        whole,
        teams=tuple(s for s in whole.teams if s in inside),
        children=MappingProxyType(children),
        path=MappingProxyType(path),
        capped_path=MappingProxyType({s: whole.capped_path[s] for s in inside}),
        bucket=MappingProxyType({s: whole.bucket[s] for s in inside}),
        cap=MappingProxyType({s: whole.cap[s] for s in inside}),
        weight=MappingProxyType({s: whole.weight[s] for s in inside}),
        bottom_up=tuple(s for s in whole.bottom_up if s in inside),
        leaves=whole.leaves & inside,
    )


class Grants:
    """Mutable book of what each team's subtree has been granted so far.

    ``granted[ROOT]`` is the pool total. ``headroom(team)`` is ``cap - granted``
    (None when the team has no cap); ROOT's cap is the pool capacity.
    """

    __slots__ = ("caps", "granted", "index", "visits")

    def __init__(
        self, index: PoolIndex, capacity: int, granted: dict[str, Milli] | None = None
    ) -> None:
        """``granted`` (every team and ROOT; taken, not copied) defaults to nothing granted."""
        self.index = index
        self.caps: dict[str, int | None] = dict(index.cap)
        self.caps[ROOT] = capacity
        self.granted: dict[str, Milli] = (
            dict.fromkeys((*index.teams, ROOT), 0) if granted is None else granted
        )
        self.visits = 0

    def headroom(self, team: str) -> Milli | None:
        cap = self.caps[team]
        return None if cap is None else cap - self.granted[team]

    def path_headroom(self, teams: Sequence[str]) -> Milli | None:
        """The least headroom among ``teams`` (None when none of them has a cap)."""
        least: Milli | None = None
        for slug in teams:
            cap = self.caps[slug]
            if cap is not None:
                room = cap - self.granted[slug]
                if least is None or room < least:
                    least = room
        return least

    def has_room(self, below: Mapping[str, Milli]) -> bool:
        """Can every capped team take ``below[team]`` more (no cap would bind)?"""
        caps, granted = self.caps, self.granted
        for slug, milli in below.items():
            cap = caps[slug]
            if cap is not None and cap - granted[slug] < milli:
                return False
        return True

    def add_to_path(self, team: str, amount: Milli) -> None:
        """Count ``amount`` granted to ``team`` in it and in every ancestor up to ROOT."""
        for slug in self.index.path[team]:
            self.granted[slug] += amount


Share = tuple[str, int, int]  # (name, numerator, denominator > 0), not always in lowest terms


def water_fill(num: int, den: int, claims: Sequence[tuple[str, Milli, int]]) -> list[Share]:
    """Divide ``num / den`` among ``claims`` = (name, want > 0, weight).

    Shares follow the weights; nobody gets more than its want; what one claim
    cannot take goes to the others. Returns (name, numerator, denominator) of
    every claim's share (a fraction not always in lowest terms, so that no
    Fraction is made for it); the shares sum to min(amount, total want).
    Exact, and independent of claim order.
    """
    # Everything times one common denominator, so the loop below is int-only.
    scale = lcm(den, *(want.denominator for _n, want, _w in claims))
    wants = [want.numerator * (scale // want.denominator) for _n, want, _w in claims]
    left = num * (scale // den)
    if left >= sum(wants):
        return [(name, want.numerator, want.denominator) for name, want, _w in claims]
    weight_left = sum(weight for _n, _want, weight in claims)
    waiting = list(range(len(claims)))
    shares: list[Share] = []
    while True:
        # Whoever wants no more than an even share at the current level is
        # served in full; that only raises the level for the rest, so repeat.
        # (Cross-multiplied: want / weight <= left / weight_left.)
        full = [i for i in waiting if wants[i] * weight_left <= left * claims[i][2]]
        if not full:
            break
        for i in full:
            name, want, weight = claims[i]
            shares.append((name, want.numerator, want.denominator))
            left -= wants[i]
            weight_left -= weight
        waiting = [i for i in waiting if i not in full]
    below = weight_left * scale
    shares.extend((claims[i][0], left * claims[i][2], below) for i in waiting)
    return shares


def plus(value: Milli, num: int, den: int) -> Milli:
    """``value + num / den``, exact; an int when whole, so that later sums stay cheap."""
    if den == 1 and isinstance(value, int):
        return value + num
    top = value.numerator * den + num * value.denominator
    bottom = value.denominator * den
    if top % bottom:
        return Fraction(top, bottom)
    return top // bottom


def active_children(index: PoolIndex, leaves: Mapping[str, Milli]) -> dict[str, tuple[str, ...]]:
    """The part of the tree above the ``leaves`` that have demand: parent -> children.

    Includes ROOT. Children are sorted by slug. O(leaves x depth) at most.
    """
    kids: dict[str, list[str]] = {}
    for leaf, milli in leaves.items():
        if milli <= 0:
            continue
        path = index.path[leaf]
        for child, parent in pairwise(path):
            known = parent in kids
            kids.setdefault(parent, []).append(child)
            if known:
                break
    return {parent: tuple(sorted(children)) for parent, children in kids.items()}


def grant_all(grants: Grants, levels: Iterable[Mapping[str, Milli]]) -> bool:
    """Grant every leaf all of its demand in ``levels`` (level -> leaf -> still
    wanted) if every cap on the way, ROOT's (the pool) included, has room for
    all of it; else change nothing and return False.

    When nothing can bind, the level-by-level water-filling of step 4 gives
    each leaf exactly its demand at every level (every want is met in full),
    so the grants are the same, found in one pass over the leaves and paths.
    """
    by_leaf: dict[str, Milli] = {}
    for level in levels:
        for leaf, milli in level.items():
            if milli > 0:
                by_leaf[leaf] = by_leaf.get(leaf, 0) + milli
    if not by_leaf:
        return True
    path, granted = grants.index.path, grants.granted
    below: dict[str, Milli] = {}
    for leaf, milli in by_leaf.items():
        for slug in path[leaf]:
            below[slug] = below.get(slug, 0) + milli
    if not grants.has_room(below):
        return False
    for slug, milli in below.items():
        granted[slug] += milli
    return True


@dataclass(frozen=True, slots=True)
class LevelFill:
    """One water-filling pass: demand of one priority level, served from ``root`` down.

    ``demand`` (leaf -> still wanted) and ``leaf_limit`` (leaf -> still allowed,
    e.g. what is left of its own bucket; None = no such limit) are changed in
    place by :func:`fill_level`; ``demand`` not when ``stop_when_full`` (the
    caller stops once the pool is full) and this pass fills the pool.
    """

    root: str
    demand: MutableMapping[str, Milli]
    kids: Mapping[str, tuple[str, ...]]
    leaf_limit: MutableMapping[str, Milli] | None = None
    stop_when_full: bool = False


def fill_level(grants: Grants, fill: LevelFill, limit: Milli | None) -> Milli:
    """Serve ``fill`` with at most ``limit`` (None = no limit besides caps).

    Bottom-up ``want`` = min(cap headroom, demand) at a leaf and min(cap headroom,
    sum of the children's wants) above; then the amount is divided top-down by
    :func:`water_fill`. Caps above ``fill.root`` also bound the amount. Updates
    ``grants`` and the fill's mappings; returns the amount granted.
    """
    if fill.root not in fill.kids and fill.root not in grants.index.leaves:
        return 0
    wants: dict[str, Milli] = {}
    cut: set[str] = set()
    amount = _want(grants, fill, fill.root, wants, cut)
    grants.visits += len(wants)
    above = grants.path_headroom(grants.index.path[fill.root][1:])
    for bound in (limit, above):
        if bound is not None and bound < amount:
            amount = bound
    if amount <= 0:
        return 0
    fills_pool = fill.stop_when_full and amount == grants.path_headroom(grants.index.path[ROOT])
    _divide(grants, fill, (wants, cut), amount, None if fills_pool else fill.demand)
    for slug in grants.index.path[fill.root][1:]:
        grants.granted[slug] += amount
    return amount


def _want(
    grants: Grants, fill: LevelFill, team: str, wants: dict[str, Milli], cut: set[str]
) -> Milli:
    """want(team) as in SPEC 4 step 4, recorded in ``wants`` for the whole subtree.

    Teams whose want their cap cut below their demand go into ``cut``.
    """
    children = fill.kids.get(team)
    want: Milli
    if children is None:
        want = fill.demand.get(team, 0)
        if fill.leaf_limit is not None:
            want = min(want, fill.leaf_limit.get(team, 0))
    else:
        want = 0
        for child in children:
            want += _want(grants, fill, child, wants, cut)
    cap = grants.caps[team]
    if cap is not None and cap - grants.granted[team] < want:
        want = max(cap - grants.granted[team], 0)
        cut.add(team)
    wants[team] = want
    return want


def _divide(
    grants: Grants,
    fill: LevelFill,
    wanted: tuple[Mapping[str, Milli], Set[str]],
    amount: Milli,
    demand: MutableMapping[str, Milli] | None,
) -> None:
    """Hand ``amount`` (<= wants[fill.root]) down the tree by weighted water-filling.

    ``wanted`` is (wants, cut) from :func:`_want`. The leaves' ``demand``
    (None: not needed any more) and ``fill.leaf_limit`` go down by what they get.
    """
    weight, granted, kids = grants.index.weight, grants.granted, fill.kids
    wants, cut = wanted
    stack: list[Share] = [(fill.root, amount.numerator, amount.denominator)]
    while stack:
        team, num, den = stack.pop()
        was = granted[team]
        granted[team] = was + num if den == 1 and isinstance(was, int) else plus(was, num, den)
        children = kids.get(team)
        if children is None:
            if demand is not None:
                demand[team] = plus(demand[team], -num, den)
            if fill.leaf_limit is not None:
                fill.leaf_limit[team] = plus(fill.leaf_limit[team], -num, den)
            continue
        want = wants[team]
        if team not in cut and num * want.denominator == want.numerator * den:
            # It gets all it wants, and that is all its children want: so do they.
            stack.extend((c, w.numerator, w.denominator) for c in children if (w := wants[c]) > 0)
            continue
        claims = [(c, wants[c], weight[c]) for c in children if wants[c] > 0]
        stack.extend(share for share in water_fill(num, den, claims) if share[1] > 0)
