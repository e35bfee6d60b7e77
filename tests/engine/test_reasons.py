"""Every reason code of SPEC section 7, with the numbers in the message."""

from __future__ import annotations

import re

from apportion.domain.cluster import Node
from apportion.domain.lifecycle import Status, transition
from tests.engine.harness import World


def test_reservation_too_small_stays_pending() -> None:
    w = World().pool(nodes=2).team("t", main=8)
    w.submit("big", "t", 1, pods=10, wclass="reserved")
    w.settle()
    assert (w.status("big"), w.code("big")) == ("Pending", "RESERVATION_TOO_SMALL")
    assert "at most 8" in w.w("big").reason.message


def test_topology_unsatisfiable() -> None:
    w = World().pool(racks={"r1": 2, "r2": 2}, topology=("zone", "rack")).team("t")
    w.submit("g", "t", 1, pods=20, topology={"level": "rack", "mode": "required"})
    w.settle()
    assert (w.status("g"), w.code("g")) == ("Pending", "TOPOLOGY_UNSATISFIABLE")


def test_no_eligible_pool_for_type_pod_size_and_zero_cap() -> None:
    w = World().pool(nodes=2).team("t").team("z", limit=0)
    w.submit("typed", "t", 1, gpu_type="h100")
    w.submit("huge", "t", 16)
    w.submit("capped", "z", 1)
    w.submit("pinned", "t", 1, pool="nowhere")
    w.settle()
    for name in ("typed", "huge", "capped", "pinned"):
        assert (w.status(name), w.code(name)) == ("Pending", "NO_ELIGIBLE_POOL"), name
    assert "nowhere" in w.w("pinned").reason.message
    assert w.w("capped").reason.message == (
        "needs 1 GPU; burst cap of team z in pool main is 0: raise its burst limit or reservation")


def test_no_eligible_pool_names_the_burst_cap_a_workload_exceeds() -> None:
    # 50 % over a 2-GPU reservation: a cap of 3 GPUs, and 4 are asked for (SPEC 2, 7)
    w = World().pool(nodes=2).team("c", limit=50, main=2)
    w.submit("over", "c", 4)
    w.settle()
    assert (w.status("over"), w.code("over")) == ("Pending", "NO_ELIGIBLE_POOL")
    assert w.w("over").reason.message == (
        "needs 4 GPUs; burst cap of team c in pool main is 3: raise its burst limit or reservation")


def test_burst_limit_reached_says_the_usage_and_the_cap() -> None:
    # a cap of 3 GPUs (50 % over 2), 2 in use: 2 more would exceed it (SPEC 2, 7)
    w = World().pool(nodes=2).team("c", limit=50, main=2)
    w.submit("first", "c", 2, running=True)
    w.submit("more", "c", 2)
    w.settle()
    assert (w.status("more"), w.code("more")) == ("Queued", "BURST_LIMIT_REACHED")
    assert w.w("more").reason.message == (
        "needs 2 GPUs; team c uses 2 of its burst cap 3 in pool main")


def test_preempting_while_victims_exit() -> None:
    w = World().pool(nodes=1, preemption_grace=30).team("a").team("b", main=8)
    w.submit("borrower", "a", 8, running=True)
    w.submit("owner", "b", 8, wclass="reserved")
    w.settle()
    assert w.status("borrower") == "Preempted"
    assert (w.status("owner"), w.code("owner")) == ("Queued", "PREEMPTING")
    assert w.w("borrower").ended_at == 30
    w.advance(30)
    w.settle()
    assert w.status("owner") == "Running"


def test_reservation_exhausted() -> None:
    w = World().pool(nodes=2).team("t", main=8)
    w.submit("r1", "t", 8, wclass="reserved", running=True)
    w.submit("r2", "t", 4, wclass="reserved")
    w.settle()
    assert w.code("r2") == "RESERVATION_EXHAUSTED"
    assert "0 free" in w.w("r2").reason.message


