"""The cycle's working state: the snapshot plus every decision taken so far.

Per pool it keeps a :class:`Ledger` (usage, buckets, caps) and a
:class:`ClusterState` (devices). ``checkpoint``/``rollback`` undo trial changes
in both, so the preemption planner can apply victims, check a fit and back out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from math import lcm
from typing import TYPE_CHECKING

from apportion.domain.cluster import Pool
from apportion.domain.lifecycle import Exiting, Status, WorkloadState
from apportion.domain.org import OrgTree
from apportion.domain.workload import Placement
from apportion.engine.fairshare.demand import DemandBook, DemandItem, Entitlements
from apportion.engine.fairshare.fill import index_pool
from apportion.engine.placement import ClusterState, Owner, PlacementRequest
from apportion.engine.preemption.index import (
    NOMINATION,
    RUNNING,
    STARTING,
    PodVictim,
    VictimIndex,
    split_pods,
)
from apportion.engine.snapshot import Snapshot
from apportion.engine.usage_ledger import Ledger

if TYPE_CHECKING:
    from apportion.domain.reasons import Reason
    from apportion.domain.workload import WorkloadSpec
    from apportion.engine.placement import PlacementResult


def owner_of(w: WorkloadState) -> Owner:
    """The book's owner of ``w``'s claim, or of its first ``min_pods`` pods (all
    of them unless it scales elastically); of the one pod of a PodVictim."""
    if isinstance(w, PodVictim):
        return (w.id, w.attempt, w.pod + 1)
    return (w.id, w.attempt, 0)


def parts_of(w: WorkloadState, placement: Placement | None = None) -> list[tuple[Owner, Placement]]:
    """``w``'s placed pods as the book holds them: an elastically scaled
    workload's pods beyond ``min_pods`` each under an owner of its own (part
    = pod index + 1), so a shrink (SPEC 6.5) can take exactly them."""
    if placement is None:
        placement = w.placement
    spec = w.spec
    base = (w.id, w.attempt, 0)
    if spec.min_pods >= spec.pods or len(placement) <= spec.min_pods:
        return [(base, placement)]
    out: list[tuple[Owner, Placement]] = [(base, placement[:spec.min_pods])]
    out += [((w.id, w.attempt, i + 1), (placement[i],))
            for i in range(spec.min_pods, len(placement))]
    return out


def freed_by(
    ps: PoolState, v: WorkloadState, taken: Mapping[int, set[int]]
) -> tuple[list[Owner], int]:
    """The owners, and the milli, that taking candidate ``v`` frees now, with
    the pods in ``taken`` (id -> pod indices) already taken as shrinks: a
    pod frees itself; a whole workload everything it still holds."""
    if isinstance(v, PodVictim):
        return [owner_of(v)], v.placement[0].milli
    full = ps.victims.milli.get(v.id)
    if full is None:
        full = v.placed_milli if v.status.is_placed else v.nominated_milli
    owners = [owner_of(v)]
    done = taken.get(v.id, ())
    for i in split_pods(v):
        if i in done:
            full -= v.placement[i].milli
        else:
            owners.append((v.id, v.attempt, i + 1))
    return owners, full


def owners_of(w: WorkloadState) -> list[Owner]:
    """Every owner of placed ``w``'s pods (see :func:`parts_of`)."""
    base = (w.id, w.attempt, 0)
    return [base, *((w.id, w.attempt, i + 1) for i in split_pods(w))]


def exit_owner(ex: Exiting) -> Owner:
    """The book's owner of an exiting victim's devices."""
    return (ex.workload_id, ex.attempt, ex.part)


