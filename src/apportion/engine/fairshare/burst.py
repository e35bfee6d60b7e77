"""Step 4 of SPEC section 4 inside one top-level subtree, when the pool has
room for everything the subtree takes (see :class:`DemandBook`): from the
leaves' totals when nothing binds (:func:`lean_burst`), else by the subtree's
own water-filling (:func:`burst`); and the exact form of a grant
(:func:`fractions_of`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from math import lcm

from apportion.engine.fairshare.buckets import BucketGrant
from apportion.engine.fairshare.fill import (
    ROOT,
    Grants,
    LevelFill,
    Milli,
    PoolIndex,
    active_children,
    fill_level,
)

_MEMO_LIMIT = 4096  # whole amounts kept as Fractions between calls, at most


class Fractions(dict[int, Fraction]):
    """Whole milli -> the same as a Fraction, made on first use."""

    def __missing__(self, key: int) -> Fraction:
        value = self[key] = Fraction(key)
        return value

    def bound(self) -> None:
        """Forget everything once more than a few thousand amounts are kept."""
        if len(self) > _MEMO_LIMIT:
            self.clear()



@dataclass(frozen=True, slots=True)
class Burst:
    """Step 4 inside one top-level subtree, if the pool had room for it.

    ``total``: what the subtree takes in step 4; ``shares``: every team's
    entitlement then (Fractions, in index order); ``scale``: the least common
    denominator of ``shares``; ``whole``: ``shares`` as ints when ``scale`` is 1.
    """

    total: Milli
    shares: dict[str, Fraction]
    scale: int
    whole: dict[str, int]



def lean_burst(
    sub: PoolIndex, top: str, reserved: Mapping[str, int],
    elastic_levels: Mapping[int, Mapping[str, int]], memo: Fractions,
) -> tuple[int, Burst] | None:
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
    bucket, cap = sub.bucket, sub.cap
    elastic: dict[str, int] = {}
    for level in elastic_levels.values():
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
    memo.bound()
    fractions = {slug: memo[milli] for slug, milli in shares.items()}
    return granted, Burst(shares[top] - granted, fractions, 1, shares)


def burst(sub: PoolIndex, top: str, part: BucketGrant, memo: Fractions) -> Burst:
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
    memo.bound()
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
    return Burst(total, shares, scale, whole)


def fractions_of(
    granted: Mapping[str, Milli], memo: Fractions
) -> tuple[dict[str, Fraction], int, dict[str, int]]:
    """``granted`` without ROOT, in its order: as Fractions, and as ints
    times the least common denominator (returned between them).

    Fractions of whole amounts are kept between calls (a bounded memo).
    """
    memo.bound()
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
