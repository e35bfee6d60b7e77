"""The kept-state cycle runner makes exactly the plans ``run_cycle`` makes."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from apportion.engine.kept_state import CycleCache
from apportion.engine.snapshot import CycleConfig
from tests.engine.harness import NoFixedPoint, World
from tests.engine.test_cycle_properties import (
    complete_and_advance,
    preempting_worlds,
    rate_of,
    same_org,
    submit_step,
    worlds,
)


def replay(world: World, steps: list[dict], cached: bool) -> list:
    return replayed(world, steps, cached)[1]


def replayed(world: World, steps: list[dict], cached: bool) -> tuple[World, list]:
    cache = CycleCache()
    w = same_org(world, cache if cached else None)
    try:
        for step in steps:
            submit_step(w, step)
            # A plan that is never applied (a dry run, a stale snapshot) must
            # leave no trace in a kept state.
            w.cycle_fn(w.snapshot(), CycleConfig(cycle_id=999))
            w.settle()
            complete_and_advance(w, step)
            w.settle()
    except NoFixedPoint:  # both replays stop at the same cycle if plans agree
        pass
    if cached:
        assert cache.rebuilds == 1 and cache.updates > 0
    return w, [p.decisions for p in w.plans]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_cached_plans_equal_fresh_plans(case: tuple[World, list[dict]]) -> None:
    world, steps = case
    assert replay(world, steps, cached=True) == replay(world, steps, cached=False)


def _same_plans(world: World, steps: list[dict]) -> World:
    cached, plans = replayed(world, steps, cached=True)
    assert plans == replay(world, steps, cached=False)
    return cached


def test_cached_plans_equal_fresh_plans_in_worlds_that_preempt() -> None:
    """Preemptions, nominations and requeues change the kept state the most;
    over a fixed sample of worlds built to preempt, at least half must."""
    seen = rate_of(preempting_worlds(), 20, _same_plans)
    assert seen["preempting"] * 2 >= seen["examples"], seen


def _starts_and_nominates(cycle_fn: object) -> tuple[list, dict[str, str]]:
    w = World(cycle_fn)
    w.pool(nodes=2, gpus=8, preemption_grace=60).team("a").team("b", main=8)
    w.submit("x", "a", 8, running=True)
    w.submit("y", "a", 7, running=True)
    w.submit("r", "b", 8, wclass="reserved")  # preempts x, waits 60 s for it
    w.submit("c", "b", 1)  # starts on the free GPU in the same cycle
    w.settle()
    w.submit("d", "a", 1)
    w.submit("e", "b", 1, wclass="reserved")
    w.settle()
    w.advance(60)
    w.settle()
    return [p.decisions for p in w.plans], {n: w.status(n) for n in w.names}


def test_a_cycle_that_starts_one_workload_and_nominates_another() -> None:
    """The kept state leaves a cycle's starts in place for the next snapshot to
    confirm, but only when the cycle decided nothing else: here it also
    nominated (and preempted), so everything is taken back and reloaded."""
    cache = CycleCache()
    kept = _starts_and_nominates(cache)
    assert kept == _starts_and_nominates(None)
    assert kept[1]["r"] == "Running" and kept[1]["c"] == "Running"
    assert cache.kept > 0  # later cycles that only started work were kept
