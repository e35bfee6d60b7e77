"""The pod shapes each fragmentation-packed pool runs and is asked to run
(SPEC 5: running and waiting work, plus a prior), kept up to date workload by
workload.

A live workload counts its pods under its shape in the pool it is placed,
nominated or queued in, or pinned to; a pending one not routed yet counts in
every such pool (it may go to any). A kept working state updates only the
workloads whose state changed, so a cycle does not walk the whole snapshot to
know the mix.

The prior is the pool's ``typical_pods`` when it sets them, else
(:func:`node_prior`) one pod that takes a whole node, for each GPU count among
the pool's nodes: the work a pool can always be asked to run.
Without it the mix knows only the shapes seen so far, and a pool running one
4-GPU job would put a half GPU on an empty 8-GPU node (FGD's measure sees
the half GPU strand less there) and leave no node free for the 8-GPU job that
comes next. Counted once, it weighs little beside a busy pool's own work.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from apportion.domain.cluster import Node, Packing, Pool
from apportion.domain.lifecycle import WorkloadState
from apportion.engine.placement import PodShape, ShapeMix
from apportion.engine.placement.shapes import FULL

#: One workload's part: (pool name, shape, pods) per pool it counts in.
Part = tuple[tuple[str, PodShape, int], ...]


def node_prior(nodes: Iterable[Node]) -> tuple[tuple[PodShape, int], ...]:
    """One pod taking a whole node, for each GPU count among ``nodes``."""
    sizes = sorted({n.gpus for n in nodes if n.gpus > 0})
    return tuple((PodShape(FULL, gpus), 1) for gpus in sizes)


def pool_prior(pool: Pool, nodes: Iterable[Node]) -> tuple[tuple[PodShape, int], ...]:
    """The pool's configured ``typical_pods``, or :func:`node_prior` when it sets none."""
    if pool.typical_pods is None:
        return node_prior(nodes)
    return tuple((PodShape(min(t.milli, FULL), t.milli // FULL if t.milli >= FULL else 0,
                           t.cpu_milli, t.memory_mib), t.count) for t in pool.typical_pods)


class PoolMixes:
    """Shape counts per pool, with each workload's part so it can be taken back."""

    def __init__(self, pools: Mapping[str, Pool], workloads: Iterable[WorkloadState],
                 priors: Mapping[str, tuple[tuple[PodShape, int], ...]] | None = None) -> None:
        self._packed = sorted((p for p in pools.values() if p.packing is Packing.FRAGMENTATION),
                              key=lambda p: p.name)
        self._counts: dict[str, dict[PodShape, int]] = {p.name: {} for p in self._packed}
        self._priors = {p.name: (priors or {}).get(p.name, ()) for p in self._packed}
        self._parts: dict[int, tuple[WorkloadState, Part]] = {}
        self._mixes: dict[str, ShapeMix] = {}
        self._dirty: set[str] = set(self._counts)
        for w in workloads:
            self.set(w.id, w)

    def _part(self, w: WorkloadState) -> Part:
        if w.status.is_terminal or not self._packed:
            return ()
        name = w.pool or w.spec.pool
        spec = w.spec
        return tuple(
            (pool.name, PodShape(spec.charge(pool.gpu_memory_mib), spec.request.whole_devices,
                                 spec.cpu_milli, spec.memory_mib, spec.gpu_types), spec.pods)
            for pool in self._packed if name is None or pool.name == name
        )

    def set(self, wid: int, w: WorkloadState | None) -> None:
        """Workload ``wid`` is now ``w`` (None: it left)."""
        old = self._parts.get(wid)
        if old is not None and old[0] is w:
            return
        part = () if w is None else self._part(w)
        if w is not None and old is not None and old[1] == part:
            self._parts[wid] = (w, part)
            return
        for name, shape, pods in old[1] if old is not None else ():
            counts = self._counts[name]
            counts[shape] -= pods
            if not counts[shape]:
                del counts[shape]
            self._dirty.add(name)
        for name, shape, pods in part:
            counts = self._counts[name]
            counts[shape] = counts.get(shape, 0) + pods
            self._dirty.add(name)
        if w is None:
            self._parts.pop(wid, None)
        else:
            self._parts[wid] = (w, part)

    def mixes(self) -> dict[str, ShapeMix]:
        """The mix of each fragmentation-packed pool (rebuilt where counts changed)."""
        for name in self._dirty:
            self._mixes[name] = ShapeMix.of([*self._counts[name].items(),
                                             *self._priors[name]])
        self._dirty.clear()
        return self._mixes
