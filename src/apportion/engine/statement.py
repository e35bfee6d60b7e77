"""The one path through which a cycle changes anything (KAI-Scheduler's Statement).

Each method is one kind of change: route, unroute, move, start, preempt (whole
or a shrink), nominate, release a nomination, hold, wait with a reason. Each
updates the working state (devices, ledger, victim index), builds the
workload's next state with :func:`apportion.engine.apply.effect` — the same
function that later applies the plan to the stored states — and appends the
decision. Admission and routing only answer questions (quota, fit, victims,
scores) and call these.

Between workloads the cycle calls :meth:`commit` (nothing is rolled back past
it); :meth:`checkpoint` and :meth:`rollback` take back everything since a
checkpoint: decisions, workload states, devices and usage.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from apportion.domain.lifecycle import WorkloadState, pods_phrase
from apportion.domain.reasons import Reason
from apportion.domain.workload import Placement, placement_milli
from apportion.engine import explain
from apportion.engine.apply import effect
from apportion.engine.owners import owner_of, owners_of, parts_of
from apportion.engine.plan import Decision, DecisionKind
from apportion.engine.pool_state import PoolState
from apportion.engine.working_state import WorkingState


@dataclass(frozen=True, slots=True)
class Mark:
    """A :meth:`Statement.checkpoint`: where to roll back to."""

    decisions: int
    saved: int
    token: tuple[int, dict[str, int]]


class Statement:
    """The decisions of one cycle, in order, and the working state they made."""

    def __init__(self, ws: WorkingState, now: int, cause: str) -> None:
        self.ws = ws
        self.now = now
        self.cause = cause
        self.decisions: list[Decision] = []
        self.counters: dict[str, int] = {}
        #: Bumped by every change to devices or usage; a failed victim search
        #: is remembered for one generation (Admission.find_victims).
        self.generation = 0
        #: Teams whose usage changed since the cycle last looked (queue order).
        self.touched: set[str] = set()
        self._saved: list[tuple[int, WorkloadState]] = []
        self._marks = 0

    def bump(self, name: str, by: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + by

    # -- checkpoints ---------------------------------------------------------
    def checkpoint(self) -> Mark:
        self._marks += 1
        return Mark(len(self.decisions), len(self._saved), self.ws.checkpoint())

    def rollback(self, mark: Mark) -> None:
        """Take back every change since ``mark`` (and release it)."""
        self.ws.rollback(mark.token)
        self.ws.release(mark.token)
        while len(self._saved) > mark.saved:
            wid, old = self._saved.pop()
            now = self.ws.workloads[wid]
            if now.pool != old.pool and now.pool in self.ws.pools:
                self.ws.unindex(self.ws.pools[now.pool], wid)
            self.ws.workloads[wid] = old
            ps = self.ws.pools.get(old.pool or "")
            if ps is not None:
                self.ws.set_holder(ps, wid, bool(old.nomination) and old.is_hold)
                self.ws.index(ps, old)
        del self.decisions[mark.decisions:]
        self.generation += 1
        self._marks -= 1

    def commit(self) -> None:
        """Keep everything so far: the undo logs of the working state go."""
        if self._marks == 0:
            self._saved.clear()
            self.ws.forget_undo()

    # -- the record ------------------------------------------------------------
    def _record(self, d: Decision) -> WorkloadState:
        old = self.ws.workloads[d.workload_id]
        new = effect(old, d, self.now, self.cause).state
        if new is not old:
            if self._marks:
                self._saved.append((old.id, old))
            self.ws.workloads[old.id] = new
        self.decisions.append(d)
        return new

    def _drop_claim(self, ps: PoolState, w: WorkloadState) -> None:
        """Give up ``w``'s nomination or hold: devices, usage, holder entry."""
        ps.cluster.unclaim(owner_of(w))
        self.ws.uncount(ps, w)
        self.ws.set_holder(ps, w.id, False)

    # -- pools -------------------------------------------------------------------
    def route(self, w: WorkloadState, pool: str, why: str) -> None:
        """Pending -> Queued in ``pool`` (6.1)."""
        self._record(Decision(DecisionKind.ROUTE, w.id, pool, message=f"pool {pool}: {why}"))

    def unroute(self, ps: PoolState, w: WorkloadState, reason: Reason) -> None:
        """Queued -> Pending: ``ps`` can never hold ``w`` now."""
        self.generation += 1
        if w.nomination:
            self._drop_claim(ps, w)
        self.ws.unindex(ps, w.id)
        self._record(Decision(DecisionKind.UNROUTE, w.id, None, reason=reason))

    def move(self, w: WorkloadState, target: PoolState, placement: Placement) -> None:
        """``w`` changes pool to ``target`` and starts there on ``placement``."""
        moved = self._record(Decision(DecisionKind.MOVE, w.id, target.pool.name))
        self.start(target, moved, placement)

    # -- starting ----------------------------------------------------------------
    def start(
        self, ps: PoolState, w: WorkloadState, placement: Placement, *, occupied: bool = False
    ) -> None:
        """Queued -> Starting on ``placement`` (dropping any hold or nomination);
        ``occupied``: the placement's devices are occupied already, as one owner."""
        self.generation += 1
        cluster = ps.cluster
        how = "on its nominated devices" if w.nomination and not w.is_hold else (
            "on the devices held for it" if w.nomination else "on free GPUs")
        if w.nomination:
            self._drop_claim(ps, w)
        parts = parts_of(w, placement)
        if occupied and len(parts) > 1:  # occupied as one owner: hold the pods apart
            cluster.vacate(owner_of(w))
            occupied = False
        if not occupied:
            for owner, part in parts:
                cluster.occupy(owner, part)
        milli = placement_milli(placement)
        self.ws.count(ps, w, milli)
        nodes = sorted({p.node for p in placement})
        where = ", ".join(nodes[:3]) + (f" and {len(nodes) - 3} more" if len(nodes) > 3 else "")
        started = self._record(Decision(
            DecisionKind.START, w.id, ps.pool.name, placement, milli=milli,
            message=f"admitted in pool {ps.pool.name} {how} ({where})",
        ))
        self.ws.index(ps, started)
        self.touched.add(w.team)
        self.bump("started")

    def wait(self, w: WorkloadState, reason: Reason, head_since: int | None = None) -> None:
        """``w`` stays waiting with ``reason``."""
        self._record(
            Decision(DecisionKind.WAIT, w.id, w.pool, reason=reason, head_since=head_since)
        )

    # -- preemption --------------------------------------------------------------
    def preempt(self, ps: PoolState, v: WorkloadState, by: WorkloadState, exits_at: int) -> int:
        """The whole of placed ``v`` is preempted for ``by``; returns milli freed.
        Its devices are exiting until ``exits_at`` (free at once without grace)."""
        self.generation += 1
        self.touched.add(v.team)
        self.ws.uncount(ps, v)
        milli = v.placed_milli
        for owner in owners_of(v):
            if exits_at > self.now:
                ps.cluster.mark_exiting(owner)
            else:
                ps.cluster.vacate(owner)
        self.ws.unindex(ps, v.id)
        self._record(Decision(
            DecisionKind.PREEMPT, v.id, ps.pool.name, by=by.id, milli=milli,
            exits_at=exits_at, message=f"preempted by {by.name} (id {by.id})",
        ))
        self.bump("preempted")
        return milli

    def shrink(
        self, ps: PoolState, v: WorkloadState, pods: tuple[int, ...], by: WorkloadState,
        exits_at: int,
    ) -> int:
        """Take ``pods`` (its newest) from Running ``v`` for ``by`` (SPEC 6.5's
        shrink): they exit like a victim, ``v`` runs on; returns milli freed."""
        self.generation += 1
        self.touched.add(v.team)
        milli = placement_milli(tuple(v.placement[i] for i in pods))
        self.ws.uncount_part(ps, v, milli)
        for i in pods:
            owner = (v.id, v.attempt, i + 1)
            if exits_at > self.now:
                ps.cluster.mark_exiting(owner)
            else:
                ps.cluster.vacate(owner)
        keep = len(v.placement) - len(pods)
        shrunk = self._record(Decision(
            DecisionKind.PREEMPT, v.id, ps.pool.name, by=by.id, milli=milli,
            exits_at=exits_at, pods=pods,
            message=f"shrunk: {pods_phrase(pods)} preempted by {by.name} (id {by.id}); "
                    f"runs on with {keep} of {v.spec.pods} pods",
        ))
        self.ws.index(ps, shrunk)
        self.bump("preempted")
        self.bump("shrunk")
        return milli

    # -- nominations and holds ---------------------------------------------------
    def release(
        self, ps: PoolState, w: WorkloadState, message: str, by: WorkloadState | None = None
    ) -> None:
        """``w``'s nomination or hold goes (taken by ``by``, or no longer
        possible); ``w`` is back in line."""
        self.generation += 1
        self.touched.add(w.team)
        self._drop_claim(ps, w)
        self.ws.unindex(ps, w.id)
        self._record(Decision(
            DecisionKind.DENOMINATE, w.id, ps.pool.name, by=by.id if by else None,
            message=message,
        ))

    def nominate_or_start(
        self, ps: PoolState, w: WorkloadState, placement: Placement, victims: int, freed: int
    ) -> None:
        """After its victims: ``w`` starts on ``placement`` if the devices are
        free now (no grace), else they are nominated for it (6.6)."""
        cluster = ps.cluster
        if w.nomination:  # a held workload: the nomination replaces its hold
            self._drop_claim(ps, w)
            w = replace(w, nomination=(), is_hold=False)
        cluster.claim(owner_of(w), placement)
        if cluster.can_start_on_claim(owner_of(w)):
            cluster.unclaim(owner_of(w))
            self.start(ps, w, placement)
            return
        milli = placement_milli(placement)
        self.ws.count(ps, w, milli)
        self.touched.add(w.team)
        reason = explain.preempting_reason(ps, w, victims, freed, placement)
        nominated = self._record(Decision(
            DecisionKind.NOMINATE, w.id, ps.pool.name, placement, reason=reason, milli=milli,
        ))
        self.ws.index(ps, nominated)

    def hold(
        self, ps: PoolState, w: WorkloadState, placement: Placement, reason: Reason, since: int
    ) -> None:
        """Starvation hold (6.7) of ``placement`` for ``w``."""
        self.generation += 1
        if w.nomination:
            ps.cluster.unclaim(owner_of(w))
        ps.cluster.claim(owner_of(w), placement)
        self.ws.set_holder(ps, w.id, True)
        held = self._record(Decision(
            DecisionKind.HOLD, w.id, ps.pool.name, placement, reason=reason,
            head_since=since, message="starvation hold",
        ))
        self.ws.index(ps, held)
