"""Fractional pods: best fit on one device, shared devices first (SPEC 5)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from apportion.engine.placement import FailureKind

from .helpers import layout, nodes, pods_on, req, state


def test_four_quarter_pods_share_one_device() -> None:
    cs = state(nodes(("a", 2), ("b", 2)))
    res = cs.place(req(0.25, pods=4))
    assert res.ok
    assert layout(res) == [("a", (0,), 250)] * 4


@pytest.mark.parametrize(
    ("used", "gpus", "expected"),
    [
        pytest.param({}, 0.5, ("a", 0), id="empty-pool-first-node-first-device"),
        pytest.param({("b", 1): 500}, 0.5, ("b", 1), id="shared-device-before-whole-one"),
        pytest.param({("a", 0): 250, ("b", 1): 500}, 0.5, ("b", 1), id="tightest-that-fits"),
        pytest.param({("a", 0): 750, ("b", 1): 500}, 0.5, ("b", 1), id="skip-too-full"),
        pytest.param({("a", 0): 500, ("b", 1): 500}, 0.5, ("a", 0), id="tie-by-node-name"),
        pytest.param({("a", 1): 500, ("a", 0): 500}, 0.25, ("a", 0), id="tie-by-device-index"),
        pytest.param({("a", 0): 1000}, 0.75, ("a", 1), id="fullest-node-for-a-fresh-device-a"),
        pytest.param({("b", 0): 1000}, 0.75, ("b", 1), id="fullest-node-for-a-fresh-device-b"),
    ],
)
def test_best_fit_device(used: dict[tuple[str, int], int], gpus: float,
                         expected: tuple[str, int]) -> None:
    cs = state(nodes(("a", 2), ("b", 2)))
    for k, ((node, index), milli) in enumerate(sorted(used.items())):
        cs.occupy((k + 1, 0), (pods_on(node, (index, milli)),))
    res = cs.place(req(gpus))
    assert res.ok and layout(res) == [(expected[0], (expected[1],), round(gpus * 1000))]


def test_memory_sized_share_uses_arbitrary_milli() -> None:
    cs = state(nodes(("a", 1), ("b", 1)))
    cs.occupy((1, 0, 0), (pods_on("a", (0, 540)),))
    assert layout(cs.place(req(0, milli=460))) == [("a", (0,), 460)]
    assert layout(cs.place(req(0, milli=461))) == [("b", (0,), 461)]


def test_memory_share_of_a_whole_device_needs_a_free_device() -> None:
    cs = state(nodes(("a", 2)))
    cs.occupy((1, 0, 0), (pods_on("a", (0, 10)),))
    assert layout(cs.place(req(0, milli=1000))) == [("a", (1,), 1000)]


def test_fragmented_fraction_message() -> None:
    cs = state(nodes(("a", 2)))
    cs.occupy((1, 0, 0), (pods_on("a", (0, 500), (1, 750)),))
    res = cs.place(req(0.75))
    assert res.failure is FailureKind.FRAGMENTED
    assert res.free_milli == 750 and res.fitting_pods == 0
    assert "0.75 GPU" in res.message and "at most 0.5 on any device" in res.message


def test_share_larger_than_a_device_never_fits() -> None:
    cs = state(nodes(("a", 2)))
    res = cs.can_ever_place(req(0, milli=1500))
    assert res is not None and res.failure is FailureKind.NO_NODE_FITS


def test_memory_share_of_a_whole_device_waits_when_every_device_is_shared() -> None:
    """A share sized by memory to a whole device (1000 milli-GPU) is a
    fractional pod the pool can hold (SPEC 1, 5): with every device partly
    used it waits for one to free up, it is not refused as never fitting."""
    cs = state(nodes(("a", 2)))
    assert cs.can_ever_place(req(0, milli=1000)) is None
    cs.occupy((1, 0, 0), (pods_on("a", (0, 10)),))
    cs.occupy((2, 0, 0), (pods_on("a", (1, 10)),))
    res = cs.place(req(0, milli=1000))
    assert res.failure is FailureKind.FRAGMENTED
    assert res.message == "needs 1 GPU; 1.98 GPUs free but at most 0.99 on any device"


@pytest.mark.parametrize("selector", [None, {"kind": "x"}])
def test_a_device_with_one_milli_gpu_free_takes_a_one_milli_share(
    selector: dict[str, str] | None,
) -> None:
    """A memory-sized share can be 1 milli-GPU (SPEC 1: a device's memory
    divided up); best fit puts it on the device with exactly that much free,
    not on a whole one, also when only the nodes of a selector are looked at."""
    cs = state(nodes(("a", 2, {"kind": "x"}), ("b", 2, {"kind": "x"})))
    cs.occupy((1, 0), (pods_on("b", (1, 999)),))
    res = cs.place(replace(req(0, milli=1), node_selector=selector or {}))
    assert res.ok and layout(res) == [("b", (1,), 1)]