def test_topology_waiting() -> None:
    w = World().pool(racks={"r1": 1, "r2": 1}).team("t", main=16)
    w.submit("r1fill", "t", 4, wclass="reserved", running=True, node_selector={"rack": "r1"})
    w.submit("r2fill", "t", 4, wclass="reserved", running=True, node_selector={"rack": "r2"})
    w.submit("g", "t", 1, pods=6, wclass="reserved",
             topology={"level": "rack", "mode": "required"})
    w.settle()
    assert (w.status("g"), w.code("g")) == ("Queued", "TOPOLOGY_WAITING")


def test_fragmented() -> None:
    w = World().pool(racks={"r1": 1, "r2": 1}).team("t", main=16)
    w.submit("a", "t", 4, wclass="reserved", running=True, node_selector={"rack": "r1"})
    w.submit("b", "t", 4, wclass="reserved", running=True, node_selector={"rack": "r2"})
    w.submit("whole", "t", 8, wclass="reserved")
    w.settle()
    assert w.code("whole") == "FRAGMENTED"


def test_gang_waiting() -> None:
    w = World().pool(nodes=1).team("t")
    w.submit("a", "t", 3, running=True)
    w.submit("g", "t", 1, pods=8)
    w.settle()
    assert w.code("g") == "GANG_WAITING"
    assert "5" in w.w("g").reason.message


def test_fair_share_after_equal_split() -> None:
    w = World().pool(nodes=1).team("a").team("b")
    for i in range(8):
        w.submit(f"a{i}", "a", running=True)
    for i in range(8):
        w.submit(f"b{i}", "b")
    w.settle()
    assert len(w.running("a")) == 4 and len(w.running("b")) == 4
    assert w.code("b7") == "FAIR_SHARE"


def test_waiting_for_capacity_when_only_reserved_work_holds_it() -> None:
    w = World().pool(nodes=1).team("a", main=8).team("b")
    w.submit("r", "a", 8, wclass="reserved", running=True)
    w.submit("e", "b", 1)
    w.settle()
    assert w.code("e") == "WAITING_FOR_CAPACITY"


def test_queued_goes_back_to_pending_when_pool_can_never_hold_it() -> None:
    w = World().pool(nodes=2).team("t", main=8)
    w.submit("a", "t", 8, wclass="reserved", running=True)
    w.submit("g", "t", 8, pods=2)
    w.settle()
    assert w.status("g") == "Queued"
    w.nodes = [n for n in w.nodes if n.name != "main-n001"] + [
        Node("main-n001", "main", 8, state="down")
    ]
    w.down("main-n001")
    w.settle()
    assert (w.status("g"), w.code("g")) == ("Pending", "NO_ELIGIBLE_POOL")


def test_a_nominee_without_victims_of_its_own_names_whose_devices_it_waits_for() -> None:
    """From trying the system: "waiting for 0 preempted workloads (0 GPUs) to
    exit". r1 preempts b's four jobs (grace 60 s) and is cancelled; r2 then
    fits only on devices b's victims still hold: it has no victims of its
    own, and its reason says whose devices it waits for."""
    w = World().pool(nodes=1, gpus=4, preemption_grace=60).team("a", main=4).team("b")
    for i in range(4):
        w.submit(f"b{i}", "b", 1, running=True)
    w.submit("r1", "a", 4, wclass="reserved")
    w.settle()
    assert sorted(w.preempted()) == ["b0", "b1", "b2", "b3"]
    w.states[w.names["r1"]] = transition(w.w("r1"), Status.CANCELLED, w.now)
    w.submit("r2", "a", 2, wclass="reserved")
    w.settle()
    reason = w.w("r2").reason
    assert reason is not None and reason.code.value == "PREEMPTING"
    assert "0 preempted" not in reason.message
    found = re.search(r"preempted workloads (\d+), (\d+) to be released", reason.message)
    assert found is not None, reason.message
    held = {w.names[n] for n in ("b0", "b1", "b2", "b3")}
    assert {int(found[1]), int(found[2])} <= held
    w.advance(60)
    w.settle()
    assert w.status("r2") == "Running"
