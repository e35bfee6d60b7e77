"""Preemption (SPEC 6.4-6.6): who may be a victim, cheapest order, minimal set.

A search works on the cycle's :class:`WorkingState` inside a checkpoint: it
removes candidates one at a time (greedy, cheapest first, skipping those that
fail the 6.4 test at that moment) until the preemptor fits, prunes the set in
one reverse pass, and rolls everything back. The caller commits the result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from apportion.domain.lifecycle import Status, WorkloadState
from apportion.domain.workload import Placement, TopologyMode, WorkloadClass, WorkloadSpec
from apportion.engine.owners import freed_by, owner_of, parts_of
from apportion.engine.placement import Owner, PlacementRequest
from apportion.engine.placement.fit_probe import FitProbe
from apportion.engine.pool_state import PoolState
from apportion.engine.preemption.bounds import Reach, outranks, reach, viable
from apportion.engine.preemption.greedy import greedy
from apportion.engine.preemption.index import Item, PodVictim, candidate, candidate_key
from apportion.engine.preemption.order import (
    NOMINATION,
    RUNNING,
    STARTING,
    Verdict,
)
from apportion.engine.preemption.prune import prune
from apportion.engine.snapshot import ALL_SHORTCUTS, Shortcuts
from apportion.engine.working_state import WorkingState

RESERVED = WorkloadClass.RESERVED


@dataclass(frozen=True, slots=True)
class VictimSet:
    """A chosen set (ids in the order they were chosen) and where W then goes.

    ``shrinks`` maps a victim that is only shrunk (SPEC 6.5) to the pods
    taken from it, its newest; every other victim is taken whole. ``cost``
    orders sets: Running milli, Starting milli, highest victim priority,
    number of victims, domain name (SPEC 6.5).
    """

    victims: tuple[int, ...]
    placement: Placement
    domain: str | None
    cost: tuple[int, int, int, int, str]
    shrinks: dict[int, tuple[int, ...]] = field(default_factory=dict)


def state_rank(v: WorkloadState) -> int:
    if v.status is Status.RUNNING:
        return RUNNING
    if v.status is Status.STARTING:
        return STARTING
    return NOMINATION


class VictimSearch:
    """Victim search for workload ``w`` in one pool.

    ``for_hold`` searches the placement a starvation hold should wait for: any
    placed workload may be "waited for", no 6.4 test, no quota.
    """

    def __init__(
        self, ws: WorkingState, ps: PoolState, w: WorkloadState, *, for_hold: bool = False,
        shortcuts: Shortcuts = ALL_SHORTCUTS,
    ) -> None:
        self.ws, self.ps, self.w, self.for_hold = ws, ps, w, for_hold
        self.shortcuts = shortcuts
        ps.victims.set_now(ws.snapshot.now)  # 6.5's work lost is read now
        spec = w.spec
        self.pods = spec.min_pods if spec.min_pods < spec.pods else spec.pods
        self.req: PlacementRequest = ps.request(w, self.pods)
        self.need = self.pods * ps.charge(w)
        self.examined = 0
        self._lca: dict[str, tuple[str, str]] = {}
        self._reachable: Reach | None = None
        self._verdicts: dict[str, Verdict] = {}  # by c_V; cleared on every change
        #: The device side of a search: removals kept off the book (see _search).
        self._probe: FitProbe | None = None
        self._always_passes = for_hold or spec.is_reserved
        #: excess(c_V) when its verdict last came out "not now" (see _block).
        self._thresholds: dict[str, int] = {}
        self._own = spec.team
        #: SPEC 6.4 (rev 3), same team: with W added and the victims removed,
        #: usage(team) x scale may not exceed this (max(entitlement, usage
        #: before)); None when the rule does not apply (reserved W, holds).
        self._own_limit: int | None = None
        if not self._always_passes:
            scaled_usage = ps.ledger.usage_by_team[self._own] * ps.scale
            self._own_limit = max(ps.scaled.get(self._own, 0), scaled_usage)
        #: Usage moved on the ledger during a search, by (team, is reserved).
        self._moved: dict[tuple[str, bool], int] = {}
        #: Candidates taken out now, by key: the owners and milli they freed;
        #: and the pods taken as shrinks, by workload id.
        self._out: dict[tuple[int, int], tuple[list[Owner], int]] = {}
        self._pods_out: dict[int, set[int]] = {}
        self._cands: dict[Item, WorkloadState] = {}
        #: Own-team victims taken while the team was over the same-team rule
        #: (see greedy.py); cleared with every search of a domain.
        self.own_taken: set[tuple[int, int]] = set()

    # -- candidates ------------------------------------------------------------
    def eligible(self, v: WorkloadState) -> bool:
        """6.4's static rules for one indexed candidate (the dynamic test comes later)."""
        if v.id == self.w.id or v.status.is_terminal:
            return False
        if v.status.is_placed:
            return self.for_hold or self._may_displace(v)
        return v.status is Status.QUEUED and not self.for_hold and outranks(self.w, v)

    def _teams(self) -> list[str]:
        """Teams worth looking at: all, or, for elastic W, only those that could
        ever pass 6.4 in this search."""
        if self.for_hold or self.w.spec.is_reserved or not self.shortcuts.bounds:
            return self.ps.victims.teams()
        return self._reachable_teams()

    def _hold_candidates(self) -> list[WorkloadState]:
        """For a starvation hold: every placed workload of the pool, cheapest first."""
        out = [self.ws.workloads[i] for i in sorted(self.ps.users)]
        out = [v for v in out if v.status.is_placed and v.id != self.w.id]
        out.sort(key=lambda v: (state_rank(v), v.spec.priority, -(v.started_at or 0), v.id))
        return out

    def _viable(self) -> bool:
        """Cheap necessary conditions before any candidate is looked at."""
        return viable(self.ws, self.ps, self.w, self.need, self._reach)

    def _reachable_teams(self) -> list[str]:
        return self._reach().teams

    def _reach(self) -> Reach:
        if self._reachable is None:
            self._reachable = reach(self.ws, self.ps, self.w, self.need)
        return self._reachable

    def _may_displace(self, v: WorkloadState) -> bool:
        if v.spec.is_reserved:
            return False
        if self.w.spec.is_reserved or v.team != self.w.team:
            return True
        return v.spec.priority < self.w.spec.priority

    def own_debt(self) -> int:
        """How far (x scale) W's team is now above what 6.4's same-team rule
        allows; a same-team victim must free at least this much."""
        if self._own_limit is None:
            return 0
        return self.ps.ledger.usage_by_team[self._own] * self.ps.scale - self._own_limit

    def own_allows(self, v: WorkloadState) -> bool:
        """6.4's same-team rule for one victim of W's own team, now: with it
        removed too, the team is no further over its share than before."""
        debt = self.own_debt()
        return debt <= 0 or (not v.is_hold and self._milli(v) * self.ps.scale >= debt)

    def passes(self, v: WorkloadState) -> bool:
        """SPEC 6.4's test for ``v`` in the working state at this moment."""
        return self.verdict(v) is Verdict.PASS

    def verdict(self, v: WorkloadState) -> Verdict:
        """6.4's test, telling "not now" from "never again in this search"."""
        spec = v.spec
        team = spec.team
        # Reserved W, W's own team, and reserved nominations (taken by rank
        # alone) pass without the excess test.
        if self._always_passes or team == self._own or spec.wclass is RESERVED:
            return Verdict.PASS
        pair = self._lca.get(team) or self._lca_children(team)
        c_v = pair[1]
        cached = self._verdicts.get(c_v)
        if cached is None:  # the same for every victim under c_V until the next change
            before = self.ps.excess_key(c_v)
            if before <= 0:
                cached = Verdict.FAIL_FOREVER
            elif self.ps.excess_key(pair[0]) < before:
                cached = Verdict.PASS
            else:
                cached = Verdict.FAIL_NOW
                self._thresholds[c_v] = before
            self._verdicts[c_v] = cached
        return cached

    def _block(self, v: WorkloadState) -> tuple[str, int]:
        """A "not now" verdict for ``v`` waits until excess(c_W) < excess(c_V).

        Only removals happen during the greedy, and nothing under c_V is taken
        while its candidates wait (they share the verdict), so excess(c_V)
        stays put: the threshold is fixed, and only victims taken under c_W
        can lower the level it is compared with."""
        c_w, c_v = self._lca_children(v.team)
        return c_w, self._thresholds[c_v]

    def _woken(self, picked: WorkloadState) -> tuple[str, ...]:
        """The teams whose excess taking ``picked`` lowered: its path."""
        return self.ws.tree.path(picked.team)

    def _lca_children(self, team: str) -> tuple[str, str]:
        pair = self._lca.get(team)
        if pair is None:
            pair = self._lca[team] = self.ws.lca_children(self.w.team, team)
        return pair

    # -- trial changes -----------------------------------------------------------
    def remove(self, v: WorkloadState) -> int:
        """Take ``v`` out of the working state (undone by :meth:`_search`);
        returns milli freed."""
        self._verdicts.clear()
        owners, milli = freed_by(self.ps, v, self._pods_out)
        self._out[candidate_key(v)] = (owners, milli)
        if isinstance(v, PodVictim):
            self._pods_out.setdefault(v.id, set()).add(v.pod)
        if not v.is_hold:  # holds are claims, not usage
            self._move(v.spec, -milli)
        self._devices_out(v)
        return milli

    def restore(self, v: WorkloadState) -> None:
        """Put ``v`` back into the working state."""
        self._verdicts.clear()
        self._devices_back(v)
        _owners, milli = self._out.pop(candidate_key(v))
        if isinstance(v, PodVictim):
            self._pods_out[v.id].discard(v.pod)
        if not v.is_hold:
            self._move(v.spec, milli)

    def _may_take(self, v: WorkloadState) -> bool:
        """Shrink before kill, in the greedy: a pod goes only after its newer
        pods, and nothing of a workload already taken whole is left to take."""
        if (v.id, 0) in self._out:
            return False
        if isinstance(v, PodVictim):
            done = self._pods_out.get(v.id, set())
            full = self.ws.workloads[v.id]
            return all(j in done for j in range(v.pod + 1, len(full.placement)))
        return True

    def _move(self, spec: WorkloadSpec, milli: int) -> None:
        """Usage of ``spec``'s team on the ledger, remembered for the undo."""
        key = (spec.team, spec.wclass is RESERVED)
        self.ps.ledger.add(key[0], key[1], milli)
        self._moved[key] = self._moved.get(key, 0) + milli

    def _undo_moves(self) -> None:
        """Put the ledger back as the search found it (its changes are sums,
        so one net change per team restores it exactly)."""
        led = self.ps.ledger
        for (team, is_reserved), milli in self._moved.items():
            if milli:
                led.add(team, is_reserved, -milli)
        self._moved.clear()

    def quota_ok(self) -> bool:
        """Quota with W counted and the current victims removed (SPEC 6 step 3.1)."""
        if self.for_hold:
            return True
        led, team = self.ps.ledger, self.w.team
        if self.w.spec.is_reserved and not led.reserved_fits(team, 0):
            return False
        return led.cap_breach(team, 0) is None

    def fit(self, domain: tuple[str, str] | None, free: int) -> bool:
        """Does W fit now (quota, then devices), without building the placement?"""
        if free < self.need or not self.quota_ok():
            return False
        self.examined += 1
        if self._probe is not None:
            return self._probe.fits()
        return self.ps.cluster.fits(self.req, domain=domain, allow_exiting=True)

    # -- the search --------------------------------------------------------------
    def run(self) -> VictimSet | None:
        """Cheapest victim set over the candidate domains, or None."""
        if not self.for_hold and self.shortcuts.bounds and not self._viable():
            return None
        topo = self.w.spec.topology
        domains: list[tuple[str, str] | None] = [None]
        if topo is not None and topo.mode is TopologyMode.REQUIRED:
            domains = [(topo.level, d) for d in self.ps.cluster.domains(topo.level)]
        best: VictimSet | None = None
        for dom in domains:
            found = self._search(dom)
            if found is not None and (best is None or found.cost < best.cost):
                best = found
        return best

    def _touches(self, v: WorkloadState, dom: tuple[str, str]) -> bool:
        """Does ``v`` (the whole workload, for a pod: its newer pods go first)
        have pods in ``dom``?"""
        labels = self.ps.node_labels
        if isinstance(v, PodVictim):
            v = self.ws.workloads[v.id]
        pods = v.placement if v.status.is_placed else v.nomination
        return any(labels.get(p.node, {}).get(dom[0]) == dom[1] for p in pods)

    def _search(self, dom: tuple[str, str] | None) -> VictimSet | None:
        cluster = self.ps.cluster
        start = cluster.checkpoint()
        self._verdicts.clear()
        self._out.clear()
        self._pods_out.clear()
        self.own_taken.clear()
        if not self.for_hold:
            self._move(self.w.spec, self.need)
        free = cluster.free_milli(owner_of(self.w), allow_exiting=True)
        self._probe = None
        if not self.for_hold and not cluster.claim_of(owner_of(self.w)):
            # Fit changes only on the victims' devices: the probe counts what
            # each removal gains, and the book stays untouched until the set
            # is known.
            self._probe = cluster.probe(self.req, domain=dom)
        chosen, free = greedy(self, dom, free)
        if chosen is None:
            self._probe = None
            self._undo_moves()
            cluster.rollback(start)
            cluster.commit_checkpoint(start)
            return None
        chosen = prune(self, chosen, dom, free)
        if self._probe is not None:
            self._probe = None
            for v in chosen:
                self._devices_out(v)
        res = cluster.place(self.req, domain=dom, allow_exiting=True)
        self._undo_moves()
        cluster.rollback(start)
        cluster.commit_checkpoint(start)
        if not res.ok:  # pragma: no cover - the prune pass keeps a fitting set
            return None
        return self._result(chosen, res.pods, res.domain, "" if dom is None else dom[1])

    def _result(
        self, chosen: list[WorkloadState], placement: Placement, domain: str | None,
        name: str,
    ) -> VictimSet:
        """The set as decisions see it: a workload whose whole was chosen is
        taken whole; one of which only pods were chosen is shrunk by them."""
        whole = {v.id for v in chosen if not isinstance(v, PodVictim)}
        victims: dict[int, None] = {}
        shrinks: dict[int, list[int]] = {}
        for v in chosen:
            victims[v.id] = None
            if isinstance(v, PodVictim) and v.id not in whole:
                shrinks.setdefault(v.id, []).append(v.pod)
        return VictimSet(
            tuple(victims), placement, domain, self._cost(chosen, name),
            {wid: tuple(sorted(pods)) for wid, pods in shrinks.items()},
        )

    def _candidate(self, item: Item) -> WorkloadState:
        """The candidate of an index item (kept for the search)."""
        got = self._cands.get(item)
        if got is None:
            got = self._cands[item] = candidate(self.ws.workloads, item)
        return got

    def _milli(self, v: WorkloadState) -> int:
        """What ``v`` frees: as recorded when it was taken out, else now."""
        got = self._out.get(candidate_key(v))
        return got[1] if got is not None else freed_by(self.ps, v, self._pods_out)[1]

    def _owners(self, v: WorkloadState) -> list[Owner]:
        return self._out[candidate_key(v)][0]

    def _devices_back(self, v: WorkloadState) -> None:
        if self._probe is not None:
            for owner in self._owners(v):
                self._probe.put_back(owner)
        elif v.status.is_placed:
            parts = dict(parts_of(self.ws.workloads[v.id]))
            for owner in self._owners(v):
                self.ps.cluster.occupy(owner, parts[owner])
        else:
            self.ps.cluster.claim(owner_of(v), v.nomination)

    def _devices_out(self, v: WorkloadState) -> None:
        if self._probe is not None:
            for owner in self._owners(v):
                self._probe.take_out(owner)
        elif v.status.is_placed:
            for owner in self._owners(v):
                self.ps.cluster.vacate(owner)
        else:
            self.ps.cluster.unclaim(owner_of(v))

    def _cost(self, chosen: list[WorkloadState], domain: str) -> tuple[int, int, int, int, str]:
        running = sum(self._milli(v) for v in chosen if v.status is Status.RUNNING)
        starting = sum(self._milli(v) for v in chosen if v.status is Status.STARTING)
        top = max((v.spec.priority for v in chosen), default=-1)
        return (running, starting, top, len({v.id for v in chosen}), domain)


def search_victims(
    ws: WorkingState, ps: PoolState, w: WorkloadState, *, for_hold: bool = False,
    counter: Callable[[int], None] | None = None, shortcuts: Shortcuts = ALL_SHORTCUTS,
) -> VictimSet | None:
    """Run a :class:`VictimSearch`; ``counter`` receives the work done."""
    search = VictimSearch(ws, ps, w, for_hold=for_hold, shortcuts=shortcuts)
    result = search.run()
    if counter is not None:
        counter(search.examined)
    return result
