"""Host CPU and memory in placement (SPEC 1 and 5): a pod fits a node only if
the node's free GPUs, CPU and memory all hold it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from apportion.domain.cluster import Node, Pool
from apportion.domain.workload import DeviceShare, PodPlacement
from apportion.engine.placement import ClusterState, FailureKind, PlacementRequest

GIB = 1024


def node(name: str, gpus: int = 8, cpu: int | None = None, mem: int | None = None,
         gpu_type: str | None = None, labels: dict[str, str] | None = None) -> Node:
    return Node(name, "p", gpus, cpu_milli=None if cpu is None else cpu * 1000,
                memory_mib=mem, gpu_type=gpu_type, labels=labels or {})


def req(gpus: float = 1, pods: int = 1, *, cpu: float = 0, mem: int = 0,
        min_pods: int | None = None, types: tuple[str, ...] = (),
        owner: tuple[int, int, int] = (1, 0, 0)) -> PlacementRequest:
    whole = int(gpus) if gpus >= 1 else 0
    return PlacementRequest(pods=pods, min_pods=pods if min_pods is None else min_pods,
                            charge=round(gpus * 1000), whole_devices=whole,
                            cpu_milli=round(cpu * 1000), memory_mib=mem, gpu_types=types,
                            owner=owner)


def nodes_of(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [p.node for p in result.pods]


def test_a_node_whose_cpu_is_used_up_strands_its_gpus() -> None:
    cs = ClusterState(Pool("p"), [node("a", cpu=16), node("b", cpu=64)])
    placed = []
    for i in range(10):
        res = cs.place_and_occupy(req(1, cpu=8, owner=(i + 1, 0, 0)))
        assert res.ok, res.message
        placed.append(res.pods[0].node)
    # best fit would put everything on a; its CPU holds two pods, so the rest go to b
    assert placed.count("a") == 2 and placed.count("b") == 8
    res = cs.place(req(1, cpu=8, owner=(99, 0, 0)))
    assert res.failure is FailureKind.HOST_RESOURCES
    assert res.message == ("needs 8 CPUs per pod; the 1 node with 1 GPU free has at most "
                           "0 CPU free")
    # the GPUs of a are free: a pod asking no CPU still goes there
    assert nodes_of(cs.place(req(1, owner=(98, 0, 0)))) == ["a"]


def test_a_gang_counts_cpu_on_every_node() -> None:
    cs = ClusterState(Pool("p"), [node("a", cpu=32), node("b", cpu=32)])
    res = cs.place(req(2, pods=4, cpu=16))
    assert res.ok and sorted(nodes_of(res)) == ["a", "a", "b", "b"]
    assert cs.place(req(2, pods=5, cpu=16)).failure is FailureKind.NO_NODE_FITS  # never
    cs = ClusterState(Pool("p"), [node("a", cpu=48), node("b", cpu=48)], hosts={9: (16000, 0)})
    cs.occupy((9, 0, 0), (PodPlacement("b", (DeviceShare(0, 1000),)),))
    assert cs.place(req(2, pods=5, cpu=16)).ok
    res = cs.place(req(2, pods=6, cpu=16))
    assert res.failure is FailureKind.HOST_RESOURCES
    assert res.message == ("needs 6 × 2 GPUs with 16 CPUs per pod; the GPUs are free but "
                           "only 5 pods fit with the CPU and memory free")
    # memory binds the same way
    cs = ClusterState(Pool("p"), [node("a", mem=64 * GIB), node("b", mem=100 * GIB)])
    res = cs.place(req(1, pods=3, mem=64 * GIB))
    assert res.failure is FailureKind.NO_NODE_FITS
    assert res.message == ("needs 3 × 1 GPU with 64 GiB of memory per pod; the pool holds at "
                           "most 2 such pods (capacity 16 GPUs)")
    res = cs.place(req(1, pods=3, mem=48 * GIB))
    assert sorted(nodes_of(res)) == ["a", "b", "b"]


def test_a_pod_larger_than_any_nodes_cpu_can_never_run() -> None:
    cs = ClusterState(Pool("p"), [node("a", gpus=2, cpu=8), node("b", gpus=8, cpu=96)])
    res = cs.place(req(4, cpu=128))
    assert res.failure is FailureKind.NO_NODE_FITS
    assert res.message == "needs 128 CPUs per pod; the largest node with 4 GPUs has 96 CPUs"
    assert cs.can_ever_place(req(4, cpu=96)) is None
    never = cs.can_ever_place(req(1, mem=2 * GIB))
    assert never is None  # memory is not stated: not limited
    # the pool is too small for the gang once CPU counts: b holds 3 pods of 32 CPUs
    assert cs.can_ever_place(req(1, pods=4, cpu=32)) is not None
    assert cs.can_ever_place(req(1, pods=3, cpu=32)) is None


def test_a_pod_may_run_on_any_of_its_gpu_types() -> None:
    cs = ClusterState(Pool("p"), [node("a", gpus=2, gpu_type="t4"),
                                  node("b", gpus=4, gpu_type="v100m16"),
                                  node("c", gpus=4, gpu_type="v100m32")])
    res = cs.place(req(4, pods=2, types=("v100m16", "v100m32")))
    assert sorted(nodes_of(res)) == ["b", "c"]
    res = cs.place(req(1, types=("a100", "h100")))
    assert res.failure is FailureKind.NO_NODE_FITS
    assert res.message == "no node matches gpu_type=a100|h100"
    assert cs.place(req(4, pods=3, types=("v100m16", "v100m32"))).failure is not None


def test_shared_pods_skip_a_tight_device_whose_node_has_no_cpu_left() -> None:
    cs = ClusterState(Pool("p"), [node("a", gpus=1, cpu=4), node("b", gpus=2, cpu=64)])
    cs.occupy((1, 0, 0), (PodPlacement("a", (DeviceShare(0, 500),)),), )
    cs.hosts = {1: (4000, 0)}  # what the snapshot says pod 1 asks
    cs.vacate((1, 0, 0))
    cs.occupy((1, 0, 0), (PodPlacement("a", (DeviceShare(0, 500),)),))
    # best fit is a's half-used device, but a's CPU is gone: b opens a device
    res = cs.place(req(0.5, cpu=1, owner=(2, 0, 0)))
    assert [(p.node, p.devices[0].index) for p in res.pods] == [("b", 0)]
    # without a CPU request the shared device still wins
    assert nodes_of(cs.place(req(0.5, owner=(3, 0, 0)))) == ["a"]


def test_claims_and_exiting_victims_hold_cpu_like_devices() -> None:
    cs = ClusterState(Pool("p"), [node("a", gpus=8, cpu=16)], hosts={1: (12000, 0),
                                                                     2: (12000, 0)})
    pods = (PodPlacement("a", (DeviceShare(0, 1000),)),)
    cs.occupy((1, 0, 0), pods)
    assert cs.place(req(1, cpu=8, owner=(3, 0, 0))).failure is FailureKind.HOST_RESOURCES
    cs.mark_exiting((1, 0, 0))
    assert not cs.fits(req(1, cpu=8, owner=(3, 0, 0)))
    assert cs.fits(req(1, cpu=8, owner=(3, 0, 0)), allow_exiting=True)
    # a nomination claims the CPU its victim frees: others cannot take it
    cs.claim((2, 0, 0), (PodPlacement("a", (DeviceShare(1, 1000),)),))
    assert not cs.can_start_on_claim((2, 0, 0))  # the victim still holds 12 CPUs
    assert not cs.fits(req(1, cpu=8, owner=(3, 0, 0)), allow_exiting=True)
    assert cs.fits(req(1, cpu=4, owner=(3, 0, 0)), allow_exiting=True)
    cs.vacate((1, 0, 0))
    assert cs.can_start_on_claim((2, 0, 0))
    cs.unclaim((2, 0, 0))
    assert cs.fits(req(1, cpu=16, owner=(3, 0, 0)))


def test_a_rollback_restores_cpu_and_memory() -> None:
    cs = ClusterState(Pool("p"), [node("a", cpu=16, mem=64 * GIB)])
    token = cs.checkpoint()
    assert cs.place_and_occupy(req(1, pods=2, cpu=8, mem=32 * GIB)).ok
    assert not cs.fits(req(1, cpu=1, owner=(2, 0, 0)))
    cs.rollback(token)
    assert cs.fits(req(1, pods=2, cpu=8, mem=32 * GIB, owner=(2, 0, 0)))
    assert not cs.fits(req(1, pods=3, cpu=8, owner=(2, 0, 0)))


def test_a_fit_probe_counts_the_cpu_a_victim_frees() -> None:
    cs = ClusterState(Pool("p"), [node("a", cpu=16), node("b", cpu=16)],
                      hosts={1: (16000, 0), 2: (8000, 0)})
    cs.occupy((1, 0, 0), (PodPlacement("a", (DeviceShare(0, 1000),)),))
    cs.occupy((2, 0, 0), (PodPlacement("b", (DeviceShare(0, 1000),)),))
    probe = cs.probe(req(1, pods=2, cpu=8, owner=(3, 0, 0)))
    assert not probe.fits()  # a has no CPU left, b has room for one
    probe.take_out((2, 0, 0))
    assert probe.fits()
    probe.put_back((2, 0, 0))
    assert not probe.fits()
    probe.take_out((1, 0, 0))
    assert probe.fits()


def test_a_fit_probe_counts_the_memory_a_victim_frees() -> None:
    """The memory twin of the CPU probe above: node a's memory is all used, b
    has room for one 32-GiB pod; two are wanted."""
    cs = ClusterState(Pool("p"), [node("a", mem=64 * GIB), node("b", mem=64 * GIB)],
                      hosts={1: (0, 64 * GIB), 2: (0, 32 * GIB)})
    cs.occupy((1, 0, 0), (PodPlacement("a", (DeviceShare(0, 1000),)),))
    cs.occupy((2, 0, 0), (PodPlacement("b", (DeviceShare(0, 1000),)),))
    probe = cs.probe(req(1, pods=2, mem=32 * GIB, owner=(3, 0, 0)))
    assert not probe.fits()
    probe.take_out((2, 0, 0))
    assert probe.fits()  # b: 64 GiB free, two pods
    probe.put_back((2, 0, 0))
    assert not probe.fits()
    probe.take_out((1, 0, 0))
    assert probe.fits()  # a: 64 GiB free


def test_a_fit_probe_frees_the_gpus_of_a_victim_that_asked_for_no_cpu() -> None:
    """A CPU-limited node whose GPUs are all held by work that requests no
    CPU: taking that work out makes room for a pod that asks for CPU."""
    cs = ClusterState(Pool("p"), [node("a", gpus=2, cpu=16)])
    cs.occupy((1, 0, 0), (PodPlacement("a", (DeviceShare(0, 1000), DeviceShare(1, 1000))),))
    probe = cs.probe(req(2, cpu=8, owner=(3, 0, 0)))
    assert not probe.fits()
    probe.take_out((1, 0, 0))
    assert probe.fits()


@pytest.mark.parametrize("cpu", [None, 4])
def test_unlimited_nodes_ignore_cpu_requests(cpu: int | None) -> None:
    cs = ClusterState(Pool("p"), [replace(node("a"), cpu_milli=None if cpu is None else 4000)])
    fits = cs.fits(req(1, pods=8, cpu=1))
    assert fits is (cpu is None)


def test_a_pod_without_gpus_goes_where_it_strands_the_fewest_gpus() -> None:
    # the placement layer takes CPU-only pods for trace replays (docs/placement.md)
    cs = ClusterState(Pool("p", packing="best_fit"),
                      [node("a", gpus=8, cpu=64), node("b", gpus=2, cpu=64),
                       node("c", gpus=1, cpu=4)])
    cpu_only = PlacementRequest(pods=1, min_pods=1, charge=0, cpu_milli=8000, owner=(5, 0, 0))
    res = cs.place_and_occupy(cpu_only)
    assert res.ok and res.pods[0].node == "b" and res.pods[0].devices == ()
    assert cs.fits(replace(cpu_only, pods=15, min_pods=15, owner=(6, 0, 0)))  # 8 + 7 + 0
    assert not cs.fits(replace(cpu_only, pods=16, min_pods=16, owner=(6, 0, 0)))
    big = replace(cpu_only, cpu_milli=100_000, owner=(7, 0, 0))
    assert cs.place(big).failure is FailureKind.NO_NODE_FITS


def test_a_pod_without_gpus_that_waits_says_how_many_fit() -> None:
    cs = ClusterState(Pool("p"), [node("a", gpus=2, cpu=32)], hosts={9: (8000, 0)})
    cs.occupy((9, 0, 0), (PodPlacement("a", ()),))
    cpu_only = PlacementRequest(pods=4, min_pods=4, charge=0, cpu_milli=8000, owner=(5, 0, 0))
    res = cs.place(cpu_only)
    assert res.failure is FailureKind.HOST_RESOURCES
    assert res.message == "needs 8 CPUs per pod; 3 pods fit now"
    cs.occupy((9, 0, 1), (PodPlacement("a", ()),) * 2)  # two more 8-CPU pods
    assert cs.place(cpu_only).message == "needs 8 CPUs per pod; 1 pod fit now"


def test_the_memory_message_of_one_node() -> None:
    cs = ClusterState(Pool("p"), [node("a", gpus=2, mem=64 * GIB)], hosts={9: (0, 48 * GIB)})
    cs.occupy((9, 0, 0), (PodPlacement("a", (DeviceShare(0, 1000),)),))
    res = cs.place(req(1, mem=32 * GIB))
    assert res.failure is FailureKind.HOST_RESOURCES
    assert res.message == ("needs 32 GiB of memory per pod; the 1 node with 1 GPU free has "
                           "at most 16 GiB free")


def test_the_memory_message_of_two_nodes() -> None:
    cs = ClusterState(Pool("p"), [node("a", gpus=2, mem=64 * GIB), node("b", gpus=2, mem=64 * GIB)],
                      hosts={9: (0, 48 * GIB)})
    cs.occupy((9, 0, 0), (PodPlacement("a", (DeviceShare(0, 1000),)),))
    cs.occupy((9, 0, 1), (PodPlacement("b", (DeviceShare(0, 1000),)),))
    res = cs.place(req(1, mem=32 * GIB))
    assert res.failure is FailureKind.HOST_RESOURCES
    assert res.message == ("needs 32 GiB of memory per pod; the 2 nodes with 1 GPU free have "
                           "at most 16 GiB free")


def test_shared_pods_on_a_node_with_cpu_limits_count_whole_pods_per_device() -> None:
    """Two 0.75-GPU pods and a node whose devices have 0.5 and 1 GPU free:
    only one pod fits (a pod takes part of one device), CPU to spare."""
    cs = ClusterState(Pool("p"), [node("a", gpus=2, cpu=8)])
    cs.occupy((9, 0, 0), (PodPlacement("a", (DeviceShare(0, 500),)),))
    res = cs.place(req(0.75, pods=2, cpu=1))
    assert res.failure is FailureKind.FRAGMENTED
    assert res.message == ("needs 2 × 0.75 GPU; 1.5 GPUs free but at most 1 on any device; "
                           "1 of 2 pods fit")


def test_a_fit_probe_counts_whole_devices_on_a_cpu_limited_node() -> None:
    """A 4-GPU pod on a node with 1 free GPU and CPU to spare: taking out
    two 1-GPU owners frees 3 GPUs, not enough; the 5-GPU one makes room."""
    cs = ClusterState(Pool("p"), [node("a", gpus=8, cpu=64)],
                      hosts={1: (1000, 0), 2: (1000, 0), 3: (1000, 0)})
    cs.occupy((1, 0, 0), (PodPlacement("a", tuple(DeviceShare(i, 1000) for i in range(5))),))
    cs.occupy((2, 0, 0), (PodPlacement("a", (DeviceShare(5, 1000),)),))
    cs.occupy((3, 0, 0), (PodPlacement("a", (DeviceShare(6, 1000),)),))
    probe = cs.probe(req(4, cpu=1, owner=(9, 0, 0)))
    assert not probe.fits()
    probe.take_out((2, 0, 0))
    assert not probe.fits()  # 2 GPUs free
    probe.take_out((3, 0, 0))
    assert not probe.fits()  # 3 GPUs free
    probe.put_back((3, 0, 0))
    probe.take_out((1, 0, 0))
    assert probe.fits()  # 7 GPUs free


def test_a_fit_probe_counts_only_the_nodes_its_request_may_use() -> None:
    """Freeing a t4 node does not make room for a pod that asks for a v100,
    nor freeing a node outside its node selector."""
    cs = ClusterState(Pool("p"), [node("a", gpus=4, gpu_type="t4", labels={"rack": "r1"}),
                                  node("b", gpus=4, gpu_type="v100", labels={"rack": "r1"}),
                                  node("c", gpus=4, gpu_type="v100", labels={"rack": "r2"})])
    for k, name in enumerate("abc", 1):
        cs.occupy((k, 0, 0), (PodPlacement(name, tuple(DeviceShare(i, 1000) for i in range(4))),))
    typed = cs.probe(req(4, types=("v100",), owner=(9, 0, 0)))
    typed.take_out((1, 0, 0))
    assert not typed.fits()
    typed.take_out((2, 0, 0))
    assert typed.fits()
    selected = cs.probe(replace(req(4, owner=(9, 0, 0)), node_selector={"rack": "r2"}))
    selected.take_out((2, 0, 0))
    assert not selected.fits()
    selected.take_out((3, 0, 0))
    assert selected.fits()


def test_a_fit_probe_gives_back_the_room_of_an_owner_put_back() -> None:
    """The smallest share sized by memory (1 milli-GPU): a device freed and
    then used again holds none of it."""
    cs = ClusterState(Pool("p"), [node("a", gpus=1)])
    cs.occupy((1, 0, 0), (PodPlacement("a", (DeviceShare(0, 1000),)),))
    probe = cs.probe(PlacementRequest(pods=1, min_pods=1, charge=1, owner=(9, 0, 0)))
    assert not probe.fits()
    probe.take_out((1, 0, 0))
    assert probe.fits()
    probe.put_back((1, 0, 0))
    assert not probe.fits()


def test_exiting_cpu_still_counts_as_leaving_after_a_probe() -> None:
    """A probe looks at the pool with exiting victims gone and then puts
    everything back: the victim's CPU is still exiting afterwards, so a pod
    may still be placed on it with ``allow_exiting``."""
    cs = ClusterState(Pool("p"), [node("a", gpus=8, cpu=16)], hosts={1: (12000, 0)})
    cs.occupy((1, 0, 0), (PodPlacement("a", (DeviceShare(0, 1000),)),))
    cs.mark_exiting((1, 0, 0))
    wanted = req(1, cpu=8, owner=(3, 0, 0))
    assert cs.probe(wanted).fits()
    assert not cs.fits(wanted)
    assert cs.fits(wanted, allow_exiting=True)
    assert cs.probe(wanted).fits()


def test_the_smallest_memory_share_with_cpu_is_placed_by_best_fit() -> None:
    """A share sized by memory may be charged 1 milli-GPU (SPEC 1); with a
    CPU request on a CPU-limited node, best fit still places it."""
    cs = ClusterState(Pool("p", packing="best_fit"), [node("a", gpus=1, cpu=16)])
    tiny = PlacementRequest(pods=2, min_pods=2, charge=1, cpu_milli=4000, owner=(1, 0, 0))
    res = cs.place_and_occupy(tiny)
    assert res.ok
    assert [(p.node, [(d.index, d.milli) for d in p.devices]) for p in res.pods] == [
        ("a", [(0, 1)]), ("a", [(0, 1)])]


@pytest.mark.parametrize("resource", ["cpu", "memory"])
def test_a_claim_starts_only_if_the_other_claims_on_its_node_stay_satisfiable(
    resource: str,
) -> None:
    """The host twin of the devices' rule (test_claims_trials.py): a 32-unit
    pod runs on a 64-unit node; W's claim of 32 fits beside it, but a hold of
    16 more on the node (X) would then be short: W does not start until X's
    claim goes."""
    cpu, mem = (64, None) if resource == "cpu" else (None, 64 * GIB)
    unit = 1000 if resource == "cpu" else GIB
    host = {"cpu": lambda n: (n * unit, 0), "memory": lambda n: (0, n * unit)}[resource]
    cs = ClusterState(Pool("p"), [node("a", gpus=4, cpu=cpu, mem=mem)],
                      hosts={5: host(32), 10: host(32), 30: host(16)})
    cs.occupy((5, 0, 0), (PodPlacement("a", (DeviceShare(0, 1000),)),))
    cs.claim((10, 0, 0), (PodPlacement("a", (DeviceShare(1, 1000),)),))
    cs.claim((30, 0, 0), (PodPlacement("a", (DeviceShare(2, 1000),)),))
    assert not cs.can_start_on_claim((10, 0, 0))
    cs.unclaim((30, 0, 0))
    assert cs.can_start_on_claim((10, 0, 0))
