"""SPEC 6 step 3's questions for one waiting workload: quota, fit, victims."""

from __future__ import annotations

from apportion.domain.lifecycle import WorkloadState
from apportion.domain.workload import Placement
from apportion.engine.placement import PlacementResult
from apportion.engine.policy import SPEC_POLICY, Policy
from apportion.engine.pool_state import PoolState
from apportion.engine.preemption.search import VictimSet, search_victims
from apportion.engine.snapshot import ALL_SHORTCUTS, Shortcuts
from apportion.engine.statement import Statement
from apportion.engine.working_state import WorkingState


class Admission:
    """Questions about a waiting workload in the working state as it is now:
    how many pods quota allows, whether and where it fits, which victims would
    make room. It changes nothing; the cycle records outcomes in its
    :class:`~apportion.engine.statement.Statement`.
    """

    def __init__(
        self, ws: WorkingState, stmt: Statement, shortcuts: Shortcuts = ALL_SHORTCUTS,
        policy: Policy = SPEC_POLICY,
    ) -> None:
        self.ws = ws
        self.policy = policy
        self.shortcuts = shortcuts
        self.stmt = stmt
        self.bump = stmt.bump
        self._failed: dict[tuple[object, ...], int] = {}

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
        a successful placement is occupied at once; start it with
        ``Statement.start(..., occupied=True)``."""
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

    def hold_placement(self, ps: PoolState, w: WorkloadState) -> Placement | None:
        """Starvation hold (SPEC 6.7): the placement that waits for the fewest,
        cheapest workloads to end, or None when none could ever be held."""
        found = search_victims(
            self.ws, ps, w, for_hold=True, counter=self._count_search, shortcuts=self.shortcuts
        )
        return None if found is None else found.placement

    def _count_search(self, examined: int) -> None:
        self.bump("victim_candidates_examined", examined)
        self.bump("victim_searches")

    def find_victims(self, ps: PoolState, w: WorkloadState) -> VictimSet | None:
        """A victim set for ``w``, or None.

        A search that failed is not repeated for a workload of the same team,
        class, priority and shape while nothing has changed since (same
        generation): it would examine the same candidates and fail the same way.
        A policy without preemption never finds one; with ``quota_only``,
        elastic work looks for victims only within its team's quota.
        """
        if not self.policy.is_spec and not self._may_preempt(ps, w):
            return None
        key: tuple[object, ...] | None = None
        if not w.nomination and self.shortcuts.failed_search_memo:
            spec = w.spec
            key = (ps.pool.name, w.team, spec.wclass, spec.priority, ps.charge(w),
                   spec.request.whole_devices, spec.pods, spec.min_pods, spec.topology,
                   tuple(sorted(spec.node_selector.items())), spec.gpu_types,
                   spec.cpu_milli, spec.memory_mib)
            if self._failed.get(key) == self.stmt.generation:
                self.bump("victim_searches_skipped")
                return None
        found = search_victims(
            self.ws, ps, w, counter=self._count_search, shortcuts=self.shortcuts
        )
        if found is None and key is not None:
            self._failed[key] = self.stmt.generation
        return found

    def _may_preempt(self, ps: PoolState, w: WorkloadState) -> bool:
        policy = self.policy
        if not policy.preemption:
            return False
        if policy.quota_only and not w.spec.is_reserved:
            size = w.spec.min_pods * ps.charge(w)
            return ps.ledger.usage_by_team[w.team] + size <= ps.entitlement(w.team)
        return True

    def others_elastic(self, ps: PoolState, w: WorkloadState) -> int:
        """Milli of other teams' elastic work in the pool (for FAIR_SHARE)."""
        if w.spec.is_reserved:
            return 0
        led = ps.ledger
        total = sum(led.elastic_usage(t) for t in self.ws.tree.top_level())
        return total - led.elastic_usage(w.team)
