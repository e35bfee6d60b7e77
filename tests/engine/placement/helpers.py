"""Small builders for placement scenarios: nodes, requests, occupancy."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from apportion.domain.cluster import Node, NodeState, Pool
from apportion.domain.workload import DeviceShare, Placement, PodPlacement, Topology, TopologyMode
from apportion.engine.placement import ClusterState, Owner, PlacementRequest, PlacementResult

NodeSpec = tuple[str, int] | tuple[str, int, Mapping[str, str]]


def nodes(*specs: NodeSpec, pool: str = "p", states: Mapping[str, str] | None = None,
          gpu_types: Mapping[str, str] | None = None) -> list[Node]:
    """Nodes from (name, gpus[, labels]); ``states``/``gpu_types`` by node name."""
    out = []
    for spec in specs:
        name, gpus = spec[0], spec[1]
        labels = spec[2] if len(spec) > 2 else {}  # type: ignore[misc]
        out.append(
            Node(name, pool, gpus, labels=labels,
                 state=NodeState((states or {}).get(name, "ready")),
                 gpu_type=(gpu_types or {}).get(name))
        )
    return out


def racks(count: int, per_rack: int, gpus: int = 8, zones: int = 0) -> list[Node]:
    """``count`` racks r0.. of ``per_rack`` nodes named r<k>n<i>; zones z0.. if asked."""
    out = []
    for r in range(count):
        for i in range(per_rack):
            labels = {"rack": f"r{r}"}
            if zones:
                labels["zone"] = f"z{r % zones}"
            out.append(Node(f"r{r}n{i:02d}", "p", gpus, labels=labels))
    return out


def state(node_list: Iterable[Node], topology: tuple[str, ...] = (),
          gpu_type: str | None = None) -> ClusterState:
    return ClusterState(Pool("p", topology=topology, gpu_type=gpu_type), node_list)


def req(gpus: float, pods: int = 1, min_pods: int | None = None, *,
        topology: str | None = None, mode: str = "required", gpu_type: str | None = None,
        selector: Mapping[str, str] | None = None, owner: Owner = (0, 0, 0),
        milli: int | None = None) -> PlacementRequest:
    """A request of ``gpus`` per pod (whole if >= 1), or ``milli`` for a memory share."""
    whole = int(gpus) if gpus >= 1 and milli is None else 0
    charge = milli if milli is not None else round(gpus * 1000)
    return PlacementRequest(
        pods=pods, min_pods=pods if min_pods is None else min_pods, charge=charge,
        whole_devices=whole,
        topology=None if topology is None else Topology(topology, TopologyMode(mode)),
        node_selector=selector or {}, gpu_types=(gpu_type,) if gpu_type else (), owner=owner,
    )


def pods_on(node: str, *shares: tuple[int, int]) -> PodPlacement:
    return PodPlacement(node, tuple(DeviceShare(i, m) for i, m in shares))


def whole(node: str, *indexes: int) -> Placement:
    """One pod holding ``indexes`` of ``node`` whole."""
    return (pods_on(node, *((i, 1000) for i in indexes)),)


def layout(result: PlacementResult) -> list[tuple[str, tuple[int, ...], int]]:
    """(node, device indexes, milli) per pod, for compact expectations."""
    return [(p.node, tuple(d.index for d in p.devices), p.milli) for p in result.pods]


def all_used(cs: ClusterState, node_list: Iterable[Node]) -> dict[tuple[str, int], int]:
    return {(n.name, i): cs.device_used(n.name, i) for n in node_list for i in range(n.gpus)}
