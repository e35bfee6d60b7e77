"""Usage per team in one pool, with reservation buckets and burst caps.

Usage is the placed size of Starting and Running work plus nominations
(SPEC section 2). Every team keeps subtree sums, updated incrementally along
the team's path on ``add``/``remove``; every check walks one path: O(depth).

Buckets (SPEC 2): ``overflow(leaf) = max(0, reserved(leaf) - bucket(leaf))``,
``overflow(A) = max(0, sum overflow(children) - bucket(A))``. Reserved work
fits if, with it added, the overflow out of the top-level team stays 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from apportion.domain.org import OrgTree


@dataclass(frozen=True, slots=True)
class CapBreach:
    """The first team on a path whose burst cap a change would exceed."""

    team: str
    cap: int
    usage: int


class Ledger:
    """Mutable usage book of one pool. Not shared between threads."""

    __slots__ = (
        "_bucket",
        "_cap",
        "_child_overflow",
        "_overflow",
        "_own_reserved",
        "_path_reservation",
        "_paths",
        "_reservation",
        "_reserved",
        "_usage",
        "pool",
        "tree",
        "usage_by_team",
    )

    def __init__(self, tree: OrgTree, pool: str) -> None:
        self.tree = tree
        self.pool = pool
        self._paths = {slug: tree.path(slug) for slug in tree.teams}
        self._bucket = {slug: tree.bucket(slug, pool) for slug in tree.teams}
        self._reservation = {slug: tree.reservation(slug, pool) for slug in tree.teams}
        self._cap = {slug: tree.cap(slug, pool) for slug in tree.teams}
        self._path_reservation = {
            slug: sum(max(0, self._bucket[s]) for s in path) for slug, path in self._paths.items()
        }
        self._usage = dict.fromkeys(tree.teams, 0)  # subtree, both classes
        #: The same numbers, to read in hot loops (never write through it).
        self.usage_by_team: Mapping[str, int] = self._usage
        self._reserved = dict.fromkeys(tree.teams, 0)  # subtree, reserved only
        self._own_reserved = dict.fromkeys(tree.teams, 0)  # the leaf's own reserved
        self._overflow = dict.fromkeys(tree.teams, 0)
        self._child_overflow = dict.fromkeys(tree.teams, 0)

    # -- changes -------------------------------------------------------------
    def add(self, team: str, is_reserved: bool, milli: int) -> None:
        """Count ``milli`` more usage for leaf ``team``."""
        self._change(team, is_reserved, milli)

    def remove(self, team: str, is_reserved: bool, milli: int) -> None:
        """Count ``milli`` less usage for leaf ``team``."""
        self._change(team, is_reserved, -milli)

    def _change(self, team: str, is_reserved: bool, delta: int) -> None:
        path = self._paths[team]
        for slug in path:
            self._usage[slug] += delta
        if not is_reserved:
            return
        for slug in path:
            self._reserved[slug] += delta
        self._own_reserved[team] += delta
        # Propagate overflow changes upward; stop as soon as nothing changes.
        child_delta = 0
        for i, slug in enumerate(path):
            base = self._own_reserved[slug] if i == 0 else 0
            self._child_overflow[slug] += child_delta
            new = max(0, base + self._child_overflow[slug] - self._bucket[slug])
            child_delta = new - self._overflow[slug]
            self._overflow[slug] = new
            if child_delta == 0 and i > 0:
                break

    # -- reads -----------------------------------------------------------------
    def usage(self, team: str) -> int:
        return self._usage[team]

    def reserved_usage(self, team: str) -> int:
        return self._reserved[team]

    def elastic_usage(self, team: str) -> int:
        return self._usage[team] - self._reserved[team]

    def overflow(self, team: str) -> int:
        return self._overflow[team]

    def reserved_fits(self, team: str, milli: int) -> bool:
        """Would ``milli`` more reserved work of leaf ``team`` fit its buckets?"""
        return self._top_overflow_with(team, milli) == 0

    def _top_overflow_with(self, team: str, milli: int) -> int:
        path = self._paths[team]
        new = max(0, self._own_reserved[team] + self._child_overflow[team] + milli
                  - self._bucket[team])
        delta = new - self._overflow[team]
        for slug in path[1:]:
            if delta == 0:
                return self._overflow[path[-1]]
            new = max(0, self._child_overflow[slug] + delta - self._bucket[slug])
            delta = new - self._overflow[slug]
        return new

    def reserved_room(self, team: str) -> int:
        """The most reserved work leaf ``team`` could still add, in one pass up its path.

        Adding ``d`` to a bucket's input raises its overflow by ``max(0, d - free)``,
        ``free = max(0, bucket - input)``; so ``m`` more fits exactly when the
        top-level overflow is 0 now and ``m`` is at most the sum of the free
        parts on the path (what a search over :meth:`reserved_fits` finds).
        """
        path = self._paths[team]
        if self._overflow[path[-1]]:
            return 0
        bucket, child = self._bucket, self._child_overflow
        room = max(0, bucket[team] - self._own_reserved[team] - child[team])
        for slug in path[1:]:
            free = bucket[slug] - child[slug]
            if free > 0:
                room += free
        return min(room, self.path_reservation(team))

    def path_reservation(self, team: str) -> int:
        """Sum of the buckets on the path: the most reserved work the leaf could ever run."""
        return self._path_reservation[team]

    def reservation(self, team: str) -> int:
        return self._reservation[team]

    def cap(self, team: str) -> int | None:
        return self._cap[team]

    def cap_breach(self, team: str, milli: int) -> CapBreach | None:
        """The first team on the path (leaf first) whose cap ``milli`` more would exceed."""
        for slug in self._paths[team]:
            cap = self._cap[slug]
            if cap is not None and self._usage[slug] + milli > cap:
                return CapBreach(slug, cap, self._usage[slug])
        return None

    def cap_headroom(self, team: str) -> int | None:
        """The least ``cap - usage`` on the path, or None when no cap applies."""
        rooms = [
            cap - self._usage[s]
            for s in self._paths[team]
            if (cap := self._cap[s]) is not None
        ]
        return min(rooms) if rooms else None

    def smallest_cap(self, team: str) -> CapBreach | None:
        """The tightest cap on the path (for "could this ever fit?")."""
        best: CapBreach | None = None
        for slug in self._paths[team]:
            cap = self._cap[slug]
            if cap is not None and (best is None or cap < best.cap):
                best = CapBreach(slug, cap, self._usage[slug])
        return best
