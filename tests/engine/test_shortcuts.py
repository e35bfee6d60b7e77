"""Every shortcut of the victim search only skips work whose outcome it knows:
plans are identical with each one switched off (``Shortcuts`` in
``CycleConfig``), on preemption-heavy random worlds; and the failed-search
memo tells workloads apart by everything the search depends on.
"""

from __future__ import annotations

from dataclasses import fields, replace

import pytest
from hypothesis import HealthCheck, given, settings

from apportion.engine.snapshot import ALL_SHORTCUTS, Shortcuts
from tests.engine.harness import World
from tests.engine.test_victim_exhaust import crowded, replay

SWITCHES = [f.name for f in fields(Shortcuts)]


@pytest.mark.parametrize("switch", SWITCHES)
@settings(max_examples=20, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(case=crowded())
def test_plans_are_identical_with_a_shortcut_off(
    switch: str, case: tuple[World, list[dict], list[dict], int | None],
) -> None:
    off = Shortcuts(**{switch: False})
    on_plans, on_states = replay(*case)
    off_plans, off_states = replay(*case, shortcuts=off)
    assert on_plans == off_plans
    assert on_states == off_states


def test_the_worlds_compared_do_preempt() -> None:
    """The comparison above is only worth something if searches run and
    succeed in those worlds: most of a fixed sample preempts."""
    seen: list[bool] = []

    @settings(max_examples=20, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(crowded())
    def probe(case: tuple[World, list[dict], list[dict], int | None]) -> None:
        plans, _ = replay(*case)
        seen.append(any(d.kind.value == "preempt" for p in plans for d in p))

    probe()
    assert len(seen) >= 20 and sum(seen) >= len(seen) // 2, (sum(seen), len(seen))


def _zones(shortcuts: Shortcuts = ALL_SHORTCUTS) -> World:
    """Two 4-GPU nodes, n000 in zone x and n001 in zone y. Teams a and c
    reserve 4 GPUs each; c's reserved work fills zone y and b's elastic work
    (borrowing a's idle reservation) fills zone x."""
    w = World(shortcuts=shortcuts).pool(nodes=2, gpus=4)
    w.nodes = [replace(n, labels={"zone": "x" if n.name.endswith("0") else "y"})
               for n in w.nodes]
    w.team("a", main=4).team("b").team("c", main=4)
    w.submit("c-serve", "c", 4, wclass="reserved", node_selector={"zone": "y"}, running=True)
    w.submit("b-train", "b", 4, node_selector={"zone": "x"}, running=True)
    return w


@pytest.mark.parametrize("memo", [True, False])
def test_a_failed_search_does_not_hide_one_with_another_node_selector(memo: bool) -> None:
    """a submits two reserved jobs of the same shape: one for zone y, where
    only c's reserved work runs (nothing may be preempted: it waits), then one
    for zone x, where b's elastic work runs inside a's idle reservation: it
    must take it back in the same cycle, memo or not."""
    w = _zones(Shortcuts(failed_search_memo=memo))
    w.submit("a-y", "a", 2, wclass="reserved", node_selector={"zone": "y"})
    w.submit("a-x", "a", 2, wclass="reserved", node_selector={"zone": "x"})
    w.cycle()
    assert w.status("a-x") == "Running"
    assert w.status("a-y") == "Queued"
    assert [w.names["b-train"]] == [p.victim for p in w.preemptions]
