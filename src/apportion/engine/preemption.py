"""Preemption (SPEC 6.4-6.6): who may be a victim, cheapest order, minimal set.

A search works on the cycle's :class:`WorkingState` inside a checkpoint: it
removes candidates one at a time (greedy, cheapest first, skipping those that
fail the 6.4 test at that moment) until the preemptor fits, prunes the set in
one reverse pass, and rolls everything back. The caller commits the result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from apportion.domain.lifecycle import Status, WorkloadState
from apportion.domain.workload import Placement, TopologyMode
from apportion.engine.placement import PlacementRequest, PlacementResult
from apportion.engine.working import PoolState, WorkingState, owner_of

NOMINATION, STARTING, RUNNING = 0, 1, 2


@dataclass(frozen=True, slots=True)
class VictimSet:
    """A chosen set (ids in the order they were chosen) and where W then goes.

    ``cost`` orders sets: Running milli, Starting milli, highest victim
    priority, number of victims, domain name (SPEC 6.5).
    """

    victims: tuple[int, ...]
    placement: Placement
    domain: str | None
    cost: tuple[int, int, int, int, str]


def state_rank(v: WorkloadState) -> int:
    if v.status is Status.RUNNING:
        return RUNNING
    if v.status is Status.STARTING:
        return STARTING
    return NOMINATION


def outranks(w: WorkloadState, v: WorkloadState) -> bool:
    """May ``w`` take ``v``'s nomination or hold? (reserved over elastic, else priority)."""
    if w.spec.is_reserved != v.spec.is_reserved:
        return w.spec.is_reserved
    return w.spec.priority > v.spec.priority


def lca_children(ws: WorkingState, a: str, b: str) -> tuple[str, str]:
    """The children of the lowest common ancestor on the paths to ``a`` and ``b``.

    Top-level teams are children of a virtual root. ``a != b`` and both leaves.
    """
    pa = ws.tree.path(a)[::-1]
    pb = ws.tree.path(b)[::-1]
    i = 0
    while i < len(pa) and i < len(pb) and pa[i] == pb[i]:
        i += 1
    return pa[min(i, len(pa) - 1)], pb[min(i, len(pb) - 1)]


