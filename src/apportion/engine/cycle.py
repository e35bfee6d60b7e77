"""``run_cycle(snapshot, config) -> Plan``: SPEC section 6 as numbered steps.

Each step is a method of :class:`_Cycle`; every change goes through the
cycle's :class:`~apportion.engine.statement.Statement`, which records the
decision and updates the working state.

0. ``step0_start_nominated``: nominees whose victims have exited start on the
   nominated devices; a nomination on a node that can no longer take pods is
   released (6.6).
1. ``step1_route``: Pending workloads are routed to a pool, one at a time in
   routing order (6.1).
2. ``step2_entitlements``: entitlements again, with the routed work counted
   (section 4).
3. ``step3_admit``, per pool in name order, for each waiting workload in the
   order of 6.2 (``WaitingQueue``): ``_admit_one`` tries quota and fit (3.1,
   3.2), a move to a pool where it starts now (6.1), a victim set
   (``_preempt``: 6.4, 6.5, 6.6), else it waits with a reason, and the head of
   the line may get a starvation hold (``_wait_or_hold``, 6.7).
4. ``step4_plan``: the decisions, the entitlements and the work counters.

Pure and deterministic: same snapshot, same plan. ``dry_run`` answers "what if
W were submitted now" with the same code, changing nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from apportion.domain.lifecycle import Status, WorkloadState, submitted
from apportion.domain.reasons import Reason, ReasonCode
from apportion.domain.workload import Placement, WorkloadSpec
from apportion.engine import explain
from apportion.engine.admission import Admission
from apportion.engine.apply import cycle_cause
from apportion.engine.owners import owner_of
from apportion.engine.plan import Decision, DecisionKind, Plan
from apportion.engine.policy import FixedQueue, quota_entitlements
from apportion.engine.pool_state import PoolState
from apportion.engine.preemption.search import VictimSet
from apportion.engine.routing import Router
from apportion.engine.snapshot import CycleConfig, Snapshot
from apportion.engine.statement import Statement
from apportion.engine.waiting_order import WaitingQueue, routing_key
from apportion.engine.working_state import WorkingState


def run_cycle(snapshot: Snapshot, config: CycleConfig) -> Plan:
    """One scheduling cycle over a frozen snapshot; returns the plan."""
    return _Cycle(snapshot, config).run()


class _Cycle:
    def __init__(
        self, snapshot: Snapshot, config: CycleConfig, ws: WorkingState | None = None
    ) -> None:
        self.snapshot = snapshot
        self.config = config
        self.ws = ws if ws is not None else WorkingState(snapshot)
        self.stmt = Statement(self.ws, snapshot.now, cycle_cause(config.cycle_id))
        self.adm = Admission(self.ws, self.stmt, config.shortcuts, config.policy)
        self.router = Router(self.ws, self.adm)

    def run(self) -> Plan:
        before = {name: ps.cluster.counters.as_dict() for name, ps in self.ws.pools.items()}
        self._entitlements({})
        self.step0_start_nominated()
        routed = self.step1_route()
        self.step2_entitlements(routed)
        for name in sorted(self.ws.pools):
            self.step3_admit(self.ws.pools[name], set(routed))
        return self.step4_plan(before)

    def step0_start_nominated(self) -> None:
        """Nominees whose victims have exited start on their nominated devices.

        A nomination on a node that can no longer take pods is released.
        """
        for w in self.ws.waiting():
            if w.status is not Status.QUEUED or not w.nomination or w.is_hold:
                continue
            ps = self.ws.pools.get(w.pool or "")
            if ps is None:
                continue
            if not all(p.node in ps.schedulable for p in w.nomination):
                self.stmt.release(ps, w, "a nominated node can no longer take pods")
            elif ps.cluster.can_start_on_claim(owner_of(w)):
                self.stmt.start(ps, w, w.nomination)
        self.stmt.commit()

    def step1_route(self) -> dict[int, str]:
        """Route Pending workloads, one at a time in step 2's order (6.1)."""
        routed: dict[int, str] = {}
        pending = [w for w in self.ws.waiting() if w.status is Status.PENDING]
        for w in sorted(pending, key=routing_key):
            pool, reason = self.router.choose(w)
            if pool is None:
                assert reason is not None
                self.stmt.wait(w, reason)
                continue
            routed[w.id] = pool
            self.stmt.route(w, pool, self.router.last_why)
            self.stmt.commit()
        return routed

    def step2_entitlements(self, routed: dict[int, str]) -> None:
        """Entitlements with the routed work counted (else the shares are the
        ones computed at the start)."""
        if routed:
            self._entitlements(routed)

    def _entitlements(self, routed: dict[int, str]) -> None:
        """SPEC 4's entitlements (capped at the reservations for a
        ``quota_only`` policy, engine/policy.py)."""
        self.ws.compute_entitlements(routed)
        if self.config.policy.quota_only:
            for ps in self.ws.pools.values():
                if ps.entitlements is not None:
                    ps.set_entitlements(quota_entitlements(ps.entitlements, self.ws.tree))

    def step3_admit(self, ps: PoolState, routed_now: set[int]) -> None:
        """Quota, fit, move, preempt or wait, for each waiting workload in order."""
        name = ps.pool.name
        waiting = []
        for w in self.ws.waiting():
            if w.pool != name or w.status is not Status.QUEUED:
                continue
            if w.nomination and not w.is_hold:
                self.stmt.wait(w, w.reason or explain.preempting_reason(ps, w, 0, 0))
                continue
            # never_fits is kept per workload and pool and is False exactly
            # when never_reason would say nothing.
            never = explain.never_reason(ps, w) if self.ws.never_fits(ps, w) else None
            if never is not None:
                self.stmt.unroute(ps, w, never)
                continue
            waiting.append(w)
        policy = self.config.policy
        queue: WaitingQueue | FixedQueue = (
            WaitingQueue(waiting, ps.deficit_key, ps.size_key) if policy.order == "spec"
            else FixedQueue(waiting, policy))
        head_seen = False
        for w in queue:
            self.stmt.touched.clear()
            w = self.ws.workloads[w.id]
            waited = self._admit_one(ps, w, w.id in routed_now, head_seen)
            head_seen = head_seen or waited
            self.stmt.commit()
            queue.touch(self.stmt.touched)

    def step4_plan(self, before: dict[str, dict[str, int]]) -> Plan:
        """The plan: decisions in order, step 2's entitlements, the work done."""
        counters = dict(self.stmt.counters)
        for name, ps in self.ws.pools.items():  # this cycle's work only
            for key, value in ps.cluster.counters.as_dict().items():
                counters[key] = counters.get(key, 0) + value - before[name].get(key, 0)
        return Plan(
            cycle_id=self.config.cycle_id,
            snapshot_version=self.snapshot.version,
            now=self.snapshot.now,
            decisions=tuple(self.stmt.decisions),
            entitlements={
                name: dict(ps.entitlements.by_team) if ps.entitlements else {}
                for name, ps in self.ws.pools.items()
            },
            counters=counters,
        )

    def _admit_one(
        self, ps: PoolState, w: WorkloadState, is_routed_now: bool, head_seen: bool
    ) -> bool:
        """Process one workload; True if it stays waiting."""
        adm = self.adm
        occupy = not w.nomination  # a held workload starts through its claim
        result, _pods = adm.try_fit(ps, w, occupy=occupy)
        if result is not None and result.ok:
            self.stmt.start(ps, w, result.pods, occupied=occupy)
            return False
        if not is_routed_now:
            elsewhere = self.router.start_elsewhere(w)
            if elsewhere is not None:
                self.stmt.move(w, *elsewhere)
                return False
        found = adm.find_victims(ps, w)
        if found is not None:
            self._preempt(ps, w, found)
            return False
        if result is None:
            reason = explain.quota_reason(ps, w, w.spec.min_pods * ps.charge(w))
            if reason is None:  # quota allowed fewer pods than the gang needs
                reason = Reason(ReasonCode.WAITING_FOR_CAPACITY, explain.needs(ps, w))
        else:
            reason = explain.fit_reason(ps, w, result, adm.others_elastic(ps, w))
        self._wait_or_hold(ps, w, reason, head_seen, quota_ok=result is not None)
        return True

    def _preempt(self, ps: PoolState, w: WorkloadState, found: VictimSet) -> None:
        """Mark the victims (whole, shrunk, or nominations taken), then
        nominate ``w`` on its placement, or start it when nothing is left to
        exit (6.6)."""
        exits_at = self.snapshot.now + ps.pool.preemption_grace
        freed = 0
        for vid in found.victims:
            v = self.ws.workloads[vid]
            pods = found.shrinks.get(vid)
            if pods:
                freed += self.stmt.shrink(ps, v, pods, w, exits_at)
            elif v.status.is_placed:
                freed += self.stmt.preempt(ps, v, w, exits_at)
            else:
                self.stmt.release(ps, v, f"nomination taken by {w.name} (id {w.id})", by=w)
        self.stmt.nominate_or_start(ps, w, found.placement, len(found.victims), freed)

    def _wait_or_hold(
        self, ps: PoolState, w: WorkloadState, reason: Reason, head_seen: bool, quota_ok: bool
    ) -> None:
        """Wait with ``reason``; the head of the line may get a starvation hold."""
        hold_after = ps.pool.starvation_hold_after
        if head_seen or hold_after is None:
            self.stmt.wait(w, reason)
            return
        since = w.head_since if w.head_since is not None else self.snapshot.now
        if w.nomination and w.is_hold:
            self.stmt.wait(w, reason, head_since=since)
            return
        if quota_ok and self.snapshot.now - since >= hold_after:
            placement = self.adm.hold_placement(ps, w)
            if placement is not None:
                held = Reason(reason.code, f"{reason.message}; starvation hold since {since}")
                self.stmt.hold(ps, w, placement, held, since)
                return
        self.stmt.wait(w, reason, head_since=since)