@dataclass(slots=True)
class PoolState:
    """One pool's working state."""

    pool: Pool
    ledger: Ledger
    cluster: ClusterState
    capacity: int
    entitlements: Entitlements | None = None
    scale: int = 1
    scaled: dict[str, int] = field(default_factory=dict)
    #: Workload ids whose usage is counted here (placed or nominated), by id.
    users: dict[int, int] = field(default_factory=dict)
    #: Candidate victims (elastic placed work, nominations, holds), sorted.
    victims: VictimIndex = field(default_factory=VictimIndex)
    #: Workloads holding a starvation hold here (claims that are not usage).
    holders: set[int] = field(default_factory=set)
    #: The same ids by leaf team, for victim searches that look at a few teams.
    team_users: dict[str, set[int]] = field(default_factory=dict)
    node_labels: dict[str, Mapping[str, str]] = field(default_factory=dict)
    schedulable: frozenset[str] = frozenset()
    #: Requests made so far, by workload id: the spec and attempt they were
    #: made for, and the requests (immutable, so shared) by pods asked.
    requests: dict[int, tuple[WorkloadSpec, int, dict[int | None, PlacementRequest]]] = field(
        default_factory=dict
    )
    #: Memo of explain.never_reason (it depends on the spec, the tree and the
    #: nodes only, none of which change for one PoolState): id -> (spec, reason).
    never: dict[int, tuple[WorkloadSpec, Reason | None]] = field(default_factory=dict)
    #: Memo of :meth:`can_ever_place` by request shape (the nodes never change
    #: for one PoolState, and the answer depends on nothing else).
    ever: dict[tuple[object, ...], PlacementResult | None] = field(default_factory=dict)

    def charge(self, w: WorkloadState) -> int:
        return w.spec.charge(self.pool.gpu_memory_mib)

    def request(self, w: WorkloadState, pods: int | None = None) -> PlacementRequest:
        """The placement request of ``w`` here, optionally with fewer pods."""
        known = self.requests.get(w.id)
        if known is None or known[0] is not w.spec or known[1] != w.attempt:
            known = self.requests[w.id] = (w.spec, w.attempt, {})
        req = known[2].get(pods)
        if req is None:
            req = known[2][pods] = self._request(w, pods)
        return req

    def can_ever_place(self, w: WorkloadState) -> PlacementResult | None:
        """Could an empty pool hold ``w``'s min_pods (None) or why not (kept)."""
        req = self.request(w, w.spec.min_pods)
        shape = (req.pods, req.min_pods, req.charge, req.whole_devices, req.topology,
                 tuple(sorted(req.node_selector.items())), req.gpu_type)
        if shape not in self.ever:
            self.ever[shape] = self.cluster.can_ever_place(req)
        return self.ever[shape]

    def forget(self, wid: int) -> None:
        """Drop what is kept for workload ``wid`` (it left)."""
        self.requests.pop(wid, None)
        self.never.pop(wid, None)

    def _request(self, w: WorkloadState, pods: int | None) -> PlacementRequest:
        req = PlacementRequest.for_spec(w.spec, self.pool.gpu_memory_mib, owner_of(w))
        if pods is None or pods == req.pods:
            return req
        return PlacementRequest(
            pods=pods,
            min_pods=min(req.min_pods, pods),
            charge=req.charge,
            whole_devices=req.whole_devices,
            topology=req.topology,
            node_selector=req.node_selector,
            gpu_type=req.gpu_type,
            owner=req.owner,
        )

    def entitlement(self, team: str) -> Fraction:
        return self.entitlements.of(team) if self.entitlements is not None else Fraction(0)

    def set_entitlements(self, ents: Entitlements) -> None:
        """Keep the exact shares, and the same shares as integers over one common
        denominator, so the hot comparisons (excess, deficit) stay exact without
        building a Fraction each time."""
        if self.entitlements is ents:
            return
        self.entitlements = ents
        if ents.scale:  # computed with the shares (a plain dict, read only)
            self.scale = ents.scale
            self.scaled = ents.scaled if isinstance(ents.scaled, dict) else dict(ents.scaled)
            return
        scale = 1
        for value in ents.by_team.values():
            scale = lcm(scale, value.denominator)
        self.scale = scale
        self.scaled = {t: v.numerator * (scale // v.denominator) for t, v in ents.by_team.items()}

    def excess_key(self, team: str) -> int:
        """``excess(team) x scale``: exact, an int, ordered like the excess."""
        return self.ledger.usage_by_team[team] * self.scale - self.scaled.get(team, 0)

    def deficit_key(self, team: str) -> int:
        """``deficit(team) x scale``."""
        return -self.excess_key(team)

    def size_key(self, w: WorkloadState) -> int:
        """W's size (pods x per-pod charge, SPEC 1) x scale, for 6.2's order."""
        return w.spec.pods * self.charge(w) * self.scale

    def excess(self, team: str) -> Fraction:
        return self.ledger.usage(team) - self.entitlement(team)

    def deficit(self, team: str) -> Fraction:
        return self.entitlement(team) - self.ledger.usage(team)


class WorkingState:
    """Snapshot + decisions of this cycle, with undoable trial changes."""

    #: Ids of the snapshot's waiting (Pending, Queued) workloads, sorted; None
    #: until :meth:`waiting` needs them (or a kept state hands them over).
    _waiting_ids: list[int] | None = None

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.tree: OrgTree = snapshot.tree
        self.workloads: dict[int, WorkloadState] = {w.id: w for w in snapshot.workloads}
        self.pools: dict[str, PoolState] = {}
        for name in sorted(snapshot.pools):
            nodes = snapshot.pool_nodes(name)
            cluster = ClusterState(snapshot.pools[name], nodes)
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

    def load(self, w: WorkloadState) -> None:
        """Count a snapshot workload's devices, usage, victim entry and demand."""
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
