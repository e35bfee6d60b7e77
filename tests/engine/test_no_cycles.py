"""SPEC 6.8 (revision 3): with arrivals stopped, repeated cycles reach a state
in which nothing changes, requeued victims included.

Random worlds: a three-level tree with burst caps, weights, grace periods and
starvation holds, filled with small elastic work of many teams (half of it
requeued when preempted), then staggered arrivals of reserved and elastic
work (fractions, gangs, elastic scaling, topology, node selectors), some
completions between them. Then arrivals stop and time runs only as far as
victims' grace periods need: the cycles must come to rest.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from tests.engine.harness import NoFixedPoint, World
from tests.engine.test_cycle_properties import (
    check_invariants,
    complete_and_advance,
    same_org,
    submit_step,
)
from tests.engine.test_victim_exhaust import crowded, submit_arrival

#: Rounds of "settle, then let the grace of exiting victims pass" after the
#: last arrival; each round is at most 60 cycles at one instant.
ROUNDS = 12


def run_to_rest(case: tuple[World, list[dict], list[dict], int | None]) -> tuple[World, int]:
    """Replay the arrivals, then settle; returns the world and the cycles
    spent after the last arrival. Raises NoFixedPoint if it never rests."""
    world, fill, steps, _cordon = case
    w = same_org(world)
    for step in fill:
        submit_step(w, step)
        w.settle(60)
    for step in steps:
        submit_arrival(w, step)
        w.settle(60)
        check_invariants(w)
        complete_and_advance(w, step)
    cycles = 0
    for _ in range(ROUNDS):
        cycles += w.settle(60)
        if not w.exiting:
            assert not w.cycle().changes_anything
            return w, cycles
        w.advance(max(e.exits_at for e in w.exiting) - w.now)
    raise NoFixedPoint(f"still changing after {ROUNDS} rounds")


# Derandomized: SPEC rev 3 still allows a rare cycle (tests/engine/
# test_preemption_cycles.py, the strict xfail), which a random run of this
# property finds about once in 200 examples; CI must not fail by chance, so
# CI runs a fixed sample, and a longer random run is recorded in
# docs/scheduling.md ("A cycle revision 3 allows").
@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(crowded())
def test_cycles_come_to_rest_once_arrivals_stop(
    case: tuple[World, list[dict], list[dict], int | None],
) -> None:
    w, _cycles = run_to_rest(case)
    check_invariants(w)


def test_the_generator_preempts_in_most_worlds() -> None:
    """The property above says little unless its worlds preempt: at least half
    of a fixed sample must (requeued victims among them)."""
    seen = {"worlds": 0, "preempting": 0, "requeued": 0}

    @settings(max_examples=30, derandomize=True, database=None, deadline=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(crowded())
    def sample(case: tuple[World, list[dict], list[dict], int | None]) -> None:
        w, _ = run_to_rest(case)
        seen["worlds"] += 1
        seen["preempting"] += bool(w.preemptions)
        seen["requeued"] += any(s.attempt > 1 for s in w.states.values())

    sample()
    assert seen["preempting"] >= seen["worlds"] // 2, seen
    assert seen["requeued"] >= 1, seen
