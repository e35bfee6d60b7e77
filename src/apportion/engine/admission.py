"""SPEC 6 step 3 for one waiting workload: quota, fit, preempt, or wait."""

from __future__ import annotations

from dataclasses import replace

from apportion.domain.lifecycle import Status, WorkloadState, pods_phrase
from apportion.domain.reasons import Reason
from apportion.domain.workload import Placement
from apportion.engine import explain
from apportion.engine.placement import PlacementResult
from apportion.engine.plan import Decision, DecisionKind
from apportion.engine.preemption.search import VictimSet, search_victims
from apportion.engine.working_state import PoolState, WorkingState, owner_of, owners_of, parts_of


class Admission:
    """Decisions for waiting workloads, recorded in ``decisions`` in order.

    Every change goes into the working state at once, so later decisions of
    the cycle see it.
    """

    def __init__(self, ws: WorkingState, now: int) -> None:
        self.ws = ws
        self.now = now
        self.decisions: list[Decision] = []
        self.counters: dict[str, int] = {}
        #: Bumped by every committed change; failed searches are remembered per
        #: generation (see :meth:`find_victims`).
        self.generation = 0
        self._failed: dict[tuple[object, ...], int] = {}
        self.touched: set[str] = set()

    def bump(self, name: str, by: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + by

    # -- quota -------------------------------------------------------------------
    def quota_pods(self, ps: PoolState, w: WorkloadState) -> int:
        """Most pods (<= spec.pods) quota lets ``w`` start now; < min_pods means no."""
        charge = ps.charge(w)
        pods = w.spec.pods
        led = ps.ledger
        if w.spec.is_reserved and not led.reserved_fits(w.team, pods * charge):
            pods = min(pods, led.reserved_room(w.team) // charge if charge else pods)
        room = led.cap_headroom(w.team)
        if room is not None and charge:
            pods = min(pods, max(0, room) // charge)
        return pods

    def try_fit(
        self, ps: PoolState, w: WorkloadState, *, occupy: bool = False
    ) -> tuple[PlacementResult | None, int]:
        """Quota then fit on free capacity. Returns (result, pods quota allows).

        With ``occupy`` (for a workload without a nomination, about to start)
        a successful placement is occupied at once; :meth:`start` it with
        ``occupied=True``."""
        pods = self.quota_pods(ps, w)
        if pods < w.spec.min_pods:
            return None, pods
        self.bump("placements_tried")
        if occupy:
            if w.nomination:
                raise ValueError("a nominated workload starts through its claim")
            return ps.cluster.place_and_occupy(ps.request(w, pods)), pods
        return ps.cluster.place(ps.request(w, pods)), pods

    def can_start(self, ps: PoolState, w: WorkloadState) -> bool:
        """Would :meth:`try_fit` succeed? (Counts from the indexes, packs nothing.)"""
        pods = self.quota_pods(ps, w)
        if pods < w.spec.min_pods:
            return False
        self.bump("placements_tried")
        return ps.cluster.fits(ps.request(w, pods))

    # -- outcomes ----------------------------------------------------------------
    def start(
        self, ps: PoolState, w: WorkloadState, placement: Placement, *, occupied: bool = False
    ) -> None:
        """Queued -> Starting on ``placement`` (dropping any hold or nomination);
        ``occupied``: :meth:`try_fit` occupied the devices already."""
        self.generation += 1
        cluster = ps.cluster
        if w.nomination:
            cluster.unclaim(owner_of(w))
            self.ws.uncount(ps, w)
            self.ws.set_holder(ps, w.id, False)
        parts = parts_of(w, placement)
        if occupied and len(parts) > 1:  # occupied as one owner: hold the pods apart
            cluster.vacate(owner_of(w))
            occupied = False
        if not occupied:
            for owner, part in parts:
                cluster.occupy(owner, part)
        milli = sum(p.milli for p in placement)
        self.ws.count(ps, w, milli)
        started = replace(
            w, status=Status.STARTING, placement=placement, nomination=(), is_hold=False,
            pool=ps.pool.name, started_at=self.now,
        )
        self.ws.workloads[w.id] = started
        self.ws.index(ps, started)
        self.touched.add(w.team)
        how = "on its nominated devices" if w.nomination and not w.is_hold else (
            "on the devices held for it" if w.nomination else "on free GPUs")
        nodes = sorted({p.node for p in placement})
        where = ", ".join(nodes[:3]) + (f" and {len(nodes) - 3} more" if len(nodes) > 3 else "")
        self.decisions.append(Decision(
            DecisionKind.START, w.id, ps.pool.name, placement, milli=milli,
            message=f"admitted in pool {ps.pool.name} {how} ({where})",
        ))
        self.bump("started")

    def wait(self, w: WorkloadState, reason: Reason, head_since: int | None = None) -> None:
        self.decisions.append(
            Decision(DecisionKind.WAIT, w.id, w.pool, reason=reason, head_since=head_since)
        )

    def preempt(self, ps: PoolState, w: WorkloadState, found: VictimSet) -> None:
        """Mark the victims, then nominate ``w`` on its placement (or start it)."""
        self.generation += 1
        grace = ps.pool.preemption_grace
        exits_at = self.now + grace
        freed = 0
        for vid in found.victims:
            v = self.ws.workloads[vid]
            self.touched.add(v.team)
            pods = found.shrinks.get(vid)
            if pods:
                freed += self._shrink(ps, w, v, pods, exits_at)
                continue
            self.ws.uncount(ps, v)
            if v.status.is_placed:
                freed += v.placed_milli
                for owner in owners_of(v):
                    if grace > 0:
                        ps.cluster.mark_exiting(owner)
                    else:
                        ps.cluster.vacate(owner)
                self.ws.workloads[vid] = replace(v, status=Status.PREEMPTED)
                self.ws.unindex(ps, vid)
                self.decisions.append(Decision(
                    DecisionKind.PREEMPT, vid, ps.pool.name, by=w.id, milli=v.placed_milli,
                    exits_at=exits_at, message=f"preempted by {w.name} (id {w.id})",
                ))
                self.bump("preempted")
            else:
                ps.cluster.unclaim(owner_of(v))
                self.ws.set_holder(ps, vid, False)
                self.ws.unindex(ps, vid)
                self.ws.workloads[vid] = replace(v, nomination=(), is_hold=False)
                self.decisions.append(Decision(
                    DecisionKind.DENOMINATE, vid, ps.pool.name, by=w.id,
                    message=f"nomination taken by {w.name} (id {w.id})",
                ))
        self._nominate_or_start(ps, w, found, freed)

    def _shrink(
        self, ps: PoolState, w: WorkloadState, v: WorkloadState, pods: tuple[int, ...],
        exits_at: int,
    ) -> int:
        """Take ``pods`` (its newest) from Running ``v`` for ``w`` (SPEC 6.5's
        shrink): they exit like a victim, ``v`` runs on; returns milli freed."""
        taken = [v.placement[i] for i in pods]
        milli = sum(p.milli for p in taken)
        self.ws.uncount_part(ps, v, milli)
        for i in pods:
            owner = (v.id, v.attempt, i + 1)
            if exits_at > self.now:
                ps.cluster.mark_exiting(owner)
            else:
                ps.cluster.vacate(owner)
        keep = len(v.placement) - len(pods)
        shrunk = replace(v, placement=v.placement[:keep])
        self.ws.workloads[v.id] = shrunk
        self.ws.index(ps, shrunk)
        self.decisions.append(Decision(
            DecisionKind.PREEMPT, v.id, ps.pool.name, by=w.id, milli=milli,
            exits_at=exits_at, pods=pods,
            message=f"shrunk: {pods_phrase(pods)} preempted by {w.name} (id {w.id}); "
                    f"runs on with {keep} of {v.spec.pods} pods",
        ))
        self.bump("preempted")
        self.bump("shrunk")
        return milli

    def _nominate_or_start(
        self, ps: PoolState, w: WorkloadState, found: VictimSet, freed: int
    ) -> None:
        cluster = ps.cluster
        if w.nomination:
            cluster.unclaim(owner_of(w))
            self.ws.uncount(ps, w)
            self.ws.set_holder(ps, w.id, False)
            w = replace(w, nomination=(), is_hold=False)
        cluster.claim(owner_of(w), found.placement)
        if cluster.can_start_on_claim(owner_of(w)):
            cluster.unclaim(owner_of(w))
            self.start(ps, w, found.placement)
            return
        milli = sum(p.milli for p in found.placement)
        self.ws.count(ps, w, milli)
        self.touched.add(w.team)
        reason = explain.preempting_reason(ps, w, len(found.victims), freed)
        nominated = replace(w, nomination=found.placement, is_hold=False, reason=reason)
        self.ws.workloads[w.id] = nominated
        self.ws.index(ps, nominated)
        self.decisions.append(Decision(
            DecisionKind.NOMINATE, w.id, ps.pool.name, found.placement, reason=reason,
            milli=milli,
        ))

    def hold(self, ps: PoolState, w: WorkloadState, reason: Reason, since: int) -> bool:
        """Starvation hold (SPEC 6.7) on the placement that waits for the fewest, cheapest
        workloads to end. Returns False when no placement could ever be held."""
        found = search_victims(self.ws, ps, w, for_hold=True, counter=self._count_search)
        if found is None:
            return False
        self.generation += 1
        if w.nomination:
            ps.cluster.unclaim(owner_of(w))
        ps.cluster.claim(owner_of(w), found.placement)
        self.ws.set_holder(ps, w.id, True)
        held = replace(w, nomination=found.placement, is_hold=True)
        self.ws.workloads[w.id] = held
        self.ws.index(ps, held)
        self.decisions.append(Decision(
            DecisionKind.HOLD, w.id, ps.pool.name, found.placement, reason=reason,
            head_since=since, message="starvation hold",
        ))
        return True

    def _count_search(self, examined: int) -> None:
        self.bump("victim_candidates_examined", examined)
        self.bump("victim_searches")

    def find_victims(self, ps: PoolState, w: WorkloadState) -> VictimSet | None:
        """A victim set for ``w``, or None.

        A search that failed is not repeated for a workload of the same team,
        class, priority and shape while nothing has changed since (same
        generation): it would examine the same candidates and fail the same way.
        """
        key: tuple[object, ...] | None = None
        if not w.nomination:
            spec = w.spec
            key = (ps.pool.name, w.team, spec.wclass, spec.priority, ps.charge(w),
                   spec.request.whole_devices, spec.pods, spec.min_pods, spec.topology,
                   tuple(sorted(spec.node_selector.items())), spec.gpu_type)
            if self._failed.get(key) == self.generation:
                self.bump("victim_searches_skipped")
                return None
        found = search_victims(self.ws, ps, w, counter=self._count_search)
        if found is None and key is not None:
            self._failed[key] = self.generation
        return found

    def others_elastic(self, ps: PoolState, w: WorkloadState) -> int:
        """Milli of other teams' elastic work in the pool (for FAIR_SHARE)."""
        if w.spec.is_reserved:
            return 0
        led = ps.ledger
        total = sum(led.elastic_usage(t) for t in self.ws.tree.top_level())
        return total - led.elastic_usage(w.team)