class VictimSearch:
    """Victim search for workload ``w`` in one pool.

    ``for_hold`` searches the placement a starvation hold should wait for: any
    placed workload may be "waited for", no 6.4 test, no quota.
    """

    def __init__(
        self, ws: WorkingState, ps: PoolState, w: WorkloadState, *, for_hold: bool = False
    ) -> None:
        self.ws, self.ps, self.w, self.for_hold = ws, ps, w, for_hold
        spec = w.spec
        self.pods = spec.min_pods if spec.min_pods < spec.pods else spec.pods
        self.req: PlacementRequest = ps.request(w, self.pods)
        self.need = self.pods * ps.charge(w)
        self.examined = 0
        self._lca: dict[str, tuple[str, str]] = {}

    # -- candidates ------------------------------------------------------------
    def candidates(self) -> list[WorkloadState]:
        """Everything 6.4 may allow (the dynamic cross-team test comes later)."""
        w = self.w
        out: list[WorkloadState] = []
        for v in self.ws.workloads.values():
            if v.id == w.id or v.pool != self.ps.pool.name or v.status.is_terminal:
                continue
            if v.status.is_placed:
                if self.for_hold or self._may_displace(v):
                    out.append(v)
            elif (
                v.status is Status.QUEUED and v.nomination and not self.for_hold
                and outranks(w, v)
            ):
                out.append(v)
        return out

    def _may_displace(self, v: WorkloadState) -> bool:
        if v.spec.is_reserved:
            return False
        if self.w.spec.is_reserved or v.team != self.w.team:
            return True
        return v.spec.priority < self.w.spec.priority

    def passes(self, v: WorkloadState) -> bool:
        """SPEC 6.4's test for ``v`` in the working state at this moment."""
        w = self.w
        if self.for_hold or w.spec.is_reserved or v.team == w.team:
            return True
        if v.spec.is_reserved:  # a reserved nomination, taken by rank alone
            return True
        c_w, c_v = self._lca_children(v.team)
        before = self.ps.excess(c_v)
        return before > 0 and self.ps.excess(c_w) < before

    def _lca_children(self, team: str) -> tuple[str, str]:
        pair = self._lca.get(team)
        if pair is None:
            pair = self._lca[team] = lca_children(self.ws, self.w.team, team)
        return pair

    # -- trial changes -----------------------------------------------------------
    def remove(self, v: WorkloadState) -> int:
        """Take ``v`` out of the working state (undoable); returns milli freed."""
        cluster = self.ps.cluster
        if v.status.is_placed:
            self.ws.uncount(self.ps, v)
            cluster.vacate(owner_of(v))
            return v.placed_milli
        self.ws.uncount(self.ps, v)
        cluster.unclaim(owner_of(v))
        return v.nominated_milli

    def restore(self, v: WorkloadState) -> None:
        cluster = self.ps.cluster
        if v.status.is_placed:
            cluster.occupy(owner_of(v), v.placement)
            self.ws.count(self.ps, v, v.placed_milli)
        else:
            cluster.claim(owner_of(v), v.nomination)
            if not v.is_hold:
                self.ws.count(self.ps, v, v.nominated_milli)

    def quota_ok(self) -> bool:
        """Quota with W counted and the current victims removed (SPEC 6 step 3.1)."""
        if self.for_hold:
            return True
        led, team = self.ps.ledger, self.w.team
        if self.w.spec.is_reserved and not led.reserved_fits(team, 0):
            return False
        return led.cap_breach(team, 0) is None

    def fit(self, domain: tuple[str, str] | None, free: int) -> PlacementResult | None:
        if free < self.need or not self.quota_ok():
            return None
        self.examined += 1
        res = self.ps.cluster.place(self.req, domain=domain, allow_exiting=True)
        return res if res.ok else None

    # -- the search --------------------------------------------------------------
    def run(self) -> VictimSet | None:
        """Cheapest victim set over the candidate domains, or None."""
        cands = self.candidates()
        topo = self.w.spec.topology
        domains: list[tuple[str, str] | None] = [None]
        if topo is not None and topo.mode is TopologyMode.REQUIRED:
            domains = [(topo.level, d) for d in self.ps.cluster.domains(topo.level)]
        best: VictimSet | None = None
        for dom in domains:
            pool_cands = cands if dom is None else [
                v for v in cands if self._touches(v, dom)
            ]
            found = self._search(pool_cands, dom)
            if found is not None and (best is None or found.cost < best.cost):
                best = found
        return best

    def _touches(self, v: WorkloadState, dom: tuple[str, str]) -> bool:
        labels = self.ps.node_labels
        pods = v.placement if v.status.is_placed else v.nomination
        return any(labels.get(p.node, {}).get(dom[0]) == dom[1] for p in pods)

    def _search(
        self, cands: list[WorkloadState], dom: tuple[str, str] | None
    ) -> VictimSet | None:
        ws = self.ws
        start = ws.checkpoint()
        if not self.for_hold:
            ws.count(self.ps, self.w, self.need)
        base = ws.checkpoint()
        free = self.ps.cluster.free_milli(owner_of(self.w), allow_exiting=True)
        chosen, free = self._greedy(cands, dom, free)
        if chosen is None:
            ws.rollback(start)
            ws.release(start)
            return None
        chosen = self._prune(chosen, dom, free, base)
        ws.rollback(base)
        for v in chosen:
            self.remove(v)
        res = self.ps.cluster.place(self.req, domain=dom, allow_exiting=True)
        ws.rollback(start)
        ws.release(start)
        if not res.ok:  # pragma: no cover - the prune pass keeps a fitting set
            return None
        return VictimSet(
            tuple(v.id for v in chosen), res.pods, res.domain,
            self._cost(chosen, "" if dom is None else dom[1]),
        )

    def _greedy(
        self, cands: list[WorkloadState], dom: tuple[str, str] | None, free: int
    ) -> tuple[list[WorkloadState] | None, int]:
        groups: dict[tuple[int, str], list[WorkloadState]] = {}
        for v in cands:
            groups.setdefault((state_rank(v), v.team), []).append(v)
        for queue in groups.values():  # popped from the end: cheapest last
            queue.sort(key=lambda v: (v.spec.priority, -(v.started_at or 0), v.id), reverse=True)
        chosen: list[WorkloadState] = []
        while self.fit(dom, free) is None:
            pick = self._pick(groups)
            if pick is None:
                return None, free
            free += self.remove(pick)
            chosen.append(pick)
        return chosen, free

    def _pick(self, groups: dict[tuple[int, str], list[WorkloadState]]) -> WorkloadState | None:
        """The first candidate, in 6.5's order, that passes 6.4 right now."""
        heads: list[tuple[tuple[int, int, int, Fraction, int, int], tuple[int, str]]] = []
        for key, queue in groups.items():
            if not queue:
                continue
            v = queue[-1]
            ex = self.ps.excess(v.team)
            order = (key[0], 0 if ex > 0 else 1, v.spec.priority, -ex, -(v.started_at or 0), v.id)
            heads.append((order, key))
        heads.sort()
        for _order, key in heads:
            self.examined += 1
            v = groups[key][-1]
            # The 6.4 test depends on the team only: if the head fails, so does the rest.
            if self.passes(v):
                return groups[key].pop()
        return None

    def _prune(
        self, chosen: list[WorkloadState], dom: tuple[str, str] | None, free: int,
        base: tuple[int, dict[str, int]],
    ) -> list[WorkloadState]:
        """One reverse pass: drop a victim if W still fits and every test holds."""
        needs_order = not (self.for_hold or self.w.spec.is_reserved) and any(
            v.team != self.w.team for v in chosen
        )
        kept = list(chosen)
        for v in reversed(chosen):
            milli = v.placed_milli if v.status.is_placed else v.nominated_milli
            if needs_order:
                trial = [c for c in kept if c is not v]
                if self._valid(trial, dom, base):
                    kept = trial
                continue
            self.restore(v)
            if self.fit(dom, free - milli) is not None:
                kept.remove(v)
                free -= milli
            else:
                self.remove(v)
        return kept

    def _valid(
        self, trial: list[WorkloadState], dom: tuple[str, str] | None,
        base: tuple[int, dict[str, int]],
    ) -> bool:
        self.ws.rollback(base)
        free = self.ps.cluster.free_milli(owner_of(self.w), allow_exiting=True)
        for v in trial:
            if not self.passes(v):
                return False
            free += self.remove(v)
        return self.fit(dom, free) is not None

    def _cost(self, chosen: list[WorkloadState], domain: str) -> tuple[int, int, int, int, str]:
        running = sum(v.placed_milli for v in chosen if v.status is Status.RUNNING)
        starting = sum(v.placed_milli for v in chosen if v.status is Status.STARTING)
        top = max((v.spec.priority for v in chosen), default=-1)
        return (running, starting, top, len(chosen), domain)


def search_victims(
    ws: WorkingState, ps: PoolState, w: WorkloadState, *, for_hold: bool = False,
    counter: Callable[[int], None] | None = None,
) -> VictimSet | None:
    """Run a :class:`VictimSearch`; ``counter`` receives the work done."""
    search = VictimSearch(ws, ps, w, for_hold=for_hold)
    result = search.run()
    if counter is not None:
        counter(search.examined)
    return result
