"""Allocation choice (SPEC 6.1): which pool a workload goes to.

Among the pools that match its ``gpu_type``/``pool`` and could ever hold it,
prefer, in order: it starts now without preemption; it starts now with the
cheapest preemption; (elastic) it runs inside its team's own reservation;
most entitlement headroom; pool name.
"""

from __future__ import annotations

from fractions import Fraction

from apportion.domain.lifecycle import WorkloadState
from apportion.domain.reasons import Reason, ReasonCode
from apportion.domain.workload import Placement
from apportion.engine import explain
from apportion.engine.admission import Admission
from apportion.engine.pool_state import PoolState
from apportion.engine.working_state import WorkingState

_NO_COST = (0, 0, 0, 0, "")
Score = tuple[int, tuple[int, int, int, int, str], int, Fraction | int, str]


class Router:
    def __init__(self, ws: WorkingState, adm: Admission) -> None:
        self.ws = ws
        self.adm = adm
        self.last_why = ""

    def matching(self, w: WorkloadState) -> list[PoolState]:
        """Pools that match the pin and the GPU type, by name."""
        out = []
        for name in sorted(self.ws.pools):
            ps = self.ws.pools[name]
            if w.spec.pool is not None and w.spec.pool != name:
                continue
            out.append(ps)
        return out

    def choose(self, w: WorkloadState) -> tuple[str | None, Reason | None]:
        """The best pool for a Pending workload, or (None, why none can ever hold it).

        :attr:`last_why` then says, in words, why that pool was chosen.
        """
        pools = self.matching(w)
        if not pools:
            where = f"no pool named {w.spec.pool}" if w.spec.pool else "no pools exist"
            return None, Reason(ReasonCode.NO_ELIGIBLE_POOL, f"{explain.needs_any(w)}; {where}")
        feasible = []
        reasons = []
        for ps in pools:
            why = explain.never_reason(ps, w) if self.ws.never_fits(ps, w) else None
            if why is None:
                feasible.append(ps)
            else:
                reasons.append(why)
        if not feasible:
            best = explain.first(reasons)
            if len(reasons) > 1:
                detail = "; ".join(r.message for r in reasons)
                best = Reason(best.code, detail)
            return None, best
        if len(feasible) == 1:
            self.last_why = "the only pool that can hold it"
            return feasible[0].pool.name, None
        starts = [self.adm.can_start(ps, w) for ps in feasible]
        # Of two pools, one where it can start now wins over the other whatever
        # a victim search there would find (and the reason names only the
        # first criterion): no search is needed then.
        search = not (len(feasible) == 2 and starts.count(True) == 1)
        scored = sorted(
            (self.score(ps, w, starts=can, search=search), ps.pool.name)
            for ps, can in zip(feasible, starts, strict=True)
        )
        self.last_why = _why(scored[0], scored[1])
        return scored[0][1], None

    def score(
        self, ps: PoolState, w: WorkloadState, *, now_only: bool = False,
        starts: bool | None = None, search: bool = True,
    ) -> Score:
        """Lower is better. With ``now_only`` no victim search is run (rank 3
        when it cannot start now); without ``search`` neither (rank 2).
        ``starts`` is ``can_start`` when the caller asked it already."""
        if starts is None:
            starts = self.adm.can_start(ps, w)
        if starts:
            rank, cost = 0, _NO_COST
        elif now_only:
            rank, cost = 3, _NO_COST
        elif not search:
            rank, cost = 2, _NO_COST
        else:
            found = self.adm.find_victims(ps, w)
            rank, cost = (1, found.cost) if found is not None else (2, _NO_COST)
        size = w.spec.min_pods * ps.charge(w)
        led = ps.ledger
        inside = 0
        if not w.spec.is_reserved:
            inside = 0 if led.usage(w.team) + size <= led.reservation(w.team) else 1
        if ps.scale == 1:  # whole shares: the same value without a Fraction
            headroom: Fraction | int = ps.scaled.get(w.team, 0) - led.usage(w.team)
        else:
            headroom = ps.entitlement(w.team) - led.usage(w.team)
        return (rank, cost, inside, -headroom, ps.pool.name)

    def start_elsewhere(self, w: WorkloadState) -> tuple[PoolState, Placement] | None:
        """Another pool where Queued ``w``, which cannot start in its own, can
        start right now without preemption, and its placement there (6.1)."""
        if w.nomination:
            return None
        options = []
        for ps in self.matching(w):
            if ps.pool.name == w.pool or (
                self.ws.never_fits(ps, w) and explain.never_reason(ps, w) is not None
            ):
                continue
            score = self.score(ps, w, now_only=True)
            if score[0] == 0:
                options.append((score, ps.pool.name))
        if not options:
            return None
        target = self.ws.pools[min(options)[1]]
        result, _pods = self.adm.try_fit(target, w)
        if result is None or not result.ok:  # pragma: no cover - scored just above
            return None
        return target, result.pods


_CRITERIA = (
    ("it can start there now", "it can start there now with preemption",
     "it could start there with preemption", "it fits there"),
    "the cheapest preemption (fewest running GPUs, then starting GPUs, priority, count)",
    "its team's own reservation there",
    "more fair-share headroom there",
    "pool name",
)


def _why(best: tuple[Score, str], other: tuple[Score, str]) -> str:
    """Which of 6.1's criteria put ``best`` ahead of the runner-up, in words."""
    for i, (a, b) in enumerate(zip(best[0], other[0], strict=True)):
        if a != b:
            if i == 0:
                assert isinstance(a, int)
                return f"{_CRITERIA[0][min(a, 3)]} (chosen over pool {other[1]})"
            return f"chosen over pool {other[1]} by {_CRITERIA[i]}"
    return f"chosen over pool {other[1]}"  # pragma: no cover - names differ
