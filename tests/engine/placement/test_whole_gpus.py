"""Whole-GPU pods: N fully free devices on one node, the tightest node (SPEC 5)."""

from __future__ import annotations

import pytest

from apportion.engine.placement import FailureKind

from .helpers import layout, nodes, pods_on, req, state, whole


def _state_with(used: dict[str, tuple[int, ...]]):  # type: ignore[no-untyped-def]
    cs = state(nodes(("a", 8), ("b", 8), ("c", 4)))
    for k, (node, idx) in enumerate(sorted(used.items())):
        cs.occupy((k + 1, 0), whole(node, *idx))
    return cs


@pytest.mark.parametrize(
    ("used", "gpus", "expected"),
    [
        pytest.param({}, 4, [("c", (0, 1, 2, 3), 4000)], id="smallest-node-that-fits"),
        pytest.param({}, 8, [("a", tuple(range(8)), 8000)], id="tie-by-node-name"),
        pytest.param({"a": (0, 1, 2, 3, 4)}, 2, [("a", (5, 6), 2000)],
                     id="fewest-free-devices-wins"),
        pytest.param({"a": tuple(range(7))}, 2, [("c", (0, 1), 2000)],
                     id="skip-node-with-too-few"),
        pytest.param({"a": (0, 1, 2, 3, 4)}, 3, [("a", (5, 6, 7), 3000)],
                     id="exact-fit-node"),
        pytest.param({"a": (1, 3, 5)}, 5, [("a", (0, 2, 4, 6, 7), 5000)],
                     id="non-contiguous-devices-lowest-index"),
        pytest.param({"c": (0,)}, 1, [("c", (1,), 1000)], id="one-gpu-tightest"),
    ],
)
def test_tightest_node(used: dict[str, tuple[int, ...]], gpus: int,
                       expected: list[tuple[str, tuple[int, ...], int]]) -> None:
    res = _state_with(used).place(req(gpus))
    assert res.ok and layout(res) == expected


def test_partly_used_device_is_not_free_for_whole_pods() -> None:
    cs = state(nodes(("a", 2)))
    cs.occupy((1, 0, 0), (pods_on("a", (0, 250), (1, 250)),))
    res = cs.place(req(1))
    assert res.failure is FailureKind.FRAGMENTED
    assert res.message == "needs 1 GPU; 1.5 GPUs free but at most 0 on any node"


def test_fragmented_across_nodes_message() -> None:
    cs = state(nodes(*((f"n{i}", 4) for i in range(4))))
    for k in range(4):
        cs.occupy((k + 1, 0), whole(f"n{k}", 0) if k < 2 else whole(f"n{k}", 0, 1))
    res = cs.place(req(4))
    assert res.failure is FailureKind.FRAGMENTED and res.free_milli == 10000
    assert res.message == "needs 4 GPUs on one node; 10 GPUs free but at most 3 on any node"


def test_waiting_for_capacity() -> None:
    cs = state(nodes(("a", 2)))
    cs.occupy((1, 0, 0), whole("a", 0, 1))
    res = cs.place(req(1))
    assert res.failure is FailureKind.WAITING_FOR_CAPACITY
    assert res.message == "needs 1 GPU; 0 GPUs free"
    assert cs.can_ever_place(req(1)) is None


@pytest.mark.parametrize(
    ("gpus", "pods", "message"),
    [
        pytest.param(16, 1, "needs 16 GPUs on one node; the largest node has 8", id="too-big"),
        pytest.param(4, 5, "needs 5 × 4 GPUs; the pool holds at most 4 such pods "
                           "(capacity 16 GPUs)", id="gang-larger-than-pool"),
    ],
)
def test_never_fits(gpus: int, pods: int, message: str) -> None:
    cs = state(nodes(("a", 8), ("b", 8)))
    for result in (cs.can_ever_place(req(gpus, pods)), cs.place(req(gpus, pods))):
        assert result is not None and result.failure is FailureKind.NO_NODE_FITS
        assert result.message == message


def test_gpu_type_and_selector_filter_nodes() -> None:
    node_list = nodes(("a", 8, {"tier": "x"}), ("b", 8), ("c", 2, {"tier": "x"}),
                      gpu_types={"a": "a100", "c": "a100"})
    cs = state(node_list, gpu_type="h100")
    assert layout(cs.place(req(2, gpu_type="a100"))) == [("c", (0, 1), 2000)]
    assert layout(cs.place(req(2, gpu_type="h100"))) == [("b", (0, 1), 2000)]
    assert layout(cs.place(req(4, selector={"tier": "x"}))) == [("a", (0, 1, 2, 3), 4000)]
    res = cs.place(req(1, gpu_type="t4"))
    assert res.failure is FailureKind.NO_NODE_FITS and "gpu_type=t4" in res.message
    never = cs.can_ever_place(req(1, selector={"tier": "y"}))
    assert never is not None and never.failure is FailureKind.NO_NODE_FITS
