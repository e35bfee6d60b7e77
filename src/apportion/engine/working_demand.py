"""The demand side of the working state (SPEC 4): what each workload asks
of a pool, kept in one :class:`DemandBook` per pool, and the entitlements
computed from it. A part of :class:`~apportion.engine.working_state.WorkingState`.
"""

from __future__ import annotations

from apportion.domain.lifecycle import WorkloadState
from apportion.domain.org import OrgTree
from apportion.engine.fairshare.demand import DemandBook
from apportion.engine.fairshare.types import DemandItem, Entitlements
from apportion.engine.pool_state import PoolState


class WorkingDemand:
    """Demand books, entitlements and the "could never fit" memo."""

    tree: OrgTree
    workloads: dict[int, WorkloadState]
    pools: dict[str, PoolState]
    _books: dict[str, DemandBook]
    _demand: dict[int, tuple[str, DemandItem]]
    _demand_version: dict[str, int]
    _shares: dict[str, tuple[int, int, Entitlements]]
    _provisional: set[int]
    _never: dict[tuple[int, str], bool]

    def set_demand(self, wid: int, ps: PoolState | None, item: DemandItem | None) -> None:
        """Make ``item`` (in ``ps``) the demand counted for workload ``wid``.

        The demand books change, and their version moves, only when the item
        really differs, so unchanged demand keeps its computed fair shares.
        """
        old = self._demand.get(wid)
        new = (ps.pool.name, item) if ps is not None and item is not None else None
        if old == new:
            return
        if old is not None:
            self._books[old[0]].remove(old[1])
            self._demand_version[old[0]] += 1
            del self._demand[wid]
        if new is not None:
            self._books[new[0]].add(new[1])
            self._demand_version[new[0]] += 1
            self._demand[wid] = new

    def take_provisional(self) -> set[int]:
        """Workloads whose demand was counted because this cycle routed them."""
        got, self._provisional = self._provisional, set()
        return got

    # -- fair shares ---------------------------------------------------------
    def compute_entitlements(self, routed: dict[int, str]) -> None:
        """Entitlements per pool from current demand (SPEC 4).

        The demand of the snapshot's workloads is kept per pool in a
        :class:`DemandBook`, updated as workloads are loaded and unloaded.
        ``routed`` maps Pending workloads chosen a pool this cycle to it: their
        demand is counted from now on (provisionally: a kept state settles it
        against the next snapshot, see :meth:`take_provisional`); other Pending
        work is counted in no pool. A pool whose demand and capacity did not
        change since the last computation keeps its shares.
        """
        for wid, pool in sorted(routed.items()):
            ps = self.pools.get(pool)
            if ps is not None:
                self.set_demand(wid, ps, self._demand_item(ps, self.workloads[wid]))
                self._provisional.add(wid)
        for name, ps in self.pools.items():
            key = (self._demand_version[name], ps.capacity)
            cached = self._shares.get(name)
            if cached is None or cached[:2] != key:
                cached = (*key, self._books[name].entitlements(ps.capacity))
                self._shares[name] = cached
            ps.set_entitlements(cached[2])

    def _demand_item(self, ps: PoolState, w: WorkloadState) -> DemandItem | None:
        milli = self.demand_milli(ps, w)
        if not milli:
            return None
        return DemandItem(w.team, w.spec.is_reserved, w.spec.priority, milli,
                          w.submitted_at, w.id)

    def demand_milli(self, ps: PoolState, w: WorkloadState) -> int:
        """A workload's demand in a pool (SPEC 4); 0 if it could never run there."""
        if w.status.is_placed:
            return w.placed_milli
        if w.nomination and not w.is_hold:
            return w.nominated_milli
        charge = ps.charge(w)
        size = (w.spec.min_pods if w.spec.min_pods < w.spec.pods else w.spec.pods) * charge
        if self.never_fits(ps, w):
            return 0
        return size

    def never_fits(self, ps: PoolState, w: WorkloadState) -> bool:
        """Could ``w`` never run in this pool (too big for it, its buckets or a cap)?"""
        key = (w.id, ps.pool.name)
        cached = self._never.get(key)
        if cached is None:
            cached = self._never[key] = self._never_fits(ps, w)
        return cached

    def _never_fits(self, ps: PoolState, w: WorkloadState) -> bool:
        min_size = w.spec.min_pods * ps.charge(w)
        if w.team not in self.tree.teams or not self.tree.is_leaf(w.team):
            return True
        if w.spec.is_reserved and min_size > ps.ledger.path_reservation(w.team):
            return True
        smallest = ps.ledger.smallest_cap(w.team)
        if smallest is not None and min_size > smallest.cap:
            return True
        return ps.can_ever_place(w) is not None
