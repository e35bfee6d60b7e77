"""apportion's own placement on the replay: the two packings of a pool, through
``ClusterState``. Everything that touches the engine's API is in this module."""

from __future__ import annotations

from collections.abc import Sequence

from fgd.replay import Placer
from fgd.trace import MILLI, NodeRow, PodRow, charge

POLICIES = ("apportion", "apportion-best-fit")


def unavailable() -> str | None:
    """Why apportion's policies cannot run here (None when they can)."""
    try:
        from apportion.domain.cluster import Packing  # noqa: F401
        from apportion.engine.placement import PodShape, ShapeMix  # noqa: F401
    except ImportError as e:
        return f"the engine's interface is not there yet ({e})"
    return None


def apportion_placer(policy: str, nodes: Sequence[NodeRow], names: Sequence[str],
                     workload: Sequence[PodRow], mode: str) -> Placer:
    """A placer on a fresh ``ClusterState``: ``names`` are the node names the engine
    sees (its ties go by name, so they carry the seeded rank like the simulator's),
    ``workload`` is the trace's pods, given as the prior shape mix (what FGD's
    typical pods are made from)."""
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

    def groups(pod: PodRow) -> list[tuple[int, tuple[str, ...]]]:
        """(charge per device, models) for each distinct charge on the allowed models;
        models () = any when the charge is the same on all of them."""
        allowed = [m for m in models if not pod.allowed or m in pod.allowed]
        by: dict[int, list[str]] = {}
        for m in allowed:
            by.setdefault(charge(pod, m, mode), []).append(m)
        if len(by) == 1 and len(allowed) == len(models):
            return [(next(iter(by)), ())]
        return [(c, tuple(ms)) for c, ms in sorted(by.items())]

    def shape(pod: PodRow) -> list[PodShape]:
        out = []
        for c, types in groups(pod):
            whole = pod.num_gpu if c >= MILLI else 0
            out.append(PodShape(charge=c if not whole else MILLI, whole_devices=whole,
                                cpu_milli=pod.cpu_milli, memory_mib=pod.memory_mib,
                                gpu_types=types))
        return out

    mix = ShapeMix.of([s for p in workload for s in shape(p)])
    state = ClusterState(pool, objs, mix=mix)
    counter = [0]

    def place(pod: PodRow) -> tuple[int, list[int], int] | None:
        counter[0] += 1
        owner = (counter[0], 0, 0)
        best = None
        options = groups(pod)
        for c, types in options:
            whole = pod.num_gpu if c >= MILLI else 0
            req = PlacementRequest(pods=1, min_pods=1, charge=MILLI * whole if whole else c,
                                   whole_devices=whole, gpu_types=types,
                                   cpu_milli=pod.cpu_milli, memory_mib=pod.memory_mib,
                                   owner=owner)
            if len(options) == 1:
                res = state.place_and_occupy(req)
                if not res.ok:
                    return None
                p = res.pods[0]
                return index[p.node], [d.index for d in p.devices], p.devices[0].milli \
                    if p.devices else 0
            res = state.place(req)
            if res.ok:
                p = res.pods[0]
                dev = p.devices[0]
                left = MILLI - state.device_used(p.node, dev.index) - dev.milli
                key = (left, p.node)
                if best is None or key < best[0]:
                    best = (key, res.pods)
        if best is None:
            return None
        state.occupy(owner, best[1])
        p = best[1][0]
        return index[p.node], [d.index for d in p.devices], p.devices[0].milli

    return place
