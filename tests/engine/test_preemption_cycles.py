"""Rules of SPEC 6.4 that can take turns forever (docs/scheduling.md,
"Preemption cycles"). The test pins today's behaviour so that a revision of
the rules shows up here: each step is checked to be the rule it claims."""

from __future__ import annotations

import pytest

from tests.engine.harness import NoFixedPoint, World


def _world() -> World:
    w = World().pool(nodes=1, gpus=8)
    w.team("t1", limit=100, main=1).team("a", "t1").team("b", "t1")
    w.submit("w1", "a", 0.25, wclass="reserved", running=True)
    w.submit("w0", "b", 0.75, priority=75, running=True)
    w.submit("w5", "b", 1, wclass="reserved")
    w.settle()
    w.submit("f6", "a", 1, pods=2, priority=75)
    w.settle()
    w.submit("f24", "a", 0.5, priority=25, requeue_on_preemption=True)
    w.settle()
    return w


def test_a_same_team_swap_and_two_fair_share_reclaims_take_turns() -> None:
    w = _world()
    assert w.status("f24") == "Running"
    w.submit("f12", "a", 0.5, pods=2, priority=50, requeue_on_preemption=True)
    w.submit("f17", "b", 0.25, pods=3, priority=25, requeue_on_preemption=True)
    with pytest.raises(NoFixedPoint):
        w.settle(12)
    names = {v: k for k, v in w.names.items()}
    last = [(names[p.victim], names[p.by]) for p in w.preemptions[-3:]]
    # The round repeats: f12 takes f24 (same team), f17 takes f12, f24 takes f17.
    assert sorted(last) == [("f12", "f17"), ("f17", "f24"), ("f24", "f12")]
    plan = w.plans[-1]
    shares = plan.entitlements["main"]
    assert (shares["a"], shares["b"]) == (750, 1250)


def test_without_requeue_on_the_newcomers_the_round_runs_once() -> None:
    """f12 and f17 are not requeued: the round happens once and ends with both
    preempted and the requeued f24 running again."""
    w = _world()
    w.submit("f12", "a", 0.5, pods=2, priority=50)
    w.submit("f17", "b", 0.25, pods=3, priority=25)
    w.settle()
    names = {v: k for k, v in w.names.items()}
    assert [(names[p.victim], names[p.by]) for p in w.preemptions] == [
        ("f24", "f12"), ("f12", "f17"), ("f17", "f24")]
    assert (w.status("f12"), w.status("f17"), w.status("f24")) == (
        "Preempted", "Preempted", "Running")
