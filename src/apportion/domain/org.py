"""The organization: a tree of teams, and reservations per (team, pool).

All GPU amounts are milli-GPU integers. ``OrgTree`` is immutable; build a new
one (``with_team``, ``with_reservation``) to change it, which re-validates.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from apportion.domain.errors import NotFound, ReservationError, ValidationError
from apportion.domain.quantities import format_gpus

SLUG_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
SLUG_ALLOWED = "a DNS label: 1-63 of a-z, 0-9 and '-', starting and ending with a letter or digit"


def validate_slug(slug: object, field: str = "slug") -> str:
    if not isinstance(slug, str) or not SLUG_RE.match(slug):
        raise ValidationError(field, f"{slug!r} is not a valid slug", SLUG_ALLOWED)
    return slug


@dataclass(frozen=True, slots=True)
class Team:
    """A team. ``burst_limit_percent`` None means unlimited bursting."""

    slug: str
    name: str = ""
    parent: str | None = None
    bursting_priority: int = 1
    burst_limit_percent: int | None = None

    def __post_init__(self) -> None:
        validate_slug(self.slug)
        if self.parent is not None:
            validate_slug(self.parent, "parent")
        bp = self.bursting_priority
        if isinstance(bp, bool) or not isinstance(bp, int) or not 1 <= bp <= 10:
            raise ValidationError(
                "bursting_priority", f"must be an integer 1-10, got {bp!r}", "1..10"
            )
        pct = self.burst_limit_percent
        if pct is not None and (isinstance(pct, bool) or not isinstance(pct, int) or pct < 0):
            raise ValidationError(
                "burst_limit_percent",
                f"must be an integer >= 0 or null, got {pct!r}",
                "an integer >= 0, or null for unlimited",
            )


@dataclass(frozen=True, slots=True)
class OrgTree:
    """Teams (a forest of top-level teams) and reservations in milli-GPU.

    Derived lookups (children, paths, depth) are computed once at construction.
    Invariants: every parent exists, no cycles. Reservation rules are checked
    by :func:`validate_reservations` (they need pool capacities).
    """

    teams: Mapping[str, Team]
    reservations: Mapping[tuple[str, str], int] = field(default_factory=dict)
    _children: Mapping[str, tuple[str, ...]] = field(init=False, repr=False, compare=False)
    _paths: Mapping[str, tuple[str, ...]] = field(init=False, repr=False, compare=False)
    _top: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        teams = dict(self.teams)
        children: dict[str, list[str]] = {slug: [] for slug in teams}
        for slug, team in teams.items():
            if team.slug != slug:
                raise ValidationError("teams", f"key {slug!r} does not match slug {team.slug!r}")
            if team.parent is not None:
                if team.parent not in teams:
                    raise ValidationError(
                        f"teams.{slug}.parent", f"parent team {team.parent!r} does not exist"
                    )
                children[team.parent].append(slug)
        paths: dict[str, tuple[str, ...]] = {}
        for slug in teams:
            path = [slug]
            seen = {slug}
            parent = teams[slug].parent
            while parent is not None:
                if parent in seen:
                    raise ValidationError(f"teams.{slug}.parent", "team tree has a cycle")
                seen.add(parent)
                path.append(parent)
                parent = teams[parent].parent
            paths[slug] = tuple(path)
        for (owner, _pool), milli in self.reservations.items():
            if owner not in teams:
                raise ValidationError("reservations", f"team {owner!r} does not exist")
            if milli < 0:
                raise ValidationError("reservations", f"must be >= 0, got {milli}")
        object.__setattr__(self, "teams", MappingProxyType(teams))
        object.__setattr__(self, "reservations", MappingProxyType(dict(self.reservations)))
        object.__setattr__(
            self,
            "_children",
            MappingProxyType({k: tuple(sorted(v)) for k, v in children.items()}),
        )
        object.__setattr__(self, "_paths", MappingProxyType(paths))
        object.__setattr__(
            self, "_top", tuple(sorted(s for s, t in teams.items() if t.parent is None))
        )

    # -- structure -------------------------------------------------------
    def team(self, slug: str) -> Team:
        try:
            return self.teams[slug]
        except KeyError:
            raise NotFound("team", slug, self.teams) from None

    def children(self, slug: str) -> tuple[str, ...]:
        """Children of ``slug``, sorted by slug."""
        return self._children[slug]

    def top_level(self) -> tuple[str, ...]:
        return self._top

    def is_leaf(self, slug: str) -> bool:
        return not self._children[slug]

    def path(self, slug: str) -> tuple[str, ...]:
        """``slug`` and its ancestors, leaf first, top-level team last."""
        return self._paths[slug]

    def depth(self, slug: str) -> int:
        return len(self._paths[slug]) - 1

    def leaves(self) -> tuple[str, ...]:
        return tuple(sorted(s for s in self.teams if not self._children[s]))

    def pools(self) -> tuple[str, ...]:
        return tuple(sorted({pool for (_t, pool) in self.reservations}))

    # -- reservations, buckets, caps --------------------------------------
    def reservation(self, team: str, pool: str) -> int:
        return self.reservations.get((team, pool), 0)

    def bucket(self, team: str, pool: str) -> int:
        """The part of the team's reservation not handed to its children."""
        return self.reservation(team, pool) - sum(
            self.reservation(c, pool) for c in self._children[team]
        )

    def cap(self, team: str, pool: str) -> int | None:
        """Burst cap in milli-GPU (floored), or None when unlimited."""
        pct = self.teams[team].burst_limit_percent
        if pct is None:
            return None
        return self.reservation(team, pool) * (100 + pct) // 100

    # -- building ------------------------------------------------------------
    def with_team(self, team: Team) -> OrgTree:
        teams = dict(self.teams)
        teams[team.slug] = team
        return OrgTree(teams, self.reservations)

    def without_team(self, slug: str) -> OrgTree:
        if self._children.get(slug):
            raise ValidationError("team", f"team {slug!r} has children; delete them first")
        teams = {k: v for k, v in self.teams.items() if k != slug}
        res = {k: v for k, v in self.reservations.items() if k[0] != slug}
        return OrgTree(teams, res)

    def with_reservation(self, team: str, pool: str, milli: int) -> OrgTree:
        self.team(team)
        res = dict(self.reservations)
        if milli == 0:
            res.pop((team, pool), None)
        else:
            res[(team, pool)] = milli
        return OrgTree(self.teams, res)


