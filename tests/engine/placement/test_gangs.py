"""Gangs and elastic scaling: all of min_pods..pods in one trial, or none."""

from __future__ import annotations

import pytest

from apportion.engine.placement import FailureKind

from .helpers import all_used, layout, nodes, req, state, whole


def test_s7_gang_of_8_with_6_free_waits_then_starts() -> None:
    node_list = nodes(("a", 4), ("b", 4))
    cs = state(node_list)
    cs.occupy((1, 0, 0), whole("a", 0, 1))
    before = all_used(cs, node_list)
    res = cs.place(req(1, pods=8))
    assert res.failure is FailureKind.GANG_WAITING
    assert res.fitting_pods == 6 and res.message == "needs 8 × 1 GPU; 6 fit now"
    assert all_used(cs, node_list) == before  # a failed trial leaves nothing behind
    cs.vacate((1, 0, 0))
    res = cs.place(req(1, pods=8))
    assert res.ok and len(res.pods) == 8


@pytest.mark.parametrize(
    ("pods", "min_pods", "free_gpus", "placed", "failure"),
    [
        pytest.param(8, 4, 6, 6, None, id="elastic-takes-as-many-as-fit"),
        pytest.param(8, 4, 8, 8, None, id="elastic-capped-at-pods"),
        pytest.param(8, 4, 3, 0, FailureKind.GANG_WAITING, id="elastic-below-min"),
        pytest.param(8, 8, 0, 0, FailureKind.WAITING_FOR_CAPACITY, id="nothing-free"),
    ],
)
def test_elastic_scaling(pods: int, min_pods: int, free_gpus: int, placed: int,
                         failure: FailureKind | None) -> None:
    cs = state(nodes(("a", 8), ("b", 8)))
    busy = 16 - free_gpus
    cs.occupy((1, 0, 0), whole("a", *range(min(busy, 8))))
    if busy > 8:
        cs.occupy((2, 0, 0), whole("b", *range(busy - 8)))
    res = cs.place(req(1, pods=pods, min_pods=min_pods))
    assert res.failure is failure and len(res.pods) == placed


def test_pods_of_a_gang_see_each_other() -> None:
    cs = state(nodes(("a", 1), ("b", 1)))
    res = cs.place(req(0.5, pods=3))
    assert layout(res) == [("a", (0,), 500), ("a", (0,), 500), ("b", (0,), 500)]


def test_fragmented_gang_message() -> None:
    cs = state(nodes(("a", 2), ("b", 2)))
    cs.occupy((1, 0, 0), whole("a", 0))
    cs.occupy((2, 0, 0), whole("b", 0))
    res = cs.place(req(2, pods=1))
    assert res.failure is FailureKind.FRAGMENTED
    res = cs.place(req(0.75, pods=2))
    assert res.ok  # two 0.75 pods take one free device each
    res = cs.place(req(2, pods=2, min_pods=1))
    assert res.failure is FailureKind.FRAGMENTED and res.fitting_pods == 0
