"""SPEC 6.5's shrink at the lifecycle and plan level: the taken pods stop,
the workload stays Running on the others, and the pods keep their numbers."""

import pytest

from apportion.domain.errors import IllegalTransition
from apportion.domain.lifecycle import Status, shrink, submitted, transition
from apportion.domain.workload import DeviceShare, PodPlacement, make_spec
from apportion.engine.apply import apply_plan
from apportion.engine.plan import Decision, DecisionKind, Plan


def running(pods: int = 4, min_pods: int = 2):
    w = submitted(1, make_spec(name="w", team="t", gpus=1, pods=pods, min_pods=min_pods), at=0)
    w = transition(w, Status.QUEUED, 0, pool="main")
    placement = tuple(PodPlacement("a", (DeviceShare(i, 1000),)) for i in range(pods))
    w = transition(w, Status.STARTING, 1, placement=placement)
    return transition(w, Status.RUNNING, 2)


def test_shrink_keeps_the_lowest_pods_running() -> None:
    w = shrink(running(), (2, 3), 5, "cycle 3")
    assert w.status is Status.RUNNING
    assert [p.devices[0].index for p in w.placement] == [0, 1]
    assert w.events[-1].status is Status.RUNNING
    assert w.events[-1].message == "shrunk: pods 2-3 preempted"
    assert w.running_at == 2  # the attempt goes on


@pytest.mark.parametrize(("pods", "why"), [
    pytest.param((1,), "not the newest pod", id="not-highest"),
    pytest.param((1, 2, 3), "below min_pods", id="below-min"),
    pytest.param((), "nothing taken", id="empty"),
])
def test_shrink_refuses_what_the_spec_forbids(pods: tuple[int, ...], why: str) -> None:
    with pytest.raises(IllegalTransition):
        shrink(running(), pods, 5)


def test_only_running_work_shrinks() -> None:
    w = running()
    starting = transition(submitted(2, w.spec, at=0), Status.QUEUED, 0, pool="main")
    with pytest.raises(IllegalTransition):
        shrink(starting, (3,), 5)


def test_apply_a_shrink_decision_with_grace() -> None:
    w = running()
    plan = Plan(cycle_id=7, snapshot_version=1, now=10, decisions=(
        Decision(DecisionKind.PREEMPT, 1, "main", by=9, milli=1000, exits_at=40, pods=(3,)),
    ))
    applied = apply_plan({1: w}, (), plan)
    after = applied.states[1]
    assert after.status is Status.RUNNING and len(after.placement) == 3
    assert after.events[-1].message == "shrunk: pod 3 preempted by workload 9"
    (p,) = applied.preemptions
    assert (p.victim, p.by, p.milli, p.pods, p.exits_at) == (1, 9, 1000, (3,), 40)
    (ex,) = applied.exiting
    assert (ex.part, ex.exits_at) == (4, 40)
    assert [d.index for pod in ex.placement for d in pod.devices] == [3]
    assert plan.to_dict()["decisions"][0]["pods"] == [3]


def test_apply_a_shrink_without_grace_leaves_nothing_exiting() -> None:
    plan = Plan(cycle_id=7, snapshot_version=1, now=10, decisions=(
        Decision(DecisionKind.PREEMPT, 1, "main", by=9, milli=2000, exits_at=10, pods=(2, 3)),
    ))
    applied = apply_plan({1: running()}, (), plan)
    assert applied.exiting == ()
    assert len(applied.states[1].placement) == 2
