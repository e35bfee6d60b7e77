"""A victim search that failed is not repeated, in the same cycle and state,
for a workload of the same shape (engine/admission.py, the failed-search
memo). Shape includes where the workload may go: two workloads that differ
only in their node selector, GPU type or topology find different victims, and
one's failure says nothing about the other's."""

from __future__ import annotations

from dataclasses import replace

from tests.engine.harness import World


def _two_racks(**kw: object) -> World:
    """Rack r1 holds team o's reserved work; rack r2 is lent to team e's
    elastic work out of team t's idle reservation."""
    w = World().pool(racks={"r1": 1, "r2": 1}, gpus=8, **kw)
    w.team("t", main=8).team("o", main=8).team("e")
    w.submit("o-res", "o", 8, wclass="reserved", running=True)
    for i in range(8):
        w.submit(f"e{i}", "e", 1, running=True)
    assert {p.node for n in w.running("e") for p in w.w(n).placement} == {"main-r2-n0"}
    return w


def test_reserved_work_with_a_selector_takes_back_its_idle_reservation() -> None:
    """t's reserved job pinned to r1 cannot preempt (r1 runs reserved work
    only) and waits; its twin pinned to r2, same team, priority and size,
    submitted next in the same cycle, preempts e's borrowed GPUs there."""
    w = _two_racks()
    w.submit("on-r1", "t", 4, wclass="reserved", node_selector={"rack": "r1"})
    w.submit("on-r2", "t", 4, wclass="reserved", node_selector={"rack": "r2"})
    w.settle()
    assert w.status("on-r2") == "Running"
    assert {p.node for p in w.w("on-r2").placement} == {"main-r2-n0"}
    assert len(w.preempted("e")) == 4
    assert w.status("on-r1") == "Queued" and w.code("on-r1") == "WAITING_FOR_CAPACITY"
    assert w.status("o-res") == "Running"


def test_reserved_work_of_another_gpu_type_takes_back_its_idle_reservation() -> None:
    """The same with GPU types in place of the selector: r1's node is an a100,
    r2's an h100."""
    w = World().pool(racks={"r1": 1, "r2": 1}, gpus=8)
    w.nodes = [replace(n, gpu_type="a100" if "r1" in n.name else "h100") for n in w.nodes]
    w.team("t", main=8).team("o", main=8).team("e")
    w.submit("o-res", "o", 8, wclass="reserved", gpu_type="a100", running=True)
    for i in range(8):
        w.submit(f"e{i}", "e", 1, gpu_type="h100", running=True)
    w.submit("a100", "t", 4, wclass="reserved", gpu_type="a100")
    w.submit("h100", "t", 4, wclass="reserved", gpu_type="h100")
    w.settle()
    assert w.status("h100") == "Running"
    assert len(w.preempted("e")) == 4
    assert w.status("a100") == "Queued"


def test_reserved_gang_without_topology_takes_back_its_idle_reservation() -> None:
    """The same with topology: two racks of one 4-GPU node, each half o's
    reserved work and half e's borrowed elastic work. t's gang of 2 x 2 GPUs
    tied to one rack cannot free a whole rack and waits; its untied twin
    takes e's four GPUs, one pod on each rack."""
    w = World().pool(racks={"r1": 1, "r2": 1}, gpus=4, topology=("zone", "rack"))
    w.team("t", main=4).team("o", main=4).team("e")
    for rack in ("r1", "r2"):
        w.submit(f"o-{rack}", "o", 2, wclass="reserved", node_selector={"rack": rack},
                 running=True)
    for i in range(4):
        w.submit(f"e{i}", "e", 1, running=True)
    w.submit("tied", "t", 2, pods=2, wclass="reserved",
             topology={"level": "rack", "mode": "required"})
    w.submit("untied", "t", 2, pods=2, wclass="reserved")
    w.settle()
    assert w.status("untied") == "Running"
    assert sorted(p.node for p in w.w("untied").placement) == ["main-r1-n0", "main-r2-n0"]
    assert w.preempted("e") == ["e0", "e1", "e2", "e3"]
    assert w.status("tied") == "Queued"
