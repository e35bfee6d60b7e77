"""Invariants of entitlements (SPEC 4) over random organizations and demand."""

from __future__ import annotations

import importlib.util
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from types import ModuleType

from hypothesis import given, settings
from hypothesis import strategies as st

from apportion.domain.org import OrgTree, Team, build_tree
from apportion.engine.fairshare.demand import DemandBook, DemandItem, Entitlements, entitlements
from apportion.engine.fairshare.fill import ROOT

POOL = "p"
SETTINGS = settings(max_examples=75, deadline=None)


@dataclass(frozen=True)
class World:
    tree: OrgTree
    capacity: int
    demand: list[DemandItem]


@st.composite
def worlds(draw: st.DrawFn, *, with_reserved: bool = True, valid: bool = True) -> World:
    """A random tree (up to 9 teams), valid reservations, and demand on its leaves."""
    count = draw(st.integers(1, 9))
    parents: list[int | None] = [None]
    for i in range(1, count):
        parents.append(draw(st.none() | st.integers(0, i - 1)))
    teams = [
        Team(
            f"t{i}",
            parent=None if parents[i] is None else f"t{parents[i]}",
            bursting_priority=draw(st.integers(1, 10)),
            burst_limit_percent=draw(st.none() | st.sampled_from([0, 25, 50, 100])),
        )
        for i in range(count)
    ]
    # Reservations top-down, each within what its parent has not handed down yet.
    free: dict[int | None, int] = {None: draw(st.integers(0, 40)) * 1000}
    reservations: dict[tuple[str, str], int] = {}
    for i in range(count):
        milli = draw(st.integers(0, free[parents[i]] // 1000)) * 1000
        free[parents[i]] -= milli
        free[i] = milli
        if milli:
            reservations[(f"t{i}", POOL)] = milli
    tree = build_tree(teams, reservations)
    top_total = sum(tree.reservation(t, POOL) for t in tree.top_level())
    capacity = top_total + draw(st.integers(0, 20)) * 1000
    if not valid:
        capacity = draw(st.integers(0, 40)) * 1000  # e.g. after a node went down
    leaves = tree.leaves()
    demand = [
        DemandItem(
            team=draw(st.sampled_from(leaves)),
            is_reserved=with_reserved and draw(st.booleans()),
            priority=draw(st.sampled_from([10, 50, 75, 100, 200])),
            milli=draw(st.integers(1, 40)) * 250,
            submitted_at=draw(st.integers(0, 3)),
            workload_id=n,
        )
        for n in range(draw(st.integers(0, 14)))
    ]
    return World(tree, capacity, demand)


def compute(world: World) -> Entitlements:
    return entitlements(world.tree, POOL, world.capacity, world.demand)


def leaf_demand(world: World) -> dict[str, int]:
    totals: dict[str, int] = {}
    for item in world.demand:
        totals[item.team] = totals.get(item.team, 0) + item.milli
    return totals


def assert_invariants(world: World, result: Entitlements) -> None:
    tree = world.tree
    total = sum((result.of(t) for t in tree.top_level()), Fraction(0))
    assert total <= world.capacity
    demand = leaf_demand(world)
    for slug in tree.teams:
        got = result.of(slug)
        assert got >= 0
        kids = tree.children(slug)
        if kids:
            assert got == sum((result.of(c) for c in kids), Fraction(0))
        else:
            assert got <= demand.get(slug, 0)
        cap = tree.cap(slug, POOL)
        assert cap is None or got <= cap, (slug, got, cap)


@SETTINGS
@given(worlds())
def test_within_capacity_demand_and_caps(world: World) -> None:
    assert_invariants(world, compute(world))


@SETTINGS
@given(worlds(valid=False))
def test_within_capacity_even_when_reservations_exceed_it(world: World) -> None:
    assert_invariants(world, compute(world))


@SETTINGS
@given(worlds(valid=False) | worlds())
def test_surplus_is_what_the_bucket_steps_leave(world: World) -> None:
    """Step 3, whichever way step 4 was found (the per-subtree shortcuts too),
    against the general bucket passes of steps 1-2."""
    result = compute(world)
    granted, _left, _work = DemandBook(world.tree, POOL, world.demand)._steps_1_2(world.capacity)
    assert result.surplus == max(0, world.capacity - granted[ROOT])


@SETTINGS
@given(worlds(valid=False))
def test_scaled_shares_are_the_shares_over_their_least_common_denominator(
    world: World,
) -> None:
    result = compute(world)
    assert result.scale == math.lcm(*(v.denominator for v in result.by_team.values()))
    assert dict(result.scaled) == {
        t: int(v * result.scale) for t, v in result.by_team.items()
    }


def max_grantable(tree: OrgTree, demand: Mapping[str, int], team: str) -> int:
    """The most a subtree could be granted under its caps (elastic demand only)."""
    kids = tree.children(team)
    most = sum(max_grantable(tree, demand, c) for c in kids) if kids else demand.get(team, 0)
    cap = tree.cap(team, POOL)
    return most if cap is None else min(cap, most)


@SETTINGS
@given(worlds(with_reserved=False))
def test_pool_is_fully_granted_up_to_caps(world: World) -> None:
    demand = leaf_demand(world)
    reachable = sum(max_grantable(world.tree, demand, t) for t in world.tree.top_level())
    result = compute(world)
    total = sum((result.of(t) for t in world.tree.top_level()), Fraction(0))
    assert total == min(world.capacity, reachable)


@SETTINGS
@given(worlds(), st.data())
def test_raising_a_top_level_weight_never_lowers_its_entitlement(
    world: World, data: st.DataObject
) -> None:
    top = data.draw(st.sampled_from(world.tree.top_level()))
    old = world.tree.team(top)
    heavier = data.draw(st.integers(old.bursting_priority, 10))
    tree = world.tree.with_team(replace(old, bursting_priority=heavier))
    before = compute(world).of(top)
    after = entitlements(tree, POOL, world.capacity, world.demand).of(top)
    assert after >= before


@SETTINGS
@given(worlds(), st.randoms(use_true_random=False))
def test_independent_of_demand_order(world: World, rng: random.Random) -> None:
    shuffled = list(world.demand)
    rng.shuffle(shuffled)
    assert compute(world) == entitlements(world.tree, POOL, world.capacity, shuffled)


@SETTINGS
@given(worlds(), st.data())
def test_demand_book_updates_match_a_fresh_computation(world: World, data: st.DataObject) -> None:
    book = DemandBook(world.tree, POOL, world.demand)
    kept = list(world.demand)
    for _ in range(data.draw(st.integers(0, len(kept)))):
        item = kept.pop(data.draw(st.integers(0, len(kept) - 1)))
        book.remove(item)
        book.entitlements(world.capacity)  # exercise the caches in between
    fresh = entitlements(world.tree, POOL, world.capacity, kept)
    assert book.entitlements(world.capacity).by_team == fresh.by_team


@SETTINGS
@given(worlds(valid=False), st.data())
def test_demand_book_caches_follow_adds_removes_and_capacity(
    world: World, data: st.DataObject
) -> None:
    """Per-top caches stay exact whichever way demand and capacity move (both paths)."""
    pending = list(world.demand)
    kept: list[DemandItem] = []
    book = DemandBook(world.tree, POOL)
    for _ in range(data.draw(st.integers(1, 12))):
        if pending and (not kept or data.draw(st.booleans())):
            item = pending.pop(data.draw(st.integers(0, len(pending) - 1)))
            book.add(item)
            kept.append(item)
        elif kept:
            book.remove(kept.pop(data.draw(st.integers(0, len(kept) - 1))))
        capacity = data.draw(st.integers(0, 50)) * 1000
        fresh = entitlements(world.tree, POOL, capacity, kept)
        assert book.entitlements(capacity).by_team == fresh.by_team


def load_bench() -> ModuleType:
    """bench/fairshare.py, whose naive per-workload implementation is the reference."""
    path = Path(__file__).resolve().parents[2] / "bench" / "fairshare.py"
    spec = importlib.util.spec_from_file_location("bench_fairshare", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


NAIVE = load_bench().Naive


@SETTINGS
@given(worlds(valid=False) | worlds())
def test_agrees_with_the_naive_reference(world: World) -> None:
    naive = NAIVE(world.tree, world.capacity, world.demand, pool=POOL).run()
    assert naive == dict(compute(world).by_team)
