"""apportion's own placement on the replay: the two packings of a pool, through
``ClusterState``. Everything that touches the engine's API is in this module.

* GPU pods: one ``PlacementRequest`` each (charge, whole devices, acceptable GPU
  types, CPU, memory), ``place_and_occupy``.
* The prior: ``ShapeMix.of`` the trace's pods (GPU shapes and CPU-only ones, counted),
  the same knowledge FGD's typical pods are made from.
* CPU-only pods (a sixth of the trace): a request with charge 0 and no whole
  devices, which the placement layer accepts for trace replays (SPEC 1 workloads
  always ask GPUs); the engine chooses their node like any other pod's.
* Memory mode: a share's charge differs per model; one request per distinct charge
  (its models as ``gpu_types``), ``place`` each, keep the tightest (least left on
  the device), ``occupy`` it.
"""

from __future__ import annotations

from collections.abc import Sequence

from fgd.replay import Placer
from fgd.trace import MILLI, NodeRow, PodRow, charge

POLICIES = ("apportion", "apportion-best-fit")


def apportion_placer(policy: str, nodes: Sequence[NodeRow], names: Sequence[str],
                     workload: Sequence[PodRow], mode: str) -> Placer:
    """A placer on a fresh ``ClusterState``: ``names`` are the node names the engine
    sees (its ties go by name, so they carry the seeded rank like the simulator's),
    ``workload`` is the trace's pods, given as the prior shape mix."""
    from apportion.domain.cluster import Node, Packing, Pool
    from apportion.engine.placement import (
        ClusterState,
        PlacementRequest,
        PodShape,
        ShapeMix,
    )

    packing = Packing.FRAGMENTATION if policy == "apportion" else Packing.BEST_FIT
    pool = Pool(name="openb", packing=packing)
    objs = [Node(name=names[i], pool="openb", gpus=r.gpus, gpu_type=r.model,
                 cpu_milli=r.cpu_milli, memory_mib=r.memory_mib) for i, r in enumerate(nodes)]
    models = sorted({r.model for r in nodes})
    index = {names[i]: i for i in range(len(nodes))}
    memo: dict[tuple[int, int, str], list[tuple[int, tuple[str, ...]]]] = {}

    def groups(pod: PodRow) -> list[tuple[int, tuple[str, ...]]]:
        key = (pod.num_gpu, pod.gpu_milli, pod.gpu_spec)
        got = memo.get(key)
        if got is None:
            got = memo[key] = charge_groups(pod)
        return got

    def charge_groups(pod: PodRow) -> list[tuple[int, tuple[str, ...]]]:
        """(charge per device, models) per distinct charge on the allowed models;
        models () = any when one charge holds on all of them."""
        allowed = [m for m in models if not pod.allowed or m in pod.allowed]
        by: dict[int, list[str]] = {}
        for m in allowed:
            by.setdefault(charge(pod, m, mode), []).append(m)
        if len(by) == 1 and len(allowed) == len(models):
            return [(next(iter(by)), ())]
        return [(c, tuple(ms)) for c, ms in sorted(by.items())]

    def request_shape(pod: PodRow, c: int) -> tuple[int, int]:
        """(charge, whole devices) of the engine's request (0, 0 for CPU-only)."""
        whole = pod.num_gpu if c >= MILLI else 0
        return (MILLI if whole else c), whole

    def shapes(pod: PodRow) -> list[PodShape]:
        out = []
        for c, types in (groups(pod) if pod.num_gpu else [(0, ())]):
            ch, whole = request_shape(pod, c)
            out.append(PodShape(charge=ch, whole_devices=whole, cpu_milli=pod.cpu_milli,
                                memory_mib=pod.memory_mib, gpu_types=types))
        return out

    mix = ShapeMix.of([s for p in workload for s in shapes(p)])
    hosts: dict[int, tuple[int, int]] = {0: (0, 0)}  # non-empty: the engine keeps this dict
    state = ClusterState(pool, objs, hosts=hosts, mix=mix)
    counter = [0]

    def place(pod: PodRow) -> tuple[int, list[int], int] | None:
        counter[0] += 1
        owner = (counter[0], 0, 0)
        hosts[counter[0]] = (pod.cpu_milli, pod.memory_mib)
        options = groups(pod) if pod.num_gpu else [(0, ())]
        best = None
        for c, types in options:
            ch, whole = request_shape(pod, c)
            req = PlacementRequest(pods=1, min_pods=1, charge=ch, whole_devices=whole,
                                   gpu_types=types, cpu_milli=pod.cpu_milli,
                                   memory_mib=pod.memory_mib, owner=owner)
            if len(options) == 1:
                res = state.place_and_occupy(req)
                if not res.ok:
                    return None
                p = res.pods[0]
                return (index[p.node], [d.index for d in p.devices],
                        p.devices[0].milli if p.devices else 0)
            res = state.place(req)
            if res.ok:
                p = res.pods[0]
                dev = p.devices[0]
                key = (MILLI - state.device_used(p.node, dev.index) - dev.milli, p.node)
                if best is None or key < best[0]:
                    best = (key, res.pods)
        if best is None:
            return None
        state.occupy(owner, best[1])
        p = best[1][0]
        return index[p.node], [d.index for d in p.devices], p.devices[0].milli

    return place
