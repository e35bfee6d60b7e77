"""Cordoned and down nodes take no new pods; capacity counts cordoned ones."""

from __future__ import annotations

import pytest

from apportion.engine.placement import FailureKind

from .helpers import layout, nodes, req, state, whole


@pytest.mark.parametrize(
    ("states", "capacity", "free", "expected_node"),
    [
        pytest.param({}, 12000, 12000, "a", id="all-ready"),
        pytest.param({"a": "cordoned"}, 12000, 8000, "b", id="cordoned-counts-not-used"),
        pytest.param({"a": "down"}, 8000, 8000, "b", id="down-not-counted"),
        pytest.param({"a": "down", "b": "cordoned"}, 8000, 4000, "c", id="mixed"),
    ],
)
def test_new_pods_only_on_ready_nodes(states: dict[str, str], capacity: int, free: int,
                                      expected_node: str) -> None:
    cs = state(nodes(("a", 4), ("b", 4), ("c", 4), states=states))
    assert cs.capacity == capacity and cs.free_milli() == free
    assert layout(cs.place(req(4)))[0][0] == expected_node
    assert {p.node for p in cs.place(req(0.25, pods=16)).pods} == {expected_node}


def test_existing_work_on_unschedulable_nodes_is_kept() -> None:
    cs = state(nodes(("a", 2), ("b", 2), states={"a": "cordoned", "b": "down"}))
    cs.occupy((1, 0, 0), whole("a", 0, 1))
    cs.occupy((2, 0, 0), whole("b", 0))
    assert cs.device_used("a", 1) == 1000 and cs.device_used("b", 0) == 1000
    with pytest.raises(ValueError, match="1000"):
        cs.occupy((3, 0, 0), whole("b", 0))
    res = cs.place(req(1))
    assert res.failure is FailureKind.WAITING_FOR_CAPACITY
    assert res.fitting_pods == 0 and res.free_milli == 0


def test_cordoned_counts_for_can_ever_but_down_does_not() -> None:
    cs = state(nodes(("a", 8), ("b", 4), states={"a": "cordoned"}))
    assert cs.can_ever_place(req(8)) is None
    assert cs.place(req(8)).failure is FailureKind.WAITING_FOR_CAPACITY
    cs = state(nodes(("a", 8), ("b", 4), states={"a": "down"}))
    never = cs.can_ever_place(req(8))
    assert never is not None and never.failure is FailureKind.NO_NODE_FITS


def test_bad_input_is_a_value_error() -> None:
    cs = state(nodes(("a", 2)))
    with pytest.raises(ValueError, match="not in pool"):
        cs.occupy((1, 0, 0), whole("zz", 0))
    with pytest.raises(ValueError, match="no device"):
        cs.occupy((1, 0, 0), whole("a", 5))
    with pytest.raises(ValueError, match="min_pods"):
        cs.place(req(1, pods=2, min_pods=3))
    with pytest.raises(ValueError, match="node 'a' given twice"):
        state(nodes(("a", 2), ("a", 4)))
    with pytest.raises(ValueError, match="node 'a' is in pool 'q', not 'p'"):
        state(nodes(("a", 2), pool="q"))


@pytest.mark.parametrize(("request_", "message"), [
    (req(0, milli=-250), "bad request size: charge -250, whole 0"),
    (req(1, pods=2, min_pods=3), "need 1 <= min_pods <= pods, got 3/2"),
])
def test_a_malformed_request_is_refused_as_the_caller_s_bug(
    request_: object, message: str
) -> None:
    """The engine builds requests from validated specs; one that could not come
    from a spec (a negative share, more pods required than asked) is a bug of
    the caller and raises at once, naming the numbers."""
    cs = state(nodes(("a", 2)))
    with pytest.raises(ValueError, match=message):
        cs.place(request_)  # type: ignore[arg-type]
