"""The cycle's working state: the snapshot plus every decision taken so far.

Per pool it keeps a :class:`Ledger` (usage, buckets, caps) and a
:class:`ClusterState` (devices). ``checkpoint``/``rollback`` undo trial changes
in both, so the preemption planner can apply victims, check a fit and back out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from apportion.domain.lifecycle import Exiting, Status, WorkloadState
from apportion.domain.org import OrgTree
from apportion.domain.workload import Placement
from apportion.engine.fairshare.demand import DemandBook, DemandItem, Entitlements
from apportion.engine.fairshare.fill import index_pool
from apportion.engine.owners import exit_owner, owner_of, owners_of, parts_of
from apportion.engine.placement import ClusterState, Owner
from apportion.engine.pool_mixes import PoolMixes, pool_prior
from apportion.engine.pool_state import PoolState
from apportion.engine.preemption.index import (
    NOMINATION,
    RUNNING,
    STARTING,
    VictimIndex,
)
from apportion.engine.snapshot import Snapshot
from apportion.engine.usage_ledger import Ledger
from apportion.engine.working_demand import WorkingDemand

if TYPE_CHECKING:
    pass


class WorkingState(WorkingDemand):
    """Snapshot + decisions of this cycle, with undoable trial changes."""

    #: Ids of the snapshot's waiting (Pending, Queued) workloads, sorted; None
    #: until :meth:`waiting` needs them (or a kept state hands them over).
    _waiting_ids: list[int] | None = None

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.tree: OrgTree = snapshot.tree
        self.workloads: dict[int, WorkloadState] = {w.id: w for w in snapshot.workloads}
        self.pools: dict[str, PoolState] = {}
        #: per-pod host requests by workload id, shared with every pool's devices
        self.hosts: dict[int, tuple[int, int]] = {
            w.id: (w.spec.cpu_milli, w.spec.memory_mib) for w in snapshot.workloads
            if w.spec.cpu_milli or w.spec.memory_mib}
        hosts = self.hosts
        self.mixes = PoolMixes(snapshot.pools, snapshot.workloads, {
            name: pool_prior(pool, snapshot.pool_nodes(name))
            for name, pool in snapshot.pools.items()})
        mixes = self.mixes.mixes()
        for name in sorted(snapshot.pools):
            nodes = snapshot.pool_nodes(name)
            cluster = ClusterState(snapshot.pools[name], nodes, hosts=hosts,
                                   mix=mixes.get(name))
            labels = {n.name: n.labels for n in nodes}
            self.pools[name] = PoolState(
                snapshot.pools[name], Ledger(self.tree, name), cluster, cluster.capacity,
                node_labels=labels,
                schedulable=frozenset(n.name for n in nodes if n.is_schedulable),
                victims=VictimIndex(snapshot.pools[name].topology, labels, snapshot.now),
            )
        self._undo: list[tuple[str, PoolState, int, bool, int]] = []
        self._never: dict[tuple[int, str], bool] = {}
        self._lca: dict[tuple[str, str], tuple[str, str]] = {}
        self._leaves: dict[str, tuple[str, ...]] = {}
        self._touched: set[int] = set()
        self._keep_undo = False
        self._books = {
            name: DemandBook(self.tree, name, index=index_pool(self.tree, name))
            for name in self.pools
        }
        self._demand: dict[int, tuple[str, DemandItem]] = {}
        self._demand_version = dict.fromkeys(self.pools, 0)
        self._shares: dict[str, tuple[int, int, Entitlements]] = {}
        self._provisional: set[int] = set()
        for ex in sorted(snapshot.exiting, key=exit_owner):
            self.load_exiting(ex, +1)
        self._load_all(sorted(snapshot.workloads, key=lambda w: w.id))
        self._undo.clear()

    def lca_children(self, a: str, b: str) -> tuple[str, str]:
        """The children of the lowest common ancestor on the paths to leaves
        ``a`` and ``b`` (``a != b``); top-level teams are children of a
        virtual root. Kept: the tree does not change during a cycle."""
        found = self._lca.get((a, b))
        if found is None:
            pa = self.tree.path(a)[::-1]
            pb = self.tree.path(b)[::-1]
            i = 0
            while i < len(pa) and i < len(pb) and pa[i] == pb[i]:
                i += 1
            found = self._lca[(a, b)] = (pa[min(i, len(pa) - 1)], pb[min(i, len(pb) - 1)])
        return found

    # -- loading (the snapshot's state, outside any cycle) ---------------------
    def load_exiting(self, ex: Exiting, sign: int) -> None:
        """Add (+1) or remove (-1) a preempted attempt's devices still held."""
        ps = self.pools.get(ex.pool)
        if ps is None:
            return
        if sign > 0:
            if (ex.cpu_milli or ex.memory_mib) and ex.workload_id not in self.hosts:
                # a victim no longer in the snapshot (Preempted): its pods keep
                # their CPU and memory until they have exited
                self.hosts[ex.workload_id] = (ex.cpu_milli, ex.memory_mib)
            ps.cluster.occupy_exiting(exit_owner(ex), ex.placement)
        else:
            ps.cluster.vacate(exit_owner(ex))

    def _load_all(self, workloads: list[WorkloadState]) -> None:
        """:meth:`load` for every workload of the snapshot, in bulk: devices
        indexed once, usage summed per team, each victim group sorted once.
        The resulting state is the same as loading them one by one."""
        occupied: dict[str, list[tuple[Owner, Placement]]] = {n: [] for n in self.pools}
        victims: dict[str, list[tuple[WorkloadState, int, int]]] = {n: [] for n in self.pools}
        usage: dict[tuple[str, str, bool], int] = {}
        for w in workloads:
            ps = self.pools.get(w.pool or "")
            if ps is None or w.team not in self.tree.teams:
                self.set_demand(w.id, None, None)
                continue
            name = ps.pool.name
            milli = 0
            if w.status.is_placed:
                occupied[name].extend(parts_of(w))
                milli = w.placed_milli
                if not w.spec.is_reserved:
                    rank = RUNNING if w.status is Status.RUNNING else STARTING
                    victims[name].append((w, rank, milli))
            elif w.status is Status.QUEUED and w.nomination:
                ps.cluster.claim(owner_of(w), w.nomination)
                victims[name].append((w, NOMINATION, w.nominated_milli))
                if w.is_hold:
                    ps.holders.add(w.id)
                else:
                    milli = w.nominated_milli
            if milli:
                key = (name, w.team, w.spec.is_reserved)
                usage[key] = usage.get(key, 0) + milli
                ps.users[w.id] = ps.users.get(w.id, 0) + milli
                ps.team_users.setdefault(w.team, set()).add(w.id)
            self._touched.add(w.id)
            if w.status.is_placed:  # its demand is its placed size (demand_milli)
                item = DemandItem(w.team, w.spec.is_reserved, w.spec.priority, milli,
                                  w.submitted_at, w.id) if milli else None
                self.set_demand(w.id, ps, item)
                continue
            is_demand = w.status is not Status.PENDING and not w.status.is_terminal
            self.set_demand(w.id, ps, self._demand_item(ps, w) if is_demand else None)
        for name, ps in self.pools.items():
            if occupied[name]:
                ps.cluster.occupy_many(occupied[name])
            ps.victims.add_many(victims[name])
        for (name, team, is_reserved), milli in usage.items():
            self.pools[name].ledger.add(team, is_reserved, milli)

    def set_mixes(self, workloads: Mapping[int, WorkloadState], ids: Iterable[int]) -> None:
        """Measure each pool's fragmentation against the pod shapes of the
        snapshot ``workloads`` (by id), of which only ``ids`` may have changed
        (a kept state, before its next cycle: as a fresh state would)."""
        for i in ids:
            self.mixes.set(i, workloads.get(i))
        mixes = self.mixes.mixes()
        for name, ps in self.pools.items():
            ps.cluster.set_mix(mixes.get(name))

    def load(self, w: WorkloadState) -> None:
        """Count a snapshot workload's devices, usage, victim entry and demand."""
        if w.spec.cpu_milli or w.spec.memory_mib:
            self.hosts[w.id] = (w.spec.cpu_milli, w.spec.memory_mib)
        ps = self.pools.get(w.pool or "")
        if ps is None or w.team not in self.tree.teams:
            self.set_demand(w.id, None, None)
            return
        if w.status.is_placed:
            for owner, part in parts_of(w):
                ps.cluster.occupy(owner, part)
            self.count(ps, w, w.placed_milli)
        elif w.status is Status.QUEUED and w.nomination:
            ps.cluster.claim(owner_of(w), w.nomination)
            if w.is_hold:
                ps.holders.add(w.id)
            else:
                self.count(ps, w, w.nominated_milli)
        self.index(ps, w)
        is_demand = w.status is not Status.PENDING and not w.status.is_terminal
        self.set_demand(w.id, ps, self._demand_item(ps, w) if is_demand else None)

    def unload(self, w: WorkloadState, *, keep_demand: bool = False) -> None:
        """Undo :meth:`load` for a workload that left or changed (``keep_demand``:
        it stays, and :meth:`load` of its new state sets its demand)."""
        ps = self.pools.get(w.pool or "")
        if ps is None or w.team not in self.tree.teams:
            return
        if w.status.is_placed:
            for owner in owners_of(w):
                ps.cluster.vacate(owner)
        elif w.status is Status.QUEUED and w.nomination:
            ps.cluster.unclaim(owner_of(w))
            ps.holders.discard(w.id)
        self.uncount(ps, w)
        ps.victims.discard(w.id)
        if not keep_demand:
            self.set_demand(w.id, None, None)

    def forget(self, wid: int) -> None:
        """Drop what is kept about workload ``wid`` (it left the snapshot)."""
        for name, other in self.pools.items():
            other.forget(wid)
            self._never.pop((wid, name), None)

    # -- cycles on a kept state (see engine/kept_state.py) --------------------------
    def begin_cycle(
        self,
        snapshot: Snapshot,
        workloads: Mapping[int, WorkloadState] | None = None,
        waiting: list[int] | None = None,
    ) -> tuple[int, dict[str, int]]:
        """Start a cycle whose changes :meth:`end_cycle` takes back.

        ``workloads`` (the snapshot's workloads by id) and ``waiting`` (the ids
        of its waiting ones, sorted) may be passed by a caller that keeps them.
        """
        self.snapshot = snapshot
        if workloads is None:
            self.workloads = {w.id: w for w in snapshot.workloads}
        else:
            self.workloads = dict(workloads)
        self._waiting_ids = waiting
        self._undo.clear()
        self._touched = set()
        self._keep_undo = True
        return self.checkpoint()

    def end_cycle(
        self, token: tuple[int, dict[str, int]], loaded: dict[int, WorkloadState]
    ) -> None:
        """Roll the state back to the snapshot's (``loaded``: its workloads)."""
        self.rollback(token)
        self.release(token)
        self._undo.clear()
        self._keep_undo = False
        self._reindex_touched(loaded, set())

    def keep_cycle(
        self, token: tuple[int, dict[str, int]], workloads: Mapping[int, WorkloadState],
        skip: set[int],
    ) -> None:
        """Keep the cycle's changes instead of :meth:`end_cycle`: the caller saw
        the next snapshot show them. Candidate-victim and hold entries the cycle
        touched are set again from ``workloads`` (the next snapshot's), except
        for ``skip``, which the caller unloads, loads or refreshes itself."""
        self.release(token)
        self._undo.clear()
        self._keep_undo = False
        self._reindex_touched(workloads, skip)

    def _reindex_touched(self, workloads: Mapping[int, WorkloadState], skip: set[int]) -> None:
        """Set the candidate-victim and hold entries of every workload the
        cycle touched from ``workloads`` (except ``skip``), then forget them."""
        for wid in sorted(self._touched):
            for ps in self.pools.values():
                ps.victims.discard(wid)
                ps.holders.discard(wid)
            w = workloads.get(wid)
            ps_w = self.pools.get(w.pool or "") if w is not None else None
            if wid in skip or w is None or ps_w is None or w.team not in self.tree.teams:
                continue
            if w.status is Status.QUEUED and w.nomination and w.is_hold:
                ps_w.holders.add(wid)
            self.index(ps_w, w)
        self._touched = set()

    def refresh_placed(self, w: WorkloadState) -> None:
        """A kept workload's new state (same devices and usage, see
        :meth:`keep_cycle`): its victim entry and demand."""
        ps = self.pools[w.pool or ""]
        self.index(ps, w)
        self.set_demand(w.id, ps, self._demand_item(ps, w))

    def waiting(self) -> list[WorkloadState]:
        """The snapshot's waiting (Pending or Queued) workloads, by id, as they
        are now in the cycle: every workload a cycle step may act on (starting
        and preempting only take waiting work out of line)."""
        ids = self._waiting_ids
        if ids is None:
            ids = self._waiting_ids = sorted(
                w.id for w in self.snapshot.workloads if w.status.is_waiting
            )
        workloads = self.workloads
        return [workloads[i] for i in ids]

    def set_holder(self, ps: PoolState, wid: int, is_holder: bool) -> None:
        self._touched.add(wid)
        if is_holder:
            ps.holders.add(wid)
        else:
            ps.holders.discard(wid)

    def unindex(self, ps: PoolState, wid: int) -> None:
        self._touched.add(wid)
        ps.victims.discard(wid)

    # -- victim index --------------------------------------------------------
    def index(self, ps: PoolState, w: WorkloadState) -> None:
        """(Re)index ``w`` as a candidate victim in ``ps`` according to its state."""
        self._touched.add(w.id)
        if w.status.is_placed and not w.spec.is_reserved:
            rank = RUNNING if w.status is Status.RUNNING else STARTING
            ps.victims.add(w, rank, w.placed_milli)
        elif w.status is Status.QUEUED and w.nomination:
            ps.victims.add(w, NOMINATION, w.nominated_milli)
        else:
            ps.victims.discard(w.id)

    # -- usage ---------------------------------------------------------------
    def count(self, ps: PoolState, w: WorkloadState, milli: int) -> None:
        """Count ``milli`` of usage for ``w`` in ``ps`` (undoable)."""
        ps.ledger.add(w.team, w.spec.is_reserved, milli)
        ps.users[w.id] = ps.users.get(w.id, 0) + milli
        ps.team_users.setdefault(w.team, set()).add(w.id)
        self._undo.append(("count", ps, w.id, w.spec.is_reserved, milli))

    def uncount(self, ps: PoolState, w: WorkloadState) -> int:
        """Remove all usage of ``w`` in ``ps`` (undoable); returns what was removed."""
        milli = ps.users.pop(w.id, 0)
        ps.team_users.get(w.team, set()).discard(w.id)
        if milli:
            ps.ledger.remove(w.team, w.spec.is_reserved, milli)
            self._undo.append(("uncount", ps, w.id, w.spec.is_reserved, milli))
        return milli

    def uncount_part(self, ps: PoolState, w: WorkloadState, milli: int) -> None:
        """Remove ``milli`` of ``w``'s usage in ``ps`` (the pods a shrink took;
        undoable)."""
        ps.users[w.id] -= milli
        ps.ledger.remove(w.team, w.spec.is_reserved, milli)
        self._undo.append(("uncount", ps, w.id, w.spec.is_reserved, milli))

    def checkpoint(self) -> tuple[int, dict[str, int]]:
        """A token for :meth:`rollback` covering ledgers and clusters."""
        return len(self._undo), {n: ps.cluster.checkpoint() for n, ps in self.pools.items()}

    def rollback(self, token: tuple[int, dict[str, int]]) -> None:
        mark, clusters = token
        while len(self._undo) > mark:
            op, ps, wid, is_reserved, milli = self._undo.pop()
            team = self.workloads[wid].team
            if op == "count":
                ps.ledger.remove(team, is_reserved, milli)
                left = ps.users.get(wid, 0) - milli
                if left:
                    ps.users[wid] = left
                else:
                    ps.users.pop(wid, None)
                    ps.team_users.get(team, set()).discard(wid)
            else:
                ps.ledger.add(team, is_reserved, milli)
                ps.users[wid] = ps.users.get(wid, 0) + milli
                ps.team_users.setdefault(team, set()).add(wid)
        for name, tok in clusters.items():
            self.pools[name].cluster.rollback(tok)

    def release(self, token: tuple[int, dict[str, int]]) -> None:
        """Release a checkpoint after rolling back to it (keeps undo logs short)."""
        for name, tok in token[1].items():
            self.pools[name].cluster.commit_checkpoint(tok)

    def forget_undo(self) -> None:
        """Drop the undo log (between workloads, nothing is rolled back that far),
        unless the whole cycle is to be taken back (a kept state)."""
        if not self._keep_undo:
            self._undo.clear()

    def leaves_under(self, team: str) -> tuple[str, ...]:
        """Leaf teams in ``team``'s subtree (itself if a leaf), cached."""
        got = self._leaves.get(team)
        if got is None:
            kids = self.tree.children(team)
            got = (team,) if not kids else tuple(
                leaf for kid in kids for leaf in self.leaves_under(kid)
            )
            self._leaves[team] = got
        return got

    def placed_in(self, pool: str) -> Iterable[WorkloadState]:
        """Workloads whose usage is counted in ``pool`` right now, by id."""
        ps = self.pools[pool]
        return (self.workloads[i] for i in sorted(ps.users))
