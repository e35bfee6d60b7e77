"""A cycle runner that keeps its working state between cycles.

``run_cycle`` builds devices, ledgers and the victim index from the whole
snapshot every time. When cycles come in quick succession over nearly the same
snapshot (the simulator; a busy server), :class:`CycleCache` keeps that state,
brings it up to date by the workloads whose state object changed (unload the
old, load the new), runs the cycle, and takes the cycle's own changes back with
the undo logs. Plans are the same as ``run_cycle``'s, bit for bit (tested).

The cache is keyed on the identity of the snapshot's tree and node tuple and
on the pools' settings: a new tree or node tuple (a node went down, a
reservation changed), or a changed pool, starts over from scratch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from apportion.domain.lifecycle import Exiting, WorkloadState
from apportion.engine.cycle import _Cycle
from apportion.engine.plan import Plan
from apportion.engine.snapshot import CycleConfig, Snapshot
from apportion.engine.working import WorkingState


class CycleCache:
    """Callable like ``run_cycle``; not thread-safe, one per caller.

    A caller that knows what changed since its previous snapshot (the
    simulator) may call :meth:`run` with the workloads by id and the ids that
    may have changed, so that nothing else is looked at.
    """

    def __init__(self) -> None:
        self._ws: WorkingState | None = None
        self._base: tuple[object, object, object] | None = None
        self._loaded: dict[int, WorkloadState] = {}
        self._waiting: set[int] = set()  # ids of the loaded waiting workloads
        self._exiting: set[Exiting] = set()
        self.rebuilds = 0
        self.updates = 0

    def __call__(self, snapshot: Snapshot, config: CycleConfig) -> Plan:
        return self.run(snapshot, config)

    def run(
        self,
        snapshot: Snapshot,
        config: CycleConfig,
        by_id: Mapping[int, WorkloadState] | None = None,
        changed: Iterable[int] | None = None,
    ) -> Plan:
        """One cycle, as ``run_cycle(snapshot, config)``.

        ``by_id`` maps the ids of ``snapshot.workloads`` to them (it is copied);
        ``changed`` holds every id whose state may differ from the previous
        snapshot's (changed, arrived or left). Both or neither; wrong hints
        give wrong plans.
        """
        ws = self._prepare(snapshot, by_id, changed)
        token = ws.begin_cycle(snapshot, self._loaded, sorted(self._waiting))
        try:
            return _Cycle(snapshot, config, ws).run()
        finally:
            ws.end_cycle(token, self._loaded)

    def _prepare(
        self,
        snapshot: Snapshot,
        by_id: Mapping[int, WorkloadState] | None,
        changed: Iterable[int] | None,
    ) -> WorkingState:
        base = self._base
        if (
            self._ws is None or base is None or base[0] is not snapshot.tree
            or base[1] != dict(snapshot.pools) or base[2] is not snapshot.nodes
        ):
            self._ws = WorkingState(snapshot)
            self._base = (snapshot.tree, dict(snapshot.pools), snapshot.nodes)
            self._loaded = {w.id: w for w in snapshot.workloads}
            self._waiting = {w.id for w in snapshot.workloads if w.status.is_waiting}
            self._exiting = set(snapshot.exiting)
            self.rebuilds += 1
            return self._ws
        old = self._loaded
        if by_id is None or changed is None:
            new = {w.id: w for w in snapshot.workloads}
            came = [i for i, w in new.items() if old.get(i) is not w]
            gone = sorted({i for i in came if i in old} | (old.keys() - new.keys()))
        else:
            new = dict(by_id)
            ids = set(changed)
            came = [i for i in ids if i in new and old.get(i) is not new[i]]
            gone = sorted(i for i in ids if i in old and new.get(i) is not old[i])
        came.sort()
        self._update(self._ws, snapshot, new, gone, came)
        return self._ws

    def _update(
        self, ws: WorkingState, snapshot: Snapshot, new: dict[int, WorkloadState],
        gone: list[int], came: list[int],
    ) -> None:
        """Unload what changed or left, then load what changed or arrived (in
        that order, so a device handed from one workload to another never looks
        doubly used). ``gone`` and ``came`` are sorted ids."""
        old = self._loaded
        waiting = self._waiting
        for i in gone:
            waiting.discard(i)
        for i in came:
            if new[i].status.is_waiting:
                waiting.add(i)
        exiting = set(snapshot.exiting)
        arrived = set(came)
        for wid in sorted(ws.take_provisional()):  # routed last cycle: still so?
            if wid in arrived:
                continue  # its new state is loaded below
            if wid in new:
                ws.load(new[wid])  # unchanged, so still Pending: no demand
            else:
                ws.set_demand(wid, None, None)
        for ex in sorted(self._exiting - exiting, key=_exit_key):
            ws.load_exiting(ex, -1)
        for i in gone:
            ws.unload(old[i], keep_demand=i in new)
            if i not in new:
                ws.forget(i)
        for ex in sorted(exiting - self._exiting, key=_exit_key):
            ws.load_exiting(ex, +1)
        for i in came:
            ws.load(new[i])
        ws.forget_undo()
        self._loaded = new
        self._exiting = exiting
        self.updates += len(gone) + len(came)


def _exit_key(ex: Exiting) -> tuple[int, int]:
    return (ex.workload_id, ex.attempt)