def build_tree(
    teams: Iterable[Team], reservations: Mapping[tuple[str, str], int] | None = None
) -> OrgTree:
    """Build a tree, refusing duplicate slugs."""
    by_slug: dict[str, Team] = {}
    for team in teams:
        if team.slug in by_slug:
            raise ValidationError("slug", f"team {team.slug!r} is defined twice", "unique slugs")
        by_slug[team.slug] = team
    return OrgTree(by_slug, dict(reservations or {}))


def validate_reservations(
    tree: OrgTree, capacities: Mapping[str, int], pools: Iterable[str] | None = None
) -> None:
    """Check SPEC section 2's reservation rules in each pool.

    - the children's reservations sum to at most the parent's;
    - the top-level teams' reservations sum to at most the pool's capacity.
    Raises ReservationError with the numbers. ``capacities`` maps pool to milli-GPU.
    """
    names = sorted(set(pools) if pools is not None else set(tree.pools()) | set(capacities))
    for pool in names:
        for slug in sorted(tree.teams):
            kids = tree.children(slug)
            if not kids:
                continue
            total = sum(tree.reservation(c, pool) for c in kids)
            own = tree.reservation(slug, pool)
            if total > own:
                parts = ", ".join(
                    f"{c} {format_gpus(tree.reservation(c, pool))}"
                    for c in kids
                    if tree.reservation(c, pool)
                )
                raise ReservationError(
                    f"reservations.{slug}.{pool}",
                    f"children of {slug!r} reserve {format_gpus(total)} GPUs in pool {pool!r} "
                    f"({parts}) but {slug!r} reserves only {format_gpus(own)}",
                    f"children's sum <= {format_gpus(own)}",
                )
        if pool not in capacities:
            if any(tree.reservation(t, pool) for t in tree.top_level()):
                raise ReservationError(
                    f"reservations.{pool}", f"pool {pool!r} does not exist", "an existing pool"
                )
            continue
        top_total = sum(tree.reservation(t, pool) for t in tree.top_level())
        capacity = capacities[pool]
        if top_total > capacity:
            raise ReservationError(
                f"reservations.{pool}",
                f"top-level teams reserve {format_gpus(top_total)} GPUs in pool {pool!r}, "
                f"more than its capacity of {format_gpus(capacity)}",
                f"sum <= {format_gpus(capacity)}",
            )
