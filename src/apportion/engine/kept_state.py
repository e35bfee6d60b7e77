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
from apportion.engine.plan import DecisionKind, Plan
from apportion.engine.snapshot import CycleConfig, Snapshot
from apportion.engine.working_state import WorkingState


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
        #: The last cycle's checkpoint and the states it started, when its
        #: changes were left in place for the next snapshot to confirm.
        self._pending: tuple[tuple[int, dict[str, int]], dict[int, WorkloadState]] | None = None
        self.rebuilds = 0
        self.updates = 0
        self.kept = 0  # cycles whose changes the next snapshot confirmed

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
        plan: Plan | None = None
        try:
            plan = _Cycle(snapshot, config, ws).run()
            return plan
        finally:
            started = _started(plan, ws) if plan is not None else None
            if started:
                self._pending = (token, started)  # the next snapshot decides
            else:
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
            self._pending = None
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
        kept = self._settle(self._ws, new, gone, came)
        if kept:
            gone = [i for i in gone if i not in kept]
            came = [i for i in came if i not in kept]
        self._update(self._ws, snapshot, new, gone, came, kept)
        self._ws.set_mixes(new, [*gone, *came, *kept])
        return self._ws

    def _settle(
        self, ws: WorkingState, new: dict[int, WorkloadState], gone: list[int], came: list[int]
    ) -> set[int]:
        """Keep or take back the last cycle's changes, which were left in place.

        They are kept when the new snapshot shows every workload the cycle
        started placed exactly there (its plan was applied, and the cycle
        decided nothing but routes, moves, starts and waits): the state is then
        already what unloading and loading those workloads would make it.
        Returns the ids of those started workloads (their devices and usage
        are in place); otherwise everything is rolled back as usual.
        """
        pending, self._pending = self._pending, None
        if pending is None:
            return set()
        token, started = pending
        if not all(_placed_as(w, new.get(i)) for i, w in started.items()):
            ws.end_cycle(token, self._loaded)
            return set()
        kept = set(started)
        ws.keep_cycle(token, new, kept | set(gone) | set(came))
        self.kept += 1
        return kept

    def _track_waiting(
        self, new: Mapping[int, WorkloadState], gone: list[int], came: list[int],
        kept: set[int],
    ) -> None:
        """Keep the ids of the loaded waiting workloads current."""
        waiting = self._waiting
        for i in gone:
            waiting.discard(i)
        for i in came:
            if new[i].status.is_waiting:
                waiting.add(i)
        waiting.difference_update(kept)

    def _update(
        self, ws: WorkingState, snapshot: Snapshot, new: dict[int, WorkloadState],
        gone: list[int], came: list[int], kept: set[int],
    ) -> None:
        """Unload what changed or left, then load what changed or arrived (in
        that order, so a device handed from one workload to another never looks
        doubly used). ``gone`` and ``came`` are sorted ids; ``kept`` workloads
        started in the last cycle and are in place: only their victim entry
        and demand follow their new state."""
        old = self._loaded
        self._track_waiting(new, gone, came, kept)
        for i in sorted(kept):
            ws.refresh_placed(new[i])
        exiting = set(snapshot.exiting)
        _settle_routed(ws, new, set(came) | kept)
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


def _settle_routed(ws: WorkingState, new: Mapping[int, WorkloadState], skip: set[int]) -> None:
    """Workloads the last cycle routed had their demand counted provisionally:
    load their state again (unchanged, so still Pending: no demand), or drop
    it when they left; ``skip`` holds those loaded by the caller anyway."""
    for wid in sorted(ws.take_provisional()):
        if wid in skip:
            continue
        if wid in new:
            ws.load(new[wid])
        else:
            ws.set_demand(wid, None, None)


def _started(plan: Plan, ws: WorkingState) -> dict[int, WorkloadState] | None:
    """The states a cycle started (by id) when it decided nothing but routes,
    moves, starts and waits; None when it decided anything else or started
    nothing."""
    started: dict[int, WorkloadState] = {}
    for d in plan.decisions:
        if d.kind is DecisionKind.START:
            started[d.workload_id] = ws.workloads[d.workload_id]
        elif d.kind not in _KEEPABLE:
            return None
    return started or None


_KEEPABLE = frozenset({DecisionKind.ROUTE, DecisionKind.MOVE, DecisionKind.WAIT})


def _placed_as(started: WorkloadState, now: WorkloadState | None) -> bool:
    """Is ``now`` the started state as applied (Starting or Running, same attempt,
    pool and devices)?"""
    return (
        now is not None and now.status.is_placed and now.spec is started.spec
        and now.attempt == started.attempt and now.pool == started.pool
        and not now.nomination
        and (now.placement is started.placement or now.placement == started.placement)
    )


def _exit_key(ex: Exiting) -> tuple[int, int, int]:
    return (ex.workload_id, ex.attempt, ex.part)