@dataclass(frozen=True, slots=True)
class DryRun:
    """What would happen to a workload submitted now (nothing is changed)."""

    workload_id: int
    pool: str | None
    starts_now: bool
    reason: Reason | None
    victims: tuple[tuple[int, int], ...]
    placement: Placement
    decisions: tuple[Decision, ...]


def dry_run(snapshot: Snapshot, spec: WorkloadSpec, config: CycleConfig) -> DryRun:
    """Run the real cycle on the snapshot plus ``spec`` submitted now, and report
    what it decided for it: pool, start or wait (reason), victims (id, milli)."""
    new_id = max((w.id for w in snapshot.workloads), default=0) + 1
    probe = submitted(new_id, spec, snapshot.now, cause="dry-run")
    plan = run_cycle(replace(snapshot, workloads=(*snapshot.workloads, probe)), config)
    mine = plan.for_workload(new_id)
    pool = next((d.pool for d in reversed(mine) if d.pool), None)
    start = next((d for d in mine if d.kind is DecisionKind.START), None)
    nominate = next((d for d in mine if d.kind is DecisionKind.NOMINATE), None)
    reason = next((d.reason for d in reversed(mine) if d.reason is not None), None)
    victims = tuple(
        (d.workload_id, d.milli) for d in plan.decisions
        if d.kind is DecisionKind.PREEMPT and d.by == new_id
    )
    placement = start.placement if start else (nominate.placement if nominate else ())
    return DryRun(new_id, pool, start is not None, None if start else reason, victims,
                  placement, mine)


__all__ = ["DryRun", "dry_run", "run_cycle"]


