"""Topology: required keeps a gang in one domain, preferred falls back (SPEC 5)."""

from __future__ import annotations

import pytest

from apportion.engine.placement import FailureKind

from .helpers import nodes, racks, req, state, whole


def _racks_used(res) -> set[str]:  # type: ignore[no-untyped-def]
    return {p.node.split("n")[0] for p in res.pods}


def _fill(cs, node: str, count: int, owner: int) -> None:  # type: ignore[no-untyped-def]
    cs.occupy((owner, 0, 0), whole(node, *range(count)))


def test_required_rack_gang_never_spans_racks() -> None:
    cs = state(racks(2, 2, gpus=4), topology=("rack",))
    _fill(cs, "r0n00", 2, 1)  # r0: 6 free, r1: 8 free
    res = cs.place(req(1, pods=8, topology="rack"))
    assert res.ok and _racks_used(res) == {"r1"} and res.domain == "rack=r1"
    _fill(cs, "r1n00", 1, 2)  # r0: 6 free, r1: 7 free -> 12 free in total
    res = cs.place(req(1, pods=8, topology="rack"))
    assert res.failure is FailureKind.TOPOLOGY_WAITING and res.fitting_pods == 7
    assert res.message == "needs 8 × 1 GPU in one rack; at most 7 pods fit in any rack now"


def test_preferred_rack_spans_racks_only_when_no_rack_fits() -> None:
    cs = state(racks(2, 2, gpus=4), topology=("rack",))
    _fill(cs, "r0n00", 2, 1)
    res = cs.place(req(1, pods=8, topology="rack", mode="preferred"))
    assert res.ok and _racks_used(res) == {"r1"} and res.domain == "rack=r1"
    _fill(cs, "r1n00", 1, 2)
    res = cs.place(req(1, pods=8, topology="rack", mode="preferred"))
    assert res.ok and _racks_used(res) == {"r0", "r1"} and res.domain is None


def test_preferred_falls_back_to_the_next_coarser_level() -> None:
    cs = state(racks(4, 1, gpus=4, zones=2), topology=("zone", "rack"))
    # zones: z0 = r0, r2 (6 free); z1 = r1, r3 (8 free). No rack holds 6;
    # both zones do, and z0 is left tightest.
    _fill(cs, "r0n00", 2, 1)
    res = cs.place(req(1, pods=6, topology="rack", mode="preferred"))
    assert res.ok and res.domain == "zone=z0" and _racks_used(res) == {"r0", "r2"}


@pytest.mark.parametrize(
    ("used", "expected"),
    [
        pytest.param({}, "rack=r0", id="tie-by-domain-name"),
        pytest.param({"r0n00": 1}, "rack=r0", id="tightest-left-after-placement"),
        pytest.param({"r1n00": 1}, "rack=r1", id="tightest-other-rack"),
        pytest.param({"r0n00": 8, "r0n01": 5}, "rack=r1", id="full-rack-skipped"),
    ],
)
def test_required_picks_the_tightest_domain(used: dict[str, int], expected: str) -> None:
    cs = state(racks(3, 2), topology=("rack",))
    for k, (node, count) in enumerate(sorted(used.items())):
        _fill(cs, node, count, k + 1)
    res = cs.place(req(2, pods=2, topology="rack"))
    assert res.ok and res.domain == expected


def test_topology_unsatisfiable_when_no_domain_could_ever_hold_it() -> None:
    cs = state(racks(3, 2), topology=("rack",))
    for result in (cs.place(req(1, pods=17, topology="rack")),
                   cs.can_ever_place(req(1, pods=17, topology="rack"))):
        assert result is not None and result.failure is FailureKind.TOPOLOGY_UNSATISFIABLE
        assert result.message == "needs 17 × 1 GPU in one rack; the largest rack holds 16 such pods"
    assert cs.can_ever_place(req(1, pods=17, topology="rack", mode="preferred")) is None


def test_level_outside_pool_topology_is_a_label_like_any_other() -> None:
    node_list = nodes(("a", 4, {"row": "x"}), ("b", 4, {"row": "y"}), ("c", 4))
    cs = state(node_list, topology=("rack",))
    res = cs.place(req(1, pods=3, topology="row"))
    assert res.ok and {p.node for p in res.pods} == {"a"}
    missing = cs.place(req(1, topology="hall"))
    assert missing.failure is FailureKind.TOPOLOGY_UNSATISFIABLE
    assert cs.domains("row") == ("x", "y") and cs.domains("hall") == ()


def test_domain_argument_restricts_the_search() -> None:
    cs = state(racks(3, 1, gpus=4), topology=("rack",))
    res = cs.place(req(1, pods=2), domain=("rack", "r2"))
    assert res.ok and _racks_used(res) == {"r2"}
    res = cs.place(req(1, pods=2, topology="rack"), domain=("rack", "r1"))
    assert res.ok and res.domain == "rack=r1"
    res = cs.place(req(1, pods=5), domain=("rack", "r1"))
    assert res.failure is FailureKind.NO_NODE_FITS  # permanent within that domain
